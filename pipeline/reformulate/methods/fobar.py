"""``fobar``: Forward-Backward reasoning (Jiang et al. 2023; MetaMathQA's FOBAR rows).

One number of the question is masked as ``x`` and the answer is given; the gold is the
masked number. GSM8K test item 1::

    Janet's ducks lay 16 eggs per day. [...] How much in dollars does she make every day at
    the farmers' market?                                                           -> 18
    Janet's ducks lay x eggs per day. [...] How much in dollars does she make every day at
    the farmers' market? If we know the answer to the above question is 18, what is the
    value of unknown variable x?                                                   -> 16

Which number is masked is decided by a fixed rule and recorded in ``metadata``: the first
standalone number (in reading order) that occurs exactly once (by value), differs from the
answer, is not part of a fraction, time, power or range, and, when the parent has a
reference solution, appears in that solution's arithmetic (otherwise the answer might not
determine it: a distractor number). The question must keep at least one other number and
must not already use a variable ``x``.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import ClassVar

from pydantic import Field

from pipeline.config import Model
from pipeline.reformulate.fobar import backward_question, equals_answer
from pipeline.reformulate.numerals import find_numbers, gold_text, has_variable_x, loose_values
from pipeline.reformulate.registry import Child, Outcome, Parent, Reformulator, Skip, register


class FobarOptions(Model):
    require_in_solution: bool = Field(
        True, description="mask only numbers the reference solution's arithmetic uses (when the parent has one)"
    )


@register
class Fobar(Reformulator):
    name = "fobar"
    version = "1"
    Options = FobarOptions
    reasons: ClassVar[dict[str, str]] = {
        "x_in_question": "the question already uses a variable x",
        "no_number": "the question has no standalone number to mask",
        "single_number": "the question has one number only; masking it would leave none",
        "no_maskable_number": "every number occurs more than once, equals the answer, or is part of a fraction/time/range",
        "not_in_solution": "no candidate number appears in the reference solution, so the answer may not determine it",
    }

    def one(self, parent: Parent) -> Outcome:
        q = parent.question
        if has_variable_x(q):
            return self.skip("x_in_question", "the question already uses the variable x")
        numbers = find_numbers(q)
        if not numbers:
            return self.skip("no_number", "no standalone number in the question")
        if len(numbers) == 1:
            return self.skip("single_number", f"only the number {numbers[0].text} in the question")
        counts = Counter(n.value for n in numbers)
        why: dict[str, str] = {}
        candidates = []
        for n in numbers:
            if not n.maskable:
                why[n.text] = "part of a compound token"
            elif counts[n.value] > 1:
                why[n.text] = f"occurs {counts[n.value]} times"
            elif equals_answer(n, parent.answer):
                why[n.text] = "equals the answer"
            else:
                candidates.append(n)
        if not candidates:
            return self.skip("no_maskable_number", "; ".join(f"{k}: {v}" for k, v in why.items()))
        used: set[Fraction] | None = None
        if self.options.require_in_solution and parent.solution:
            used = loose_values(parent.solution)
            in_solution = [n for n in candidates if n.value in used]
            if not in_solution:
                listed = ", ".join(n.text for n in candidates)
                return self.skip("not_in_solution", f"candidates {listed} do not appear in the reference solution")
            candidates = in_solution
        chosen = candidates[0]
        gold = gold_text(chosen)
        meta = {
            "masked": gold,
            "masked_text": chosen.text,
            "masked_index": numbers.index(chosen),
            "masked_offset": chosen.start,
            "numbers": [n.text for n in numbers],
            "candidates": [n.text for n in candidates],
            "rule": "first candidate in reading order" + (" used by the reference solution" if used is not None else ""),
            "parent_answer": parent.answer,
        }
        return Child(backward_question(q, parent.answer, chosen), gold, None, meta)


__all__ = ["Fobar", "FobarOptions", "Skip"]
