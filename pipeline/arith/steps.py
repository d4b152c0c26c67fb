"""A reference solution's arithmetic steps (GSM8K's ``<<a*b=c>>`` annotations, bare ``a op b = c`` lines), and a
one-operation step written out in place-value steps (the hint_prefix reformulator's ``52 - 27 = 52 - 20 - 7``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from pipeline.arith.evaluate import evaluate
from pipeline.arith.text import agrees, number
from pipeline.numbers import WRITTEN

_ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>]+)>>")


_EQUATION = re.compile(rf"(?<![\w.])((?:{WRITTEN}\s*[-+*/×]\s*)+{WRITTEN})\s*=\s*(-?{WRITTEN})(?![\w]|[.,]\d)")


_BARE = re.compile(rf"^\s*({WRITTEN})\s*([-+*])\s*({WRITTEN})\s*=\s*(-?{WRITTEN})\s*\.?\s*$")


# a solution step's grammar is Python's: numbers, + - * / and brackets. A percent sign, a power or braces are not
# read as in model text (``50%`` as 1/2, ``^`` as a power), nor is an integer with a leading zero (``0900-0130``,
# a time; ``45 * 0,2``, a decimal comma): such a step does not recompute
_NOT_A_STEP = re.compile(r"[%^{}]|\*\*|(?<![\d.])0+[1-9]\d*(?![\d.])")


class NotArithmetic(ValueError):
    pass


def step_value(expr: str) -> Fraction:
    """The exact value of a solution's computation (``48/2``, ``3 × 4``, ``$1,200 * 2``): :func:`evaluate` on
    numbers, + - * / and brackets; ``NotArithmetic`` otherwise (a division by zero included)."""
    text = expr.replace(",", "").replace("×", "*").replace("x", "*").replace("$", "").strip()
    value = None if _NOT_A_STEP.search(text) else evaluate(text, latex=False)
    if value is None:
        raise NotArithmetic(expr)
    return value


@dataclass(frozen=True, slots=True)
class Step:
    expr: str
    value: Fraction
    stated: str  # the result as the solution wrote it
    start: int  # span of the whole computation in the solution
    end: int


def chain(solution: str) -> list[Step]:
    """The solution's computations in order; raises ``NotArithmetic`` when one does not recompute
    (:func:`agrees`: equal, or the stated decimal is the value to the decimals written)."""
    found = list(_ANNOTATION.finditer(solution)) or list(_EQUATION.finditer(solution))
    out = []
    for m in found:
        expr, stated = m.group(1), m.group(2)
        value, claimed = step_value(expr), number(stated)
        if claimed is None or not agrees(value, claimed, stated.replace(",", "").replace("$", "").strip().rstrip(".")):
            raise NotArithmetic(f"{expr} = {stated} recomputes to {value}")
        out.append(Step(expr.strip(), value, stated.strip(), m.start(), m.end()))
    return out


def fmt(value: Fraction) -> str:
    """A value as a reformulated problem writes it: an integer as is, else ``%g`` (:func:`show` is for messages)."""
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), "g")


def expand_step(text: str) -> list[str] | None:
    """Place-value steps for a bare ``a op b = c`` step whose second operand has two or more digits, else None."""
    m = _BARE.match(text)
    if not m or "." in m.group(1) + m.group(3):
        return None
    a, op, b, c = int(m.group(1).replace(",", "")), m.group(2), int(m.group(3).replace(",", "")), m.group(4)
    if b < 10 or step_value(f"{a}{op}{b}") != number(c):
        return None
    parts = [int(d) * 10 ** i for i, d in enumerate(reversed(str(b))) if d != "0"][::-1]
    if len(parts) < 2:
        return None
    if op in "+-":
        out = [f"{a} {op} {b} = {a} {op} " + f" {op} ".join(map(str, parts)) + "."]
        acc = a
        for p in parts:
            nxt = acc + p if op == "+" else acc - p
            out.append(f"{acc} {op} {p} = {nxt}.")
            acc = nxt
        return out
    out = [f"{a} * {b} = " + " + ".join(f"{a} * {p}" for p in parts) + "."]
    out += [f"{a} * {p} = {a * p}." for p in parts]
    acc = a * parts[0]
    for p in parts[1:]:
        out.append(f"{acc} + {a * p} = {acc + a * p}.")
        acc += a * p
    return out


def expand(spans: list[str]) -> list[str]:
    """Every expandable step replaced by its place-value steps (the others unchanged)."""
    out: list[str] = []
    for s in spans:
        out.extend(expand_step(s) or [s])
    return out
