"""``answer_in_question``: a correct answer copied from the question's numbers rather than computed."""

from __future__ import annotations

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.arith import computes, number
from pipeline.numbers import IN_TEXT, IN_TEXT_SQL
from pipeline.verify.answer_text import normalize_answer


@register
class AnswerInQuestion(Detector):
    """A correct final answer that is one of the numbers in the question and that no true statement of the
    working computes (copied, not computed: "5 * 1 = 5" does not fire).

    Score: 1 / (distinct numbers in the question), the chance of guessing it by copying one.
    """

    name = "answer_in_question"
    kind = "shortcut"
    label = "copied"
    side = "verdicts"
    where = ("status = 'correct' AND extracted IS NOT NULL"
             " AND contains(replace(question, ',', ''),"
             " regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))"
             " AND list_contains(list_transform("
             f"regexp_extract_all(question, '{IN_TEXT_SQL}'), lambda x: replace(x, ',', '')), "
             "regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))")

    def detect(self, row: dict) -> Hit | None:
        if row["status"] != "correct" or row["extracted"] is None:
            return None
        ans = number(normalize_answer(row["extracted"]))  # exact, as the working's statements are read
        if ans is None:
            return None
        nums = [v for v in (number(m) for m in IN_TEXT.findall(row["question"])) if v is not None]
        distinct = sorted(set(nums))
        if ans not in distinct or computes(row["completion"], ans):
            return None
        shown = ", ".join(f"{float(v):g}" for v in distinct[:12])
        return Hit(1.0 / len(distinct), f"answer {float(ans):g} is one of the question's numbers [{shown}]")
