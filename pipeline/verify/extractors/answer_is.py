"""``answer_is``: after the last "the answer is", "final answer:" or "answer:", up to the end of its sentence."""

from __future__ import annotations

from pipeline.verify.extract import HEDGED, MAX_PHRASES, answer_phrases, register_detailed


def hedged(completion: str) -> bool:
    """Whether one of the last answer phrases was passed over as a question, a condition or a plan."""
    return any(read == (None, HEDGED) for _, read in answer_phrases(completion, last=MAX_PHRASES))


@register_detailed("answer_is", hedged=hedged)
def answer_is(completion: str) -> tuple[str, tuple[str, ...]] | None:
    """After the last answer phrase that states an answer ("the answer is", "the final answer would be",
    "Final answer:", "the final result is:"), up to the end of that sentence, or the display block or box that
    follows it. A phrase in a question, under a condition or before a plan states none; an earlier one counts
    (up to :data:`MAX_PHRASES` back)."""
    skipped = False
    for _, (answer, used) in reversed(answer_phrases(completion, last=MAX_PHRASES)):
        if answer is not None:
            return answer, (("hedged_phrase",) if skipped else ()) + used
        skipped = skipped or used == HEDGED
    return None
