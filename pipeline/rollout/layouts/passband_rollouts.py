"""``passband_rollouts``: passband's own published ``rollouts`` config (one item and policy a row).

Matched by ``problem_id`` (``dump.match: problem_id``), or by its ``problem`` text. ``generations`` are samples
0, 1, ... of the item; ``finish_reasons`` and ``generation_token_length`` are kept; passband's verdict of the
time (``correctness_math_verify``) is the upstream correctness, so a round trip reports its own agreement. A
config with several policies is read for one (``policy``: its name or policy_id; required then).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import Field

from pipeline.config import Model
from pipeline.rollout.layout import (
    LAYOUTS,
    DumpRecord,
    Layout,
    LayoutError,
    first_of,
    samples_of,
    text_of,
    texts_of,
)


@LAYOUTS.register
class PassbandRollouts(Layout):
    name = "passband_rollouts"
    format = "parquet"
    grouped = True
    upstream = "the publishing run's own verdict (`correctness_math_verify`)"

    class Options(Model):
        policy: str | None = Field(None, description="the policy (name or policy_id) whose rows to read; required "
                                                     "when the config holds several")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seen: set[str] = set()

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        pol = (row.get("policy"), row.get("policy_id"))
        want = self.options.policy
        if want is not None and want not in pol:
            return
        if want is None:
            self._seen.add(str(pol[1]))
            if len(self._seen) > 1:
                raise LayoutError("several_policies", f"the config holds policies {sorted(self._seen)}; name one "
                                                      "in dump.options.policy")
        yield DumpRecord(samples_of(row, texts_of(row, "generations"), finish="finish_reasons",
                                    n_tokens="generation_token_length", upstream="correctness_math_verify"),
                         question=text_of(first_of(row, ["problem"]), "problem"),
                         problem_id=text_of(first_of(row, ["problem_id"]), "problem_id"),
                         answer=None if row.get("answer") is None else str(row["answer"]))
