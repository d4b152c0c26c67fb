"""A solution's arithmetic as a chain of recomputable steps, and place-value expansion of one-step sums.

``chain`` reads the computations a reference solution states (GSM8K's calculator annotations
``<<48/2=24>>``, else plain ``14 + 9 = 23`` equations) and recomputes each with exact
fractions; a step whose stated result is not its recomputed value makes the chain invalid.
GSM8K train item 1::

    Natalia sold 48/2 = <<48/2=24>>24 clips in May. ... 48+24 = <<48+24=72>>72 clips ...
    -> [Step("48/2", 24), Step("48+24", 72)]

``expand`` rewrites a bare one-operation step on a multi-digit number into place-value
steps, so a one-step solution still has a beginning to give as a hint::

    52 - 27 = 25.  ->  52 - 27 = 52 - 20 - 7. 52 - 20 = 32. 32 - 7 = 25.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from fractions import Fraction

_NUM = r"\d[\d,]*(?:\.\d+)?"
_ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>]+)>>")
_EQUATION = re.compile(rf"(?<![\w.])((?:{_NUM}\s*[-+*/×]\s*)+{_NUM})\s*=\s*(-?{_NUM})(?![\w]|[.,]\d)")
_BARE = re.compile(rf"^\s*({_NUM})\s*([-+*])\s*({_NUM})\s*=\s*(-?{_NUM})\s*\.?\s*$")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class NotArithmetic(ValueError):
    pass


def evaluate(expr: str) -> Fraction:
    """The exact value of an expression of numbers, + - * / and parentheses (``NotArithmetic`` otherwise)."""
    text = expr.replace(",", "").replace("×", "*").replace("x", "*").replace("$", "").strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise NotArithmetic(expr) from None

    def ev(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Div) and right == 0:
                raise NotArithmetic(expr)
            return _OPS[type(node.op)](left, right)
        raise NotArithmetic(expr)

    return ev(tree)


def number(text: str) -> Fraction | None:
    try:
        return Fraction(text.replace(",", "").replace("$", "").strip().rstrip("."))
    except (ValueError, ZeroDivisionError):
        return None


def agrees(value: Fraction, stated: Fraction) -> bool:
    """The recomputed value equals the stated one, or rounds to it at the stated precision (GSM8K's 1.33)."""
    if value == stated:
        return True
    decimals = len(str(float(stated)).split(".")[1]) if stated.denominator != 1 else 0
    return decimals > 0 and round(float(value), decimals) == float(stated)


@dataclass(frozen=True, slots=True)
class Step:
    expr: str
    value: Fraction
    stated: str  # the result as the solution wrote it
    start: int  # span of the whole computation in the solution
    end: int


def chain(solution: str) -> list[Step]:
    """The solution's computations in order; raises ``NotArithmetic`` when one does not recompute."""
    found = list(_ANNOTATION.finditer(solution)) or list(_EQUATION.finditer(solution))
    out = []
    for m in found:
        expr, stated = m.group(1), m.group(2)
        value, claimed = evaluate(expr), number(stated)
        if claimed is None or not agrees(value, claimed):
            raise NotArithmetic(f"{expr} = {stated} recomputes to {value}")
        out.append(Step(expr.strip(), value, stated.strip(), m.start(), m.end()))
    return out


def fmt(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), "g")


def expand_step(text: str) -> list[str] | None:
    """Place-value steps for a bare ``a op b = c`` step whose second operand has two or more digits, else None."""
    m = _BARE.match(text)
    if not m or "." in m.group(1) + m.group(3):
        return None
    a, op, b, c = int(m.group(1).replace(",", "")), m.group(2), int(m.group(3).replace(",", "")), m.group(4)
    if b < 10 or evaluate(f"{a}{op}{b}") != number(c):
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
