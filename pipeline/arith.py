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

passband's one arithmetic module: the flags read model text with it (``unsupported_answer``,
:mod:`pipeline.annotate.unsupported`; final answers compared by value in ``multiple_answers``; a question's
numbers in ``answer_in_question``), and the reformulators read a reference solution's steps with it
(:func:`chain`, :func:`expand_step`: the same evaluator, :func:`number` and :func:`agrees`).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

from pipeline.numbers import PLAIN, PLAIN_IN_TEXT, WRITTEN, Bounds, read_number, without_separators
from pipeline.verify.extract import candidates
from pipeline.verify.grader import normalize_answer

_LATEX_OPS = ((r"\times", "*"), (r"\cdot", "*"), (r"\div", "/"), (r"\left", ""), (r"\right", ""), (r"\,", ""),
              (r"\!", ""), (r"\%", "%"), (r"\$", ""), ("×", "*"), ("÷", "/"), ("−", "-"), ("–", "-"), ("·", "*"))
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_DELIMS = re.compile(r"\\[()\[\]]|\$")
_TIMES_X = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])")
# operators and '=' in words, between numbers: "58 plus 67 and you get 125" -> "58 + 67 = 125"
_WORD_OP_WORDS = (("plus", " + "), ("minus", " - "), ("times|multiplied by|of", " * "), ("divided by|over", " / "),
                  ("equals|is equal to|is|makes|gives|and you get|you get|to get|and get|gets you", " = "))
# one pass over the text: a group per operator (no two groups' words match at one place, so one pass is the
# five passes, one per operator, that it replaced: tests/test_annotate_arith.py compares them)
_WORD_OPS = re.compile(r"(?<=[\d)%])\s+(?:" + "|".join(f"({words})" for words, _ in _WORD_OP_WORDS)
                       + r")\s+(?=[-$\d(])", re.I)
_WORD_SYMS = tuple(sym for _, sym in _WORD_OP_WORDS)
# a unit after a number, before an operator or '=': "4 bags * 10 eggs = 40 eggs" -> "4 * 10 = 40 eggs"
_UNIT = re.compile(r"(?<=\d)(?:\s+(?!x\b)[A-Za-z][A-Za-z']*){1,2}(?=\s*(?:[-+*/=]|\\times|\\cdot))")
# a clause ends at a sentence's period, a comma or semicolon with a space, a colon, a question mark or a newline
_CLAUSE = re.compile(r"\.(?=\s|$)|[,;](?=\s)|[:?!\n]")
# a run of arithmetic: digits, operators, brackets, '=', and (for sympy) LaTeX commands and braces; a statement is a
# maximal run holding '=' (found as maximal runs, then filtered: "X*=X*" itself backtracks quadratically on a long
# run without '=')
_RUN = re.compile(r"(?:[\d.\s(){}+\-*/^%=]|\\[A-Za-z]+)+")
_WORD_BEFORE = 200  # characters looked back for the word before "* 4 = 16" ("Ben * 4 = 16")
_OPERATOR = re.compile(r"(?<=[\d)\s])[-+*/^]|\\")
_PLAIN = re.compile(r"^[\d.\s()+\-*/^%]+$")
NUM = PLAIN_IN_TEXT  # a number once its separators are removed (pipeline/numbers.py)


@dataclass(frozen=True)
class Statement:
    """One ``lhs = rhs`` of the working: ``ok`` is True/False when both sides evaluate, None when one does not."""

    lhs: str
    rhs: str
    lhs_value: Fraction | None
    rhs_value: Fraction | None

    @cached_property  # read several times per statement by the detectors
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


# bounds on what is evaluated: a number or an intermediate result of more digits reads as "not arithmetic"
MAX_DIGITS = 1000
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


def _big(v: int | Fraction) -> bool:
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
        if v is None or _big(v):
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


@lru_cache(maxsize=4096)
def _evaluate_latex(expr: str) -> Fraction | None:
    """A side that still holds LaTeX, read by latex2sympy2 (math-verify's parser); None unless it is a number.

    Only sides up to :data:`MAX_LATEX_CHARS` characters, parsed unevaluated first and evaluated only when
    :func:`_size` bounds the value (``\\sqrt{4^{10^{10}}}`` is refused in microseconds, not 4 GB later); a side
    that parses only evaluated must hold nothing that grows (:data:`_GROWS`)."""
    if len(expr) > MAX_LATEX_CHARS:
        return None
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
            if isinstance(value, sympy.Rational) and not _big(Fraction(int(value.p), int(value.q))):
                return Fraction(int(value.p), int(value.q))
    except Exception:  # an unparsable side is "not arithmetic", never an error
        return None
    return None


_BOX_WRAP = re.compile(r"\\(?:boxed|fbox)\s*(?=\{)")


def _needs_sympy(expr: str) -> bool:
    """A side only sympy can read: LaTeX left, and a digit (``\\angle``, ``\\theta`` alone are no number)."""
    return "\\" in expr and any(c.isdigit() for c in expr)


def evaluate(expr: str, *, latex: bool = True) -> Fraction | None:
    """``expr`` as an exact number, or None; ``latex``: a side that still holds LaTeX may be read by sympy."""
    value = _evaluate_plain(expr)
    if value is None and "\\" in expr:
        unboxed = _BOX_WRAP.sub("", expr)  # "\\boxed{125}" is 125 without sympy (two thirds of long-CoT LaTeX sides)
        if unboxed != expr and "\\" not in unboxed:
            value = _evaluate_plain(unboxed)
        if value is None and latex and _needs_sympy(expr):
            value = _evaluate_latex(expr)
    return value


def _normalise(text: str) -> str:
    for a, b in _LATEX_OPS:
        if a in text:
            text = text.replace(a, b)
    for _ in range(3 if "frac" in text else 0):  # nested \frac{\frac{a}{b}}{c}
        text = _FRAC.sub(r"((\1)/(\2))", text)
    text = _DELIMS.sub(" ", text)
    text = without_separators(text)
    text = _TIMES_X.sub(" * ", text)
    text = _UNIT.sub("", text)
    return _WORD_OPS.sub(lambda m: _WORD_SYMS[m.lastindex - 1], text)


def statements(text: str) -> list[Statement]:
    """Every ``a = b`` of the text, in order; a chain ``a = b = c`` gives ``a = b`` and ``b = c``."""
    out = []
    latex: set[str] = set()  # the LaTeX sides read by sympy so far (at most LATEX_PER_TEXT)

    def value(side: str) -> Fraction | None:
        v = evaluate(side, latex=False)
        if v is None and _needs_sympy(side) and (side in latex or len(latex) < LATEX_PER_TEXT):
            latex.add(side)
            v = _evaluate_latex(side)
        return v

    for clause in _CLAUSE.split(_normalise(text)):
        if "=" not in clause:  # most clauses of a long text: no statement (a run holding '=' is one)
            continue
        for m in _RUN.finditer(clause):
            if "=" not in m.group():
                continue
            sides = [s.strip().rstrip(".").strip() for s in m.group().split("=")]
            if sides[0][:1] and sides[0][0] in "+*/^" and (
                    word := re.search(r"(\S+)\s*$", clause[max(0, m.start() - _WORD_BEFORE):m.start()])):
                sides[0] = f"{word.group(1)} {sides[0]}"  # "Ben * 4": a word in the arithmetic
            values = [value(side) if side else None for side in sides]  # each side once: a chain shares them
            for (lhs, lv), (rhs, rv) in itertools.pairwise(zip(sides, values, strict=True)):
                if not lhs or not rhs:  # "x = 5", "Total = 40": a name, not a claim
                    if lhs or rhs:
                        out.append(Statement(lhs or "…", rhs or "…", None, None))
                    continue
                out.append(Statement(lhs, rhs, lv, rv))
    return out



def answer_value(extracted: str | None, *, latex: bool = True) -> Fraction | None:
    """The extracted final answer as an exact number (``$1,200.`` -> 1200), or None when it is not one;
    ``latex``: LaTeX may be read by sympy (callers reading many answers of one text keep to LATEX_PER_TEXT)."""
    if extracted is None:
        return None
    return evaluate(without_separators(normalize_answer(extracted)), latex=latex)


def number(text: str) -> Fraction | None:
    """A number as written (``24``, ``-5``, ``1,200``, ``$3.50``, ``3/4``, a trailing period allowed), exactly; None
    when it is not one or runs past :data:`MAX_DIGITS` characters."""
    text = text.replace(",", "").replace("$", "").strip().rstrip(".")
    got = read_number(text, bounds=Bounds(MAX_DIGITS, MAX_DIGITS, MAX_DIGITS, MAX_DIGITS))
    return None if got is None else got.value


def numbers(text: str) -> list[Fraction]:
    """Every number of ``text`` (:data:`NUM`) up to :data:`MAX_DIGITS` characters, in order."""
    return [Fraction(m) for m in NUM.findall(text) if len(m) <= MAX_DIGITS]


@lru_cache(maxsize=16384)
def question_numbers(question: str) -> frozenset[Fraction]:
    return frozenset(numbers(without_separators(question)))


def show(v: Fraction) -> str:
    if _big(v):
        return f"a number of over {MAX_DIGITS} digits"
    if v.denominator == 1:
        return str(v.numerator)
    f = float(v)
    return f"{f:.6g}" if abs(f) < 1e15 else str(v)


def computes(text: str, value: float | Fraction) -> bool:
    """Whether a true statement of ``text`` has ``value`` on its right-hand side."""
    target = Fraction(value)
    return any(s.ok and s.rhs_value == target for s in statements(text))


# -- final answers, compared by value (multiple_answers, answer_repetition) --------------------------

LEADING = re.compile(rf"\s*(\$?-?{WRITTEN}(?:\s*[-+*/x]\s*\$?{WRITTEN})*(?:\s*=\s*\$?-?{WRITTEN})?)")
# "..., the correct answer is": a match starts at the comma or at the first space of a run (a start inside the run
# re-scans it: quadratic on a long run of spaces)
_NESTED = re.compile(r"(?i)(?:,|(?<![\s,]))\s+(?:the\s+)?(?:correct\s+|final\s+|real\s+)?answer\s+is\b")
MAX_ANSWER_CHARS = 1000  # a stated answer is cut here (an "answer" longer than this is prose)


def stated_answers(text: str) -> list[str]:
    """Every final answer the text states (:func:`candidates`: linear, in the completion's last
    ``pipeline.verify.extract.SEARCH_CHARS`` characters), each cut at :data:`MAX_ANSWER_CHARS` and where it runs into
    the next statement: "Since the answer is 36, the correct answer is 36 - 17 = 8." states 36, then 8."""
    return [_NESTED.split(c.answer[:MAX_ANSWER_CHARS], maxsplit=1)[0] for c in candidates(text)]


def answer_key(answer: str, *, latex: bool = True) -> str:
    """One key per answer as the grader reads it: normalised, then its exact value where it is arithmetic
    (``943 * 13 = 10,229``, ``10229.0`` and ``10229`` are one answer; so are ``14 + 6`` and ``20``)."""
    value = answer_value(answer, latex=latex)
    return str(value) if value is not None else normalize_answer(answer)


# -- a reference solution's computations, as a chain of steps (the reformulators) ----------------------------------
#
# GSM8K's calculator annotations ``<<48/2=24>>``, else plain ``14 + 9 = 23`` equations, each recomputed exactly; a
# step whose stated result is not its recomputed value makes the chain invalid. GSM8K train item 1::
#
#     Natalia sold 48/2 = <<48/2=24>>24 clips in May. ... 48+24 = <<48+24=72>>72 clips ...
#     -> [Step("48/2", 24), Step("48+24", 72)]
#
# :func:`expand_step` rewrites a bare one-operation step on a multi-digit number into place-value steps, so a
# one-step solution still has a beginning to give as a hint::
#
#     52 - 27 = 25.  ->  52 - 27 = 52 - 20 - 7. 52 - 20 = 32. 32 - 7 = 25.

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
