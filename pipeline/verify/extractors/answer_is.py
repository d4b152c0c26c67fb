"""``answer_is``: after the last "the answer is", "final answer:" or "answer:", up to the end of its sentence."""

from __future__ import annotations

from pipeline.verify.extract import DOUBTED, HEDGED, MAX_PHRASES, Extractor, Found, answer_phrases, register


@register
class AnswerIs(Extractor):
    """After the last answer phrase that states an answer ("the answer is", "the final answer would be",
    "Final answer:", "the final result is:"), up to the end of that sentence, or the display block or box that
    follows it. A phrase in a question, under a condition or before a plan states none; an earlier one counts
    (up to :data:`MAX_PHRASES` back). A last phrase the model then doubts and never reaffirms states none, and no
    earlier one counts ("So the answer should be 24. Wait, let me verify ..." with no "so 24 is correct")."""

    name = "answer_is"

    def read(self, completion: str) -> Found | None:
        skipped = False
        for _, (answer, used) in reversed(answer_phrases(completion, last=MAX_PHRASES)):
            if answer is not None:
                return answer, (("hedged_phrase",) if skipped else ()) + used
            if used == DOUBTED:  # the model doubted what it stated last and never took it back up: no earlier phrase
                return None
            skipped = skipped or used == HEDGED
        return None

    def passed_over(self, completion: str) -> tuple[str, ...] | bool:
        """Why no answer phrase answered: the last one was doubted (``doubted_answer``), or one of the last was
        passed over as a question, a condition or a plan (True: ``hedged_phrase``)."""
        reads = [read for _, read in answer_phrases(completion, last=MAX_PHRASES)]
        if reads and reads[-1] == (None, DOUBTED):
            return DOUBTED
        return any(read == (None, HEDGED) for read in reads)
