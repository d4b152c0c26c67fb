"""The FOBAR backward form's text: the appended sentence and the masked question.

Shared by the ``fobar`` method (:mod:`pipeline.reformulate.methods.fobar`, which decides the number to mask) and
``llm_backward``'s rule writer (:mod:`pipeline.reformulate.backward_rules`), so both ask the same question.
"""

from __future__ import annotations

from pipeline.gold import is_plain_number
from pipeline.reformulate.numerals import Number, mask, to_value
from pipeline.verify.gold_check import golds_equivalent

TEMPLATE = "{question} If we know the answer to the above question is {answer}, what is the value of unknown variable x?"


def answer_text(answer: str) -> str:
    """The gold as it reads in the appended sentence (LaTeX in ``$...$``)."""
    return answer if "\\" not in answer or answer.startswith("$") else f"${answer}$"


def equals_answer(number: Number, answer: str) -> bool:
    value = to_value(answer) if is_plain_number(answer.replace(",", "")) else None
    if value is not None:
        return number.value == value
    try:
        return golds_equivalent(number.text.replace(",", ""), answer)
    except Exception:  # math-verify internals: treat as "cannot tell", so not equal
        return False


def backward_question(question: str, answer: str, number: Number) -> str:
    return TEMPLATE.format(question=mask(question, number), answer=answer_text(answer))

__all__ = ["TEMPLATE", "answer_text", "backward_question", "equals_answer"]
