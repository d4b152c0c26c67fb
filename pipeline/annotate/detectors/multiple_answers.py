"""``multiple_answers``: several different final answers in one completion (hedging)."""

from __future__ import annotations

from pipeline.annotate.detectors import MARKERS, Detector, Hit, register
from pipeline.annotate.graded import graded_text, thinking_read
from pipeline.arith import LATEX_PER_TEXT, LEADING, answer_key, answer_value, stated_answers


@register
class MultipleAnswers(Detector):
    """Several different final answers (boxes, '####' lines, "the answer is" phrases): hedging.

    Answers are compared as the grader normalises them, then as numbers where they are
    (``943 * 13 = 10,229`` and ``10229`` are one answer); a phrase of 4+ words that is not arithmetic is
    not an answer. After a thinking block only the final section counts (trying answers while thinking is
    not hedging: ``answer_flip`` reads the thinking). Score: the number of distinct answers. On a long chain of
    thought, the first
    ``LATEX_PER_TEXT`` distinct LaTeX answers are compared by value, the rest as normalised text.
    """

    name = "multiple_answers"
    kind = "shortcut"
    label = "hedged"
    where = f"regexp_matches(completion, '(?is){MARKERS}.*{MARKERS}')"

    def detect(self, row: dict) -> Hit | None:
        seen: dict[str, str] = {}
        latex: set[str] = set()  # answers whose LaTeX sympy read (at most LATEX_PER_TEXT a text: long chains of thought)
        for a in stated_answers(graded_text(row["completion"], thinking_read(row))):
            sympy_ok = "\\" not in a or a in latex or len(latex) < LATEX_PER_TEXT
            if "\\" in a and sympy_ok and answer_value(a, latex=False) is None:
                latex.add(a)
            if len(a.split()) > 3 and answer_value(a, latex=sympy_ok) is None:
                # "2 * 6 = 12 bolts of blue fibre, so ...": the leading arithmetic is the answer; "Ana has 17 - Ana's
                # friend's marbles now" is prose, not an answer
                if not (m := LEADING.match(a)):
                    continue
                a = m.group(1)
            seen.setdefault(answer_key(a, latex=sympy_ok), a)
        if len(seen) < 2:
            return None
        shown = ", ".join(repr(a) for a in list(seen.values())[:6])
        return Hit(float(len(seen)), f"{len(seen)} different final answers: {shown}")
