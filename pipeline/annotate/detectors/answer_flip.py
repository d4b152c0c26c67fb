"""``answer_flip``: a reasoning model's final answer differs from its thinking's, or the thinking flip-flops."""

from __future__ import annotations

import re

from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.arith import answer_key, stated_answers
from pipeline.config import Model
from pipeline.thinking import SQL_HAS_THINKING
from pipeline.thinking import split as split_thinking

_MARKER = re.compile(r"(?i)\\boxed|\\fbox|####|\banswer\b")
_PIECE_END = re.compile(r"[.\n]")


def answers_in_order(text: str) -> list[str]:
    """The stated answers (:func:`stated_answers`) in text order: the text is cut at every answer marker and each
    piece read on its own (``stated_answers`` lists boxes first, then ``####`` lines, then phrases). Linear."""
    starts: list[int] = []
    for m in _MARKER.finditer(text):
        # "the answer is $\\boxed{42}$": the phrase and its box are one piece (a phrase cut before its box reads "$")
        if starts and m.group()[0] == "\\" and text[starts[-1]:starts[-1] + 1].lower() == "a" \
                and m.start() - starts[-1] <= 40 and not _PIECE_END.search(text, starts[-1], m.start()):
            continue
        starts.append(m.start())
    out: list[str] = []
    for a, b in zip(starts, [*starts[1:], len(text)][:len(starts)], strict=True):
        out.extend(stated_answers(text[a:b]))
    return out


@register
class AnswerFlip(Detector):
    """The final answer differs from the thinking's last answer, or the thinking flip-flops between answers.

    Reads a reasoning model's completion apart (:mod:`pipeline.thinking`): fires when the thinking
    closes and the final section's last answer differs by value from the last answer stated inside the
    thinking, or when the thinking switches its answer at least ``min_switches`` times and comes
    back to one it had left (5, 7, 5, 7). Score: the switches inside the thinking (+ 1 when the final answer
    differs).
    """

    name = "answer_flip"
    kind = "degeneracy"
    where = SQL_HAS_THINKING

    class Options(Model):
        min_switches: int = Field(3, ge=1, description="answer_flip: switches of the thinking's answer "
                                                       "(returning to an earlier one) that fire")

    def detect(self, row: dict) -> Hit | None:
        part = split_thinking(row["completion"])
        if part.thinking is None:
            return None
        stated = answers_in_order(part.thinking)
        keys = [answer_key(a, latex=False) for a in stated]
        seq = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]  # runs of one answer collapsed
        switches = len(seq) - 1
        final = answers_in_order(part.final) if part.closed else []
        if final and stated and answer_key(final[-1], latex=False) != keys[-1]:
            return Hit(float(switches + 1), f"final answer {final[-1]!r} differs from the thinking's last answer "
                                            f"{stated[-1]!r}")
        if switches >= self.options.min_switches and len(set(seq)) < len(seq):
            shown = " -> ".join(seq[:8]) + (" -> ..." if len(seq) > 8 else "")
            return Hit(float(switches), f"the thinking switches its answer {switches} times: {shown}")
        return None
