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
    first_of,
    samples_of,
    text_of,
    texts_of,
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
        ident = row.get("problem_id") or row.get("uuid")
        yield DumpRecord(samples_of(row, texts_of(row, "generations"), finish="finish_reasons",
                                    n_tokens="generation_token_length", upstream="correctness_math_verify"),
                         question=text_of(first_of(row, [self.options.question]), self.options.question),
                         problem_id=ident if isinstance(ident, str) else None,
                         source_id=None if ident is None else str(ident),
                         answer=None if row.get("answer") is None else str(row["answer"]))
