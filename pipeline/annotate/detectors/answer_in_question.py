"""``answer_in_question``: a correct answer copied from the question's numbers rather than computed."""

from __future__ import annotations

import math

from pipeline.annotate.arith import computes
from pipeline.annotate.detectors import Hit, register
from pipeline.numbers import IN_TEXT, IN_TEXT_SQL
from pipeline.verify.grader import normalize_answer


def _number(text: str) -> float | None:
    try:
        v = float(text.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@register("answer_in_question", kind="shortcut", label="copied", side="verdicts",
          where="status = 'correct' AND extracted IS NOT NULL"
                " AND contains(replace(question, ',', ''),"
                " regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))"
                " AND list_contains(list_transform("
                f"regexp_extract_all(question, '{IN_TEXT_SQL}'), lambda x: replace(x, ',', '')), "
                "regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))")
def answer_in_question(row: dict, opts) -> Hit | None:
    """A correct final answer that is one of the numbers in the question and that no true statement of the
    working computes (copied, not computed: "5 * 1 = 5" does not fire).

    Score: 1 / (distinct numbers in the question), the chance of guessing it by copying one.
    """
    if row["status"] != "correct" or row["extracted"] is None:
        return None
    ans = _number(normalize_answer(row["extracted"]))
    if ans is None:
        return None
    nums = [v for v in (_number(m) for m in IN_TEXT.findall(row["question"])) if v is not None]
    distinct = sorted(set(nums))
    if ans not in distinct or computes(row["completion"], ans):
        return None
    shown = ", ".join(f"{v:g}" for v in distinct[:12])
    return Hit(1.0 / len(distinct), f"answer {ans:g} is one of the question's numbers [{shown}]")
