"""Arithmetic in model text: every ``a op b = c`` statement of a completion, evaluated exactly.

Units, ``$``, thousands commas and LaTeX (``\\times``, ``\\cdot``, ``\\frac{}{}``, ...) are stripped, then
each side is evaluated with exact rationals (+ - * / ^ and brackets only, Python's precedence); a side
that still holds a backslash is read by latex2sympy2 (math-verify's own parser) where it parses.
A chain ``a = b = c`` gives the statements ``a = b`` and ``b = c``.

Bounded on any model text, which is hostile input (a 32k-token completion takes under a second): the reader is linear in the
text, evaluation is iterative (no recursion, any nesting depth), a number or result over :data:`MAX_DIGITS`
digits is not evaluated (the side reads as "not arithmetic"), a power needs an integer exponent up to 64 and a
base up to 10^6, and sympy sees only LaTeX sides up to :data:`MAX_LATEX_CHARS` characters whose size it is
checked to keep bounded before it evaluates (no ``\\sqrt{4^{10^{10}}}``, no ``\\binom{10^{7}}{5000}``), at most
:data:`LATEX_PER_TEXT` distinct ones per text::

    >>> [(s.text, s.ok) for s in statements(" Ana has 21 - 15 = 3 marbles. 4 bags * 10 eggs = 40 eggs.")]
    [('21 - 15 = 3', False), ('4 * 10 = 40', True)]
    >>> [(s.text, s.ok) for s in statements(" Ben * 4 = 16. The answer is 16.")]
    [('Ben * 4 = 16', None)]

passband's one arithmetic package (:mod:`.evaluate` the bounded evaluator, :mod:`.text` statements and
answers in model text, :mod:`.algebra` the equations it solves, :mod:`.steps` a reference solution's steps): the
flags read model text with it (``unsupported_answer``, :mod:`pipeline.annotate.unsupported`; final answers compared
by value in ``multiple_answers``; a question's numbers in ``answer_in_question``), and the reformulators read a
reference solution's steps with it (:func:`chain`, :func:`expand_step`: the same evaluator, :func:`number` and
:func:`agrees`).
"""

from __future__ import annotations

from pipeline.arith.algebra import computes, solutions
from pipeline.arith.evaluate import LATEX_PER_TEXT, MAX_DIGITS, MAX_LATEX_CHARS, evaluate
from pipeline.arith.steps import NotArithmetic, Step, chain, expand, expand_step, fmt, step_value
from pipeline.arith.text import (
    LEADING,
    MAX_ANSWER_CHARS,
    NUM,
    Statement,
    agrees,
    answer_key,
    answer_value,
    gives,
    number,
    numbers,
    question_numbers,
    show,
    stated_answers,
    statements,
)

__all__ = ["LATEX_PER_TEXT", "LEADING", "MAX_ANSWER_CHARS", "MAX_DIGITS", "MAX_LATEX_CHARS", "NUM", "NotArithmetic",
           "Statement", "Step", "agrees", "answer_key", "answer_value", "chain", "computes", "evaluate", "expand",
           "expand_step", "fmt", "gives", "number", "numbers", "question_numbers", "show", "solutions", "stated_answers",
           "statements", "step_value"]
