"""Equations in one unknown in model text, solved exactly: the working of a model that sets up and solves an equation.

A reasoning model often writes its working as algebra (``3R + 5(R + 2) = 42`` ... ``8R = 32`` ... ``R = 4``), which
holds no ``a op b = c`` statement that computes its answer. :func:`solutions` reads every equation of the text whose
only unknown is one letter (``x``, ``R``, ``c``; an index is dropped by the normaliser, so ``D_b = D_w - 17`` has one
letter on both sides and no solution), with the inequalities of a bound (``x >= 42 - 33``) read as equations, and
solves it when it is linear: the two sides are evaluated by the bounded exact evaluator (:mod:`.evaluate`, no
``eval``, no sympy) at x = 0, 1, 2, 3, and a difference that moves by one fixed step per unit of x is a line with one
root. An equation that only names a value (``x = 50``, ``6 = c``) computes nothing and solves nothing here. At most
:data:`MAX_EQUATIONS` distinct equations are solved per text (the rest are not read: hostile text stays bounded).

    >>> sorted(solutions("\\[ 3R + 5(R + 2) = 42 \\]\\n\\[ 8R = 32 \\]\\n\\[ R = 4 \\]"))
    [Fraction(4, 1)]
    >>> sorted(solutions(r"5 = \\frac{c}{2} + 2"))
    [Fraction(6, 1)]
    >>> sorted(solutions("x = 50"))
    []
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

from pipeline.arith.evaluate import evaluate
from pipeline.arith.text import CLAUSE, gives, normalise, statements

# a bound read as the equation of its boundary: "x \geq 42 - 33" gives 9 as "x = 42 - 33" does
_RELATIONS = re.compile(r"\\(?:geq?|leq?|geqslant|leqslant)(?![A-Za-z])|[≥≤<>]")
_LETTER = r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])"  # one letter alone: a variable, not a word or a LaTeX command
_VARIABLE = re.compile(_LETTER)
_EQUATION = re.compile(rf"(?:[\d.\s()+\-*/^%=]|{_LETTER})+")  # digits, operators, brackets, '=' and lone letters
_OPERATOR = re.compile(r"[-+*/^]")
_IMPLICIT = re.compile(r"(?<=[\d)A-Za-z])\s*(?=[A-Za-z(])|(?<=[A-Za-z)])\s*(?=[\d(])")  # 20x, 5(R + 2), x(1 + r)
_POINTS = (0, 1, 2, 3)
MAX_EQUATION_CHARS = 200  # a longer run is not read as one equation
MAX_EQUATIONS = 64  # distinct equations solved per text (a working holds a few; hostile text may hold 20,000)


def solutions(text: str) -> set[Fraction]:
    """The root of every linear equation in one unknown that the text writes (see the module's doc)."""
    if "=" not in text and not _RELATIONS.search(text):
        return set()
    found: set[Fraction] = set()
    seen: set[tuple[str, str]] = set()
    for clause in CLAUSE.split(normalise(_RELATIONS.sub("=", text))):
        if "=" not in clause:
            continue
        for m in _EQUATION.finditer(clause):
            run = m.group()
            if "=" not in run or len(run) > MAX_EQUATION_CHARS:
                continue
            letters = set(_VARIABLE.findall(run))
            if len(letters) != 1:
                continue
            (letter,) = letters
            sides = [side.strip() for side in run.split("=")]
            for lhs, rhs in itertools.pairwise(sides):
                if not lhs or not rhs or (lhs, rhs) in seen:
                    continue
                if len(seen) >= MAX_EQUATIONS:
                    return found
                seen.add((lhs, rhs))
                if (root := _root(lhs, rhs, letter)) is not None:
                    found.add(root)
    return found


def _root(lhs: str, rhs: str, letter: str) -> Fraction | None:
    """The one root of ``lhs = rhs`` in ``letter``, when the equation is linear in it, computes something (an operator
    on a side) and holds the letter; else None."""
    lhs, rhs = _IMPLICIT.sub("*", lhs), _IMPLICIT.sub("*", rhs)  # "20x" is 20 * x: a computation
    if letter not in lhs + rhs or not (_OPERATOR.search(lhs.lstrip("-")) or _OPERATOR.search(rhs.lstrip("-"))):
        return None
    expression = f"({lhs}) - ({rhs})"
    values = []
    for point in _POINTS:
        v = evaluate(re.sub(_LETTER, f"({point})", expression), latex=False)
        if v is None:
            return None
        values.append(Fraction(v))
    slope = values[1] - values[0]
    if not slope or any(values[i] - values[0] != i * slope for i in range(2, len(values))):
        return None  # constant, or not a line (x^2, 1/x): no one root read here
    return -values[0] / slope


def computes(text: str, value: float | Fraction) -> bool:
    """Whether the text's working computes ``value``: a statement gives it (:func:`pipeline.arith.text.gives`) or an
    equation it writes has it as its root (:func:`solutions`)."""
    target = Fraction(value)
    return any(gives(s, target) for s in statements(text)) or target in solutions(text)
