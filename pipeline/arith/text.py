"""Arithmetic in model text: every ``a op b = c`` statement, the final answers stated, a question's numbers."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

from pipeline.arith.evaluate import LATEX_PER_TEXT, MAX_DIGITS, evaluate, evaluate_latex, needs_sympy, too_big
from pipeline.numbers import PLAIN_IN_TEXT, WRITTEN, Bounds, read_number, without_separators
from pipeline.verify.answer_text import normalize_answer
from pipeline.verify.extract import candidates

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
        if v is None and needs_sympy(side) and (side in latex or len(latex) < LATEX_PER_TEXT):
            latex.add(side)
            v = evaluate_latex(side)
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
    if too_big(v):
        return f"a number of over {MAX_DIGITS} digits"
    if v.denominator == 1:
        return str(v.numerator)
    f = float(v)
    return f"{f:.6g}" if abs(f) < 1e15 else str(v)


def computes(text: str, value: float | Fraction) -> bool:
    """Whether a true statement of ``text`` has ``value`` on its right-hand side."""
    target = Fraction(value)
    return any(s.ok and s.rhs_value == target for s in statements(text))


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
