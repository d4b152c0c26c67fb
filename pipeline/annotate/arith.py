"""Arithmetic in model text: every ``a op b = c`` statement of a completion, evaluated exactly.

Units, ``$``, thousands commas and LaTeX (``\\times``, ``\\cdot``, ``\\frac{}{}``, ...) are stripped, then
each side is evaluated with exact rationals (Python's ``ast``, + - * / ^ and brackets only); a side
that still holds a backslash is read by latex2sympy2 (math-verify's own parser) where it parses.
A chain ``a = b = c`` gives the statements ``a = b`` and ``b = c``::

    >>> [(s.text, s.ok) for s in statements(" Ana has 21 - 15 = 3 marbles. 4 bags * 10 eggs = 40 eggs.")]
    [('21 - 15 = 3', False), ('4 * 10 = 40', True)]
    >>> [(s.text, s.ok) for s in statements(" Ben * 4 = 16. The answer is 16.")]
    [('Ben * 4 = 16', None)]

Used by the ``unsupported_answer`` flag (:mod:`pipeline.annotate.unsupported`) and to compare
final answers by value in ``multiple_answers``.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from pipeline.verify.extract import candidates
from pipeline.verify.grader import normalize_answer

_LATEX_OPS = ((r"\times", "*"), (r"\cdot", "*"), (r"\div", "/"), (r"\left", ""), (r"\right", ""), (r"\,", ""),
              (r"\!", ""), (r"\%", "%"), (r"\$", ""), ("×", "*"), ("÷", "/"), ("−", "-"), ("–", "-"), ("·", "*"))
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_DELIMS = re.compile(r"\\[()\[\]]|\$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TIMES_X = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])")
# operators and '=' in words, between numbers: "58 plus 67 and you get 125" -> "58 + 67 = 125"
_WORD_OPS = [(re.compile(rf"(?<=[\d)%])\s+(?:{words})\s+(?=[-$\d(])", re.I), sym) for words, sym in (
    ("plus", " + "), ("minus", " - "), ("times|multiplied by|of", " * "), ("divided by|over", " / "),
    ("equals|is equal to|is|makes|gives|and you get|you get|to get|and get|gets you", " = "))]
# a unit after a number, before an operator or '=': "4 bags * 10 eggs = 40 eggs" -> "4 * 10 = 40 eggs"
_UNIT = re.compile(r"(?<=\d)(?:\s+(?!x\b)[A-Za-z][A-Za-z']*){1,2}(?=\s*(?:[-+*/=]|\\times|\\cdot))")
# a clause ends at a sentence's period, a comma or semicolon with a space, a colon, a question mark or a newline
_CLAUSE = re.compile(r"\.(?=\s|$)|[,;](?=\s)|[:?!\n]")
# a run of arithmetic: digits, operators, brackets, '=', and (for sympy) LaTeX commands and braces
_RUN = re.compile(r"(?:[\d.\s(){}+\-*/^%=]|\\[A-Za-z]+)*=(?:[\d.\s(){}+\-*/^%=]|\\[A-Za-z]+)*")
_OPERATOR = re.compile(r"(?<=[\d)\s])[-+*/^]|\\")
_PLAIN = re.compile(r"^[\d.\s()+\-*/^%]+$")
NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass(frozen=True)
class Statement:
    """One ``lhs = rhs`` of the working: ``ok`` is True/False when both sides evaluate, None when one does not."""

    lhs: str
    rhs: str
    lhs_value: Fraction | None
    rhs_value: Fraction | None

    @property
    def ok(self) -> bool | None:
        if self.lhs_value is None or self.rhs_value is None:
            return None
        if self.lhs_value != self.rhs_value and not _OPERATOR.search(self.lhs) and not _OPERATOR.search(self.rhs):
            return None  # "3 dozen = 36", "2 hours = 120 minutes": a conversion with its units dropped, not arithmetic
        return agrees(self.lhs_value, self.rhs_value, self.rhs)

    @property
    def text(self) -> str:
        return f"{self.lhs} = {self.rhs}"


def agrees(value: Fraction, written: Fraction, text: str) -> bool:
    """``value`` equals the number written as ``text`` (``written``), to the decimals the writer kept."""
    if value == written:
        return True
    m = re.fullmatch(r"\s*-?\d+\.(\d+)\s*", text)
    if m:  # 10 / 3 = 3.33 (rounded) or 3.333 (truncated)
        step = Fraction(1, 10 ** len(m.group(1)))
        return abs(value - written) < step
    return False


_INT = re.compile(r"\s*(-?\d+)\s*")
_INT_OP_INT = re.compile(r"\s*(\d+)\s*([-+*])\s*(\d+)\s*")
_INT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _evaluate_plain(expr: str) -> Fraction | None:
    """An arithmetic expression (numbers, + - * / ^, brackets) as an exact rational, or None."""
    if m := _INT.fullmatch(expr):  # the common shapes without the parser: "25", "52 - 27"
        return Fraction(int(m.group(1)))
    if m := _INT_OP_INT.fullmatch(expr):
        return Fraction(_INT_OPS[m.group(2)](int(m.group(1)), int(m.group(3))))
    expr = expr.strip().replace("{", "(").replace("}", ")")
    if not expr or not _PLAIN.match(expr) or not re.search(r"\d", expr):
        return None
    expr = re.sub(r"(\d+(?:\.\d+)?)\s*%", r"(\1/100)", expr).replace("^", "**")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError):
        return None
    return _eval_node(tree.body)


def _eval_node(node: ast.AST) -> Fraction | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return Fraction(node.value) if isinstance(node.value, int) else Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval_node(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _eval_node(node.left), _eval_node(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Pow):  # small integer powers only: 2^10, not 7^7^11
            if b.denominator != 1 or abs(b) > 64 or abs(a) > 10 ** 6:
                return None
            return a ** int(b) if a or b >= 0 else None
        op = _OPS.get(type(node.op))
        if op is None or (isinstance(node.op, ast.Div) and b == 0):
            return None
        return op(a, b)
    return None


def _evaluate_latex(expr: str) -> Fraction | None:
    """A side that still holds LaTeX, read by latex2sympy2 (math-verify's parser); None unless it is a number."""
    try:
        import sympy
        from latex2sympy2_extended import latex2sympy

        value = latex2sympy(expr)
        if isinstance(value, sympy.Basic) and value.is_number:
            value = sympy.nsimplify(sympy.simplify(value), rational=False)
            if isinstance(value, sympy.Rational):
                return Fraction(int(value.p), int(value.q))
    except Exception:  # an unparsable side is "not arithmetic", never an error
        return None
    return None


def evaluate(expr: str) -> Fraction | None:
    value = _evaluate_plain(expr)
    if value is None and "\\" in expr:
        value = _evaluate_latex(expr)
    return value


def _normalise(text: str) -> str:
    for a, b in _LATEX_OPS:
        if a in text:
            text = text.replace(a, b)
    for _ in range(3 if "frac" in text else 0):  # nested \frac{\frac{a}{b}}{c}
        text = _FRAC.sub(r"((\1)/(\2))", text)
    text = _DELIMS.sub(" ", text)
    text = _THOUSANDS.sub("", text)
    text = _TIMES_X.sub(" * ", text)
    text = _UNIT.sub("", text)
    for pattern, sym in _WORD_OPS:
        text = pattern.sub(sym, text)
    return text


def statements(text: str) -> list[Statement]:
    """Every ``a = b`` of the text, in order; a chain ``a = b = c`` gives ``a = b`` and ``b = c``."""
    out = []
    for clause in _CLAUSE.split(_normalise(text)):
        for m in _RUN.finditer(clause):
            sides = [s.strip().rstrip(".").strip() for s in m.group().split("=")]
            if sides[0][:1] and sides[0][0] in "+*/^" and (word := re.search(r"(\S+)\s*$", clause[:m.start()])):
                sides[0] = f"{word.group(1)} {sides[0]}"  # "Ben * 4": a word in the arithmetic
            for lhs, rhs in itertools.pairwise(sides):
                if not lhs or not rhs:  # "x = 5", "Total = 40": a name, not a claim
                    if lhs or rhs:
                        out.append(Statement(lhs or "…", rhs or "…", None, None))
                    continue
                out.append(Statement(lhs, rhs, evaluate(lhs), evaluate(rhs)))
    return out



def answer_value(extracted: str | None) -> Fraction | None:
    """The extracted final answer as an exact number (``$1,200.`` -> 1200), or None when it is not one."""
    if extracted is None:
        return None
    return evaluate(_THOUSANDS.sub("", normalize_answer(extracted)))


@lru_cache(maxsize=16384)
def question_numbers(question: str) -> frozenset[Fraction]:
    return frozenset(Fraction(m) for m in NUM.findall(_THOUSANDS.sub("", question)))


def show(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    f = float(v)
    return f"{f:.6g}" if abs(f) < 1e15 else str(v)


def computes(text: str, value: float | Fraction) -> bool:
    """Whether a true statement of ``text`` has ``value`` on its right-hand side."""
    target = Fraction(value)
    return any(s.ok and s.rhs_value == target for s in statements(text))


# -- final answers, compared by value (multiple_answers, answer_repetition) --------------------------

LEADING = re.compile(r"\s*(\$?-?\d[\d,]*(?:\.\d+)?(?:\s*[-+*/x]\s*\$?\d[\d,]*(?:\.\d+)?)*"
                     r"(?:\s*=\s*\$?-?\d[\d,]*(?:\.\d+)?)?)")
_NESTED = re.compile(r"(?i),?\s+(?:the\s+)?(?:correct\s+|final\s+|real\s+)?answer\s+is\b")


def stated_answers(text: str) -> list[str]:
    """Every final answer the text states (:func:`candidates`), each cut where it runs into the next statement:
    "Since the answer is 36, the correct answer is 36 - 17 = 8." states 36, then 8."""
    return [_NESTED.split(c.answer)[0] for c in candidates(text)]


def answer_key(answer: str) -> str:
    """One key per answer as the grader reads it: normalised, then its exact value where it is arithmetic
    (``943 * 13 = 10,229``, ``10229.0`` and ``10229`` are one answer; so are ``14 + 6`` and ``20``)."""
    value = answer_value(answer)
    return str(value) if value is not None else normalize_answer(answer)
