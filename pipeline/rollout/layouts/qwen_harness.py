"""``qwen_harness``: the Qwen2.5-Math / DeepSeek-Math / math-evaluation-harness output JSONL.

One problem a line, its sampled completions in ``code`` (a list, ``n_sampling`` of them), the harness's own
predictions in ``pred`` and its verdicts in ``score`` (kept beside passband's as upstream correctness)::

    {"idx": 0, "question": "...", "gt": "18", "code": ["...\\\\boxed{18}", "..."], "pred": ["18", "16"], "score": [true, false]}

The harness samples several times a problem either with ``n_sampling`` (a list of N in ``code``) or with a
dataset repeated N times (``amc23x8``, ``aime24x8``: the problem on N rows, ``idx`` running on, one completion
each); both are read, a repeated row's samples numbered after the earlier rows' (``repeated_rows``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import Field

from pipeline.config import Model
from pipeline.rollout.layout import LAYOUTS, DumpRecord, Layout, first_of, samples_of, text_of, texts_of


@LAYOUTS.register
class QwenHarness(Layout):
    name = "qwen_harness"
    format = "jsonl"
    grouped = True
    upstream = "the harness's `score` (its own math_equal)"

    class Options(Model):
        question: list[str] = Field(["question", "problem"], description="fields holding the question (the first found)")
        completions: str = Field("code", description="the field holding the list of completions")
        repeated_rows: bool = Field(True, description="a problem on several rows (the harness's `amc23x8`-style "
                                    "datasets) adds each row's samples; false: a second row is a `duplicate` reject")

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        o = self.options
        samples = samples_of(row, texts_of(row, o.completions), upstream="score")
        idx = row.get("idx")
        yield DumpRecord(samples,
                         question=text_of(first_of(row, o.question), "the question"),
                         source_id=None if idx is None else str(idx),
                         answer=None if row.get("gt") is None else str(row["gt"]))
