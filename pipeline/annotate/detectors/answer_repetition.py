"""``answer_repetition``: the final answer (or one line) written over and over."""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from pipeline.annotate.detectors import MARKERS, Detector, Hit, register
from pipeline.annotate.graded import graded_text, thinking_read
from pipeline.arith import stated_answers
from pipeline.config import Model
from pipeline.verify.answer_text import normalize_answer


@register
class AnswerRepetition(Detector):
    """The final answer stated many times, or one line written many times.

    Fires when the completion states the same final answer (box, '####' line, "the answer is")
    at least ``answer_min`` times, or a line of 3+ characters appears
    ``line_min`` times. Working that merely uses the number ("6 - 4 = 2") does not
    count. After a thinking block (``<think>...</think>``) only the final section counts: a reasoning model
    restates its candidate and its "Wait, let me check" lines while it thinks (a loop there is
    ``repetition_loop``'s). Score: the count.
    """

    name = "answer_repetition"
    kind = "shortcut"
    label = "repetition"
    where = (f"regexp_matches(completion, '(?is)(?:.*?{MARKERS}){{{{{{opts.answer_min}}}}}}')"
             " OR length(completion) - length(replace(completion, chr(10), '')) >= {opts.line_min} - 1")

    class Options(Model):
        answer_min: int = Field(3, ge=2, description="the final answer stated at least this many times")
        line_min: int = Field(3, ge=2, description="one line (>= 3 characters) written at least this many times")

    def detect(self, row: dict) -> Hit | None:
        text = graded_text(row["completion"], thinking_read(row))
        stated = Counter(normalize_answer(a) for a in stated_answers(text))
        if stated:
            ans, n = stated.most_common(1)[0]
            if n >= self.options.answer_min:
                return Hit(float(n), f"final answer {ans!r} stated {n} times")
        lines = Counter(ln.strip() for ln in text.split("\n") if len(ln.strip()) >= 3)
        if lines:
            line, n = lines.most_common(1)[0]
            if n >= self.options.line_min:
                return Hit(float(n), f"line {line[:60]!r} written {n} times")
        return None
