"""The ``unsupported_answer`` flag: a right final answer whose own working does not produce it.

Every arithmetic statement in the completion (``a op b = c``, chains ``a + b = c + d = e``) is
evaluated with exact rationals, after units, ``$``, thousands commas and LaTeX (``\\times``,
``\\frac{}{}``, ...) are stripped; a side that still holds a backslash is read by sympy
(latex2sympy2, math-verify's own parser) where it parses. A correct answer is flagged when

1. the working holds a false statement (``21 - 15 = 3`` is false: 6), or
2. no true statement of the working evaluates to the answer although the answer needs
   computing (it is not one of the question's numbers): ``Ben * 4 = 16`` is not arithmetic,
   and ``The answer is 16.`` alone is no working at all.

Real rows (SmolLM2-135M, 3-shot, synthetic set), each graded correct::

    "Ana has 21 marbles. She buys 15 more and then gives 33 ..."  gold 3
    " Ana has 21 - 15 = 3 marbles. The answer is 3."      -> "21 - 15 = 3 is false (6)"
    "Ben has 4 pens. He buys 12 more. ..."  gold 16
    " Ben * 4 = 16. The answer is 16."                    -> "no true computation gives 16 (Ben * 4 = 16 is not arithmetic)"

True arithmetic on the wrong quantities (``19 + 20 = 39`` where the problem needs 4 * 10 + 19 - 20)
is not flagged: docs/flags.md reports what the labelled set says about it.
"""

from __future__ import annotations

from fractions import Fraction

from pipeline.annotate.arith import NUM, answer_value, question_numbers, show, statements
from pipeline.annotate.flags import FlagOptions, Hit, register


def check_working(completion: str, extracted: str | None, question: str, *, setup: bool = False) -> Hit | None:
    """The ``unsupported_answer`` decision for one correct completion (see the module's doc).

    ``setup``: also fire when the working's arithmetic never uses some of the question's numbers
    (a wrong setup, such as ``19 + 20 = 39``), with the evidence naming them.
    """
    answer = answer_value(extracted)
    if answer is None:
        return None
    stmts = statements(completion)
    false = [s for s in stmts if s.ok is False]
    if false:
        shown = "; ".join(f"{s.text} is false ({show(s.lhs_value)})" for s in false[:3])
        return Hit(float(len(false)), shown)
    given = question_numbers(question)
    if setup and (unused := given - {Fraction(m) for s in stmts for m in NUM.findall(s.lhs)}):
        shown = ", ".join(show(v) for v in sorted(unused))
        return Hit(0.0, f"the working never computes with {shown} of the question")
    if answer in given:
        return None  # copying a number needs no computation (answer_in_question says so)
    if any(s.ok and s.rhs_value == answer for s in stmts):
        return None
    claims = [s for s in stmts if s.ok is None and (s.rhs_value == answer or _mentions(s.rhs, answer))]
    why = f" ({claims[0].text} is not arithmetic)" if claims else (" (no working)" if not stmts else "")
    return Hit(0.0, f"no true computation gives {show(answer)}{why}")


def _mentions(text: str, value: Fraction) -> bool:
    return any(Fraction(m) == value for m in NUM.findall(text))


@register("unsupported_answer", kind="shortcut", side="verdicts",
          where="status = 'correct' AND extracted IS NOT NULL")
def unsupported_answer(row: dict, opts: FlagOptions) -> Hit | None:
    """A correct final answer that the completion's own working does not produce.

    Every arithmetic statement is evaluated exactly: fires on a false one ("21 - 15 = 3 is false (6)"),
    or when no true computation gives the answer although it is not a number of the question.
    Score: the number of false statements (0 when the working is missing or not arithmetic).
    """
    return check_working(row["completion"], row["extracted"], row["question"], setup=opts.unsupported_setup)
