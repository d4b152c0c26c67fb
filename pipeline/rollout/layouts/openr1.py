"""``openr1``: OpenR1-Math-220k's layout (Parquet), one problem a row with its ``generations``.

``correctness_math_verify`` is the upstream verdict, ``finish_reasons`` (where filled) each generation's finish
reason; ``is_reasoning_complete`` is not a finish reason and is not read. ``problem_id``/``uuid`` identify the row.
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
    Sample,
    correct,
    finish_reason,
    first_of,
    listed,
    per_sample,
    text_of,
    tokens,
)


@LAYOUTS.register
class OpenR1(Layout):
    name = "openr1"
    format = "parquet"
    grouped = True
    upstream = "`correctness_math_verify`"

    class Options(Model):
        question: str = Field("problem", description="the column holding the question")
        format: str = Field("parquet", description="parquet, or jsonl for the same columns as JSON lines")

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        texts = [text_of(t, f"generations[{i}]") for i, t in enumerate(listed(first_of(row, ["generations"]),
                                                                              "generations"))]
        n = len(texts)
        ups = per_sample(row.get("correctness_math_verify"), n, "correctness_math_verify")
        fins = per_sample(row.get("finish_reasons"), n, "finish_reasons")
        toks = per_sample(row.get("generation_token_length"), n, "generation_token_length")
        ident = row.get("problem_id") or row.get("uuid")
        yield DumpRecord([Sample(t, finish_reason=finish_reason(f), n_tokens=tokens(k), upstream_correct=correct(u))
                          for t, u, f, k in zip(texts, ups, fins, toks, strict=True)],
                         question=text_of(first_of(row, [self.options.question]), self.options.question),
                         problem_id=ident if isinstance(ident, str) else None,
                         source_id=None if ident is None else str(ident),
                         answer=None if row.get("answer") is None else str(row["answer"]))
