"""``plain``: JSON lines of ``problem`` (or ``question``), ``answer`` and ``completions``, one problem a line.

Each completion is a string, or an object with ``text`` and any of ``finish_reason``, ``n_tokens`` and
``correct``::

    {"problem": "What is 2 + 3?", "answer": "5", "completions": ["2 + 3 = 5. The answer is 5.", "The answer is 6."]}

An evaluation script's own JSON lines often keep those per-sample facts as lists beside the completions: name
them (``finish_reasons``, ``n_tokens``, ``correct``: fields holding one entry a completion), and the completions'
field (``completions``). The THIP evaluation dumps (``response``, ``finish_reason``, ``response_length``,
``correct``) read with ``{completions: response, finish_reasons: finish_reason, n_tokens: response_length,
correct: correct}``.
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
    Sample,
    correct,
    finish_reason,
    first_of,
    listed,
    samples_of,
    text_of,
    tokens,
)


@LAYOUTS.register
class Plain(Layout):
    name = "plain"
    format = "jsonl"
    grouped = True
    upstream = "the dump's `correct` field"

    class Options(Model):
        question: list[str] = Field(["problem", "question"], description="fields holding the question (the first found)")
        completions: str = Field("completions", description="the field holding the list of completions")
        id: str = Field("id", description="the field holding the problem's id (dump.match: source_id or problem_id)")
        finish_reasons: str | None = Field(None, description="a field listing each completion's finish reason")
        n_tokens: str | None = Field(None, description="a field listing each completion's token count")
        correct: str | None = Field(None, description="a field listing the dump's own verdict of each completion")

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        o = self.options
        samples = []
        for i, c in enumerate(listed(first_of(row, [o.completions]), o.completions)):
            if isinstance(c, str):
                samples.append(Sample(c))
            elif isinstance(c, dict):
                samples.append(Sample(text_of(c.get("text"), f"{o.completions}[{i}].text"),
                                      finish_reason=finish_reason(c.get("finish_reason")),
                                      n_tokens=tokens(c.get("n_tokens")), upstream_correct=correct(c.get("correct"))))
            else:
                raise LayoutError("bad_field", f"{o.completions}[{i}] is {type(c).__name__}, not text or an object")
        if o.finish_reasons or o.n_tokens or o.correct:  # per-sample lists beside the completions
            listed_ = samples_of(row, [s.text for s in samples], finish=o.finish_reasons, n_tokens=o.n_tokens,
                                 upstream=o.correct)
            samples = [Sample(s.text, finish_reason=s.finish_reason if o.finish_reasons else s0.finish_reason,
                              n_tokens=s.n_tokens if o.n_tokens else s0.n_tokens,
                              upstream_correct=s.upstream_correct if o.correct else s0.upstream_correct)
                       for s, s0 in zip(listed_, samples, strict=True)]
        ident = row.get(o.id)
        yield DumpRecord(samples, question=text_of(first_of(row, o.question), "the question"),
                         problem_id=ident if isinstance(ident, str) else None,
                         source_id=None if ident is None else str(ident), answer=_text(row.get("answer")))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
