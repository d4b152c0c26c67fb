"""The bounded exact evaluator: one side of a statement (``3 * 4``, ``\\frac{1}{2} + 1``, ``15%``) as a Fraction, or None.

Iterative (any nesting depth), exact rationals, Python's precedence; a number or result over :data:`MAX_DIGITS` digits
is not evaluated, a power needs an integer exponent up to 64 and a base up to 10^6, and a side that still holds a
backslash is read by latex2sympy2 only when its size is checked to stay bounded (:data:`MAX_LATEX_CHARS`).
"""

from __future__ import annotations

import math
import operator
import re
from fractions import Fraction
from functools import lru_cache

from pipeline.numbers import PLAIN

# bounds on what is evaluated: a number or an intermediate result of more digits reads as "not arithmetic"
MAX_DIGITS = 1000
_PLAIN = re.compile(r"^[\d.\s()+\-*/^%]+$")  # a side of digits, brackets and operators only


_MAX_BITS = int(MAX_DIGITS * 3.33) + 1


MAX_LATEX_CHARS = 100  # a longer LaTeX side is not read by sympy


LATEX_PER_TEXT = 16  # distinct LaTeX sides read by sympy per text; the rest read as "not arithmetic"


_INT = re.compile(rf"\s*(-?\d{{1,{MAX_DIGITS}}})\s*")


_INT_OP_INT = re.compile(rf"\s*(\d{{1,{MAX_DIGITS}}})\s*([-+*])\s*(\d{{1,{MAX_DIGITS}}})\s*")


_INT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


# Python's tokens for this grammar: numbers as Python reads them, '**' and '//' before '*' and '/'
_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|(\*\*|//|[-+*/%()]))")


_LEADING_ZERO = re.compile(r"0+[1-9]")


_BINARY = {"+": (1, operator.add), "-": (1, operator.sub), "*": (2, operator.mul), "/": (2, None), "**": (4, None)}


_UNARY_PREC = 3  # binds tighter than * /, looser than ** on its left: -2**2 is -4, 2**-1 is 1/2


def too_big(v: int | Fraction) -> bool:
    return v.numerator.bit_length() > _MAX_BITS or v.denominator.bit_length() > _MAX_BITS


def _number(token: str) -> int | Fraction | None:
    """A numeric token as Python's parser reads it (a decimal is a float: ``Fraction(str(float))``); integers stay
    ``int`` (exact, and 40x faster than Fraction) until a division."""
    if len(token) > MAX_DIGITS:
        return None
    if "." not in token:
        if _LEADING_ZERO.match(token):  # "007" is a syntax error in Python 3
            return None
        return int(token)
    f = float(token)
    return Fraction(str(f)) if math.isfinite(f) else None


def _apply(op: str, a: int | Fraction, b: int | Fraction) -> int | Fraction | None:
    if op == "**":  # small integer powers only: 2^10, not 7^7^11
        if b.denominator != 1 or abs(b) > 64 or abs(a) > 10 ** 6:
            return None
        if not a and b < 0:
            return None
        if max(a.numerator.bit_length(), a.denominator.bit_length()) * abs(int(b)) > _MAX_BITS:
            return None
        return a ** int(b) if b >= 0 else Fraction(a) ** int(b)
    if op == "/":
        return None if b == 0 else Fraction(a) / b
    return _BINARY[op][1](a, b)


def _evaluate_tokens(expr: str) -> int | Fraction | None:
    """``expr`` (numbers, + - * / ** and brackets) as Python evaluates it, with exact rationals, iteratively
    (shunting-yard: any depth, linear time); None on a syntax error, an operator outside the grammar (``%``,
    ``//``), a division by zero, a refused power or a value over :data:`MAX_DIGITS` digits."""
    values: list[int | Fraction] = []
    ops: list[str] = []  # binary operators, "u-"/"u+" (unary) and "(" on the stack

    def reduce_top() -> bool:
        op = ops.pop()
        if op in ("u-", "u+"):
            if not values:
                return False
            if op == "u-":
                values[-1] = -values[-1]
            return True
        if len(values) < 2:
            return False
        b, a = values.pop(), values.pop()
        v = _apply(op, a, b)
        if v is None or too_big(v):
            return False
        values.append(v)
        return True

    def prec(op: str) -> int:
        return _UNARY_PREC if op in ("u-", "u+") else _BINARY[op][0]

    expect_operand, pos = True, 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            if expr[pos:].strip():
                return None
            break
        pos = m.end()
        num, op = m.group(1), m.group(2)
        if expect_operand:
            if num is not None:
                v = _number(num)
                if v is None:
                    return None
                values.append(v)
                expect_operand = False
            elif op in ("-", "+"):
                ops.append("u" + op)
            elif op == "(":
                ops.append("(")
            else:
                return None
        elif num is not None or op == "(":  # "2 3", "2(3)": a syntax error or a call, not arithmetic
            return None
        elif op == ")":
            while ops and ops[-1] != "(":
                if not reduce_top():
                    return None
            if not ops:
                return None
            ops.pop()
        elif op in _BINARY:
            p = _BINARY[op][0]
            while ops and ops[-1] != "(" and (prec(ops[-1]) > p or (prec(ops[-1]) == p and op != "**")):
                if not reduce_top():
                    return None
            ops.append(op)
            expect_operand = True
        else:  # "%" (modulo) and "//" are outside the grammar
            return None
    if expect_operand:
        return None
    while ops:
        if ops[-1] == "(" or not reduce_top():
            return None
    return values[0] if len(values) == 1 else None


def _evaluate_plain(expr: str) -> Fraction | None:
    """An arithmetic expression (numbers, + - * / ^, brackets) as an exact rational, or None."""
    if len(expr) <= 16:
        return _evaluate_short(expr)
    return _evaluate_any(expr)


@lru_cache(maxsize=16384)  # short sides repeat: "12", "3 * 4"
def _evaluate_short(expr: str) -> Fraction | None:
    return _evaluate_any(expr)


def _evaluate_any(expr: str) -> Fraction | None:
    if m := _INT.fullmatch(expr):  # the common shapes without the parser: "25", "52 - 27"
        return Fraction(int(m.group(1)))
    if m := _INT_OP_INT.fullmatch(expr):
        return Fraction(_INT_OPS[m.group(2)](int(m.group(1)), int(m.group(3))))
    expr = expr.strip().replace("{", "(").replace("}", ")")
    if not expr or not _PLAIN.match(expr) or not re.search(r"\d", expr):
        return None
    if "%" in expr:
        expr = _PERCENT.sub(r"(\1/100)", expr)
    value = _evaluate_tokens(expr.replace("^", "**"))
    return None if value is None else Fraction(value)


# a match starts only at a number's first digit (a start inside a long number re-scans it: quadratic)
_PERCENT = re.compile(rf"(?<![\d.])({PLAIN})\s*%")


_TAME: tuple | None = None


# LaTeX whose value can grow past any bound (powers, factorials, binomials, sums, products, exp): refused when it
# cannot be parsed unevaluated for :func:`_size` to check
_GROWS = re.compile(r"\^|!|\\[dt]?binom|\\choose|\\exp|\\prod|\\sum|\\Gamma")


def _size(expr) -> int | None:
    """An upper bound on the digits of ``expr``'s value (numerator and denominator) for the sympy expression trees
    latex2sympy builds unevaluated, or None when it is not bounded: a power needs a literal exponent up to 64,
    a function (factorial, binomial, ...) arguments under 100. Iterative (post-order with a stack)."""
    import sympy

    global _TAME
    if _TAME is None:  # functions whose value is no larger than their argument's (plus a digit)
        _TAME = (sympy.floor, sympy.ceiling, sympy.Abs, sympy.sign, sympy.frac, sympy.sin, sympy.cos, sympy.tan,
                 sympy.cot, sympy.sec, sympy.csc, sympy.asin, sympy.acos, sympy.atan, sympy.log, sympy.re, sympy.im)
    sizes: dict[int, int] = {}
    stack: list[tuple[object, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if not done and node.args:
            stack.append((node, True))
            stack.extend((a, False) for a in node.args)
            continue
        args = [sizes[id(a)] for a in node.args]
        if isinstance(node, sympy.Rational):
            size = max(len(str(abs(node.p))), len(str(node.q))) if max(abs(node.p), node.q).bit_length() <= _MAX_BITS \
                else MAX_DIGITS + 1
        elif isinstance(node, sympy.Float):
            size = len(str(int(abs(node)))) + 1 if abs(node) < 10 ** MAX_DIGITS else MAX_DIGITS + 1
        elif isinstance(node, sympy.NumberSymbol | sympy.core.numbers.ImaginaryUnit):
            size = 1
        elif isinstance(node, sympy.Add | sympy.Mul):
            size = sum(args) + 1
        elif isinstance(node, sympy.Pow):
            e = node.args[1]
            if not isinstance(e, sympy.Rational) or abs(e) > 64:
                return None
            size = args[0] * max(1, abs(int(e.p)))
        elif isinstance(node, _TAME) and args:
            size = max(args) + 1
        elif isinstance(node, sympy.Function) and all(a <= 2 for a in args):
            size = 160  # 99! has 156 digits
        else:
            return None
        if size > MAX_DIGITS:
            return None
        sizes[id(node)] = size
    return sizes[id(expr)]


_DIGIT_BRACKET = re.compile(r"(?<=\d)\s*\(")


@lru_cache(maxsize=4096)
def evaluate_latex(expr: str) -> Fraction | None:
    """A side that still holds LaTeX, read by latex2sympy2 (math-verify's parser); None unless it is a number.

    Only sides up to :data:`MAX_LATEX_CHARS` characters, parsed unevaluated first and evaluated only when
    :func:`_size` bounds the value (``\\sqrt{4^{10^{10}}}`` is refused in microseconds, not 4 GB later); a side
    that parses only evaluated must hold nothing that grows (:data:`_GROWS`)."""
    if len(expr) > MAX_LATEX_CHARS:
        return None
    if "(" in expr:  # "\\sqrt{3(3) - 5}": latex2sympy reads 3(3) wrongly (1, not 2); a product, written out
        expr = _DIGIT_BRACKET.sub("*(", expr)
    try:
        import sympy
        from latex2sympy2_extended import latex2sympy

        try:
            with sympy.evaluate(False):
                tree = latex2sympy(expr)
        except Exception:  # some shapes only parse evaluated ("10\frac{1}{12}", a mixed number)
            tree = None
        if tree is None:
            if _GROWS.search(expr):
                return None
        elif not isinstance(tree, sympy.Basic) or tree.free_symbols or _size(tree) is None:
            return None
        value = latex2sympy(expr) if tree is None else tree  # one parse: the checked tree, evaluated by simplify
        if isinstance(value, sympy.Basic) and value.is_number:
            value = sympy.nsimplify(sympy.simplify(value), rational=False)
            if isinstance(value, sympy.Rational) and not too_big(Fraction(int(value.p), int(value.q))):
                return Fraction(int(value.p), int(value.q))
    except Exception:  # an unparsable side is "not arithmetic", never an error
        return None
    return None


_BOX_WRAP = re.compile(r"\\(?:boxed|fbox)\s*(?=\{)")


def needs_sympy(expr: str) -> bool:
    """A side only sympy can read: LaTeX left, and a digit (``\\angle``, ``\\theta`` alone are no number)."""
    return "\\" in expr and any(c.isdigit() for c in expr)


def evaluate(expr: str, *, latex: bool = True) -> Fraction | None:
    """``expr`` as an exact number, or None; ``latex``: a side that still holds LaTeX may be read by sympy."""
    value = _evaluate_plain(expr)
    if value is None and "\\" in expr:
        unboxed = _BOX_WRAP.sub("", expr)  # "\\boxed{125}" is 125 without sympy (two thirds of long-CoT LaTeX sides)
        if unboxed != expr and "\\" not in unboxed:
            value = _evaluate_plain(unboxed)
        if value is None and latex and needs_sympy(expr):
            value = evaluate_latex(expr)
    return value
