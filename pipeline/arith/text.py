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

_LATEX_OPS = ((r"\times", "*"), (r"\cdot", "*"), (r"\div", "/"), (r"\left", ""), (r"\right", ""), (r"\,", ""), ("\\ ", " "),
              (r"\approx", "=~"), ("≈", "=~"),  # "0.3333 * 100 ≈ 33%": a rounding, read as such (Statement.approx)
              (r"\!", ""), (r"\%", "%"), (r"\$", ""), ("×", "*"), ("÷", "/"), ("−", "-"), ("–", "-"), ("·", "*"), ("€", ""),
              ("£", ""))


_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")


_DELIMS = re.compile(r"\\[()\[\]]|\$")


# how a reasoning model formats its working (real R1-distilled and QwQ-32B text, docs/flags.md): markdown bold, a
# list bullet at a line's start (not a minus sign), and LaTeX text groups, which are units or labels: "48 \,
# \text{car washes} \times \$15/\text{car wash} = \$720", "\text{Total cost} = 48 \times 15"
_MARKUP = re.compile(r"\*\*|__|(?m:^[ \t]*[-*•][ \t]+)|(?<=[A-Za-z}])_\{?[A-Za-z0-9]+\}?")  # ... and an index: x_1
_TEXT_OPEN = r"\\(?:text|textbf|textrm|textsuperscript|mathrm|mbox|operatorname)\s*\{"
_TEXT = _TEXT_OPEN + r"[^{}]*\}"
# words that are never a unit, after a number or a fraction ("= 0 or e = 16/5", "\frac{3}{5} \text{ of } 700")
_FUNCTION_WORDS = (r"(?:of|and|or|to|from|is|are|for|by|per|in|on|at|the|an?|with|than|times|plus|minus|so|then|if|but"
                   r"|we|it|as)\b")
# a unit (after a number, per a unit, or in brackets after a number) goes; any other text group is read as its words
# ("\text{ of }" is "of", "\text{Jane's age} - 3" is a name in the arithmetic), without its digits ("\text{Angela's
# age in 4 years} - 4": a name, not 4 - 4); "4 \times (\text{Number of mask refusers})" keeps its name. None of these
# reaches past a line's end (a display block's next line is another statement)
_TEXT_UNIT = re.compile(rf"(?<=\d)[ \t]*(?:\\[,;! ][ \t]*)?{_TEXT}(?:\^\{{?\d\}}?)?"  # "15 \text{ cm}^2"
                        rf"|/[ \t]*{_TEXT}|(?<=\d)[ \t]*\([ \t]*{_TEXT}[ \t]*\)"
                        r"|(?<=\d)[ \t]+[A-Za-z]+/[A-Za-z]+|(?<=\d)/[A-Za-z]{2,}\b"  # "$5.00/pack": per a unit
                        # after a fraction, a unit of a word or two: "\frac{3}{4} \text{ gallons}", not "\text{ of }"
                        rf"|(?<=\}})[ \t]*(?:\\[,;! ][ \t]*)?{_TEXT_OPEN}\s*(?!{_FUNCTION_WORDS})"
                        r"[A-Za-z]+(?:[ /][A-Za-z]+)?\s*\}")
# a note in brackets after a number or a word: "60 miles (total) - 20 miles (first stop)", "200 lbs (adults)"
_NOTE = re.compile(r"(?<=[\w%])[ \t]*\([ \t]*[A-Za-z][A-Za-z' ]{2,}\)")
_TEXT_WORDS = re.compile(_TEXT_OPEN + r"([^{}]*)\}")
_DIGITS = re.compile(r"\d")
# a repeating decimal: "33.\overline{3}" is 33.333333 (read to its decimals by agrees()), "33.333\ldots" is 33.333
_OVERLINE = re.compile(r"(\d\.\d*)\\overline\{(\d{1,6})\}")
_ELLIPSIS = re.compile(r"(?<=\d)[ \t]*(?:\\[lc]?dots|…|\.\.\.)")


_TIMES_X = re.compile(r"(?<=[\d)])[ \t]*[xX][ \t]*(?=[\d(])")  # "4 x 10"; "20x \n2. Divide" is a variable


# operators and '=' in words, between numbers: "58 plus 67 and you get 125" -> "58 + 67 = 125"
_WORD_OP_WORDS = (("plus", " + "), ("minus", " - "), ("times|multiplied by|of", " * "), ("divided by|over", " / "),
                  ("equals|is equal to|is|makes|gives|and you get|you get|to get|and get|gets you", " = "))


# one pass over the text: a group per operator (no two groups' words match at one place, so one pass is the
# five passes, one per operator, that it replaced: tests/test_annotate_arith.py compares them)
_WORD_OPS = re.compile(r"(?<=[\d)%])[ \t]+(?:" + "|".join(f"({words})" for words, _ in _WORD_OP_WORDS)
                       + r")[ \t]+(?=[-$\d(])", re.I)  # within a line: "1.2 hours\n\nOver 5 days" is no division


_WORD_SYMS = tuple(sym for _, sym in _WORD_OP_WORDS)


# a unit after a number, before an operator or '=': "4 bags * 10 eggs = 40 eggs" -> "4 * 10 = 40 eggs"
_UNIT = re.compile(rf"(?<=\d)(?:[ \t]+(?!{_FUNCTION_WORDS})[A-Za-z][A-Za-z']+){{1,2}}"
                   r"(?=[ \t]*(?:[-+*/=]|\\times|\\cdot))")


# a clause ends at a sentence's period, a comma or semicolon with a space, a colon, a question mark or a newline
CLAUSE = re.compile(r"\.(?=\s|$)|[,;](?=\s)|[:?!\n]")


# a run of arithmetic: digits, operators, brackets, '=', and (for sympy) LaTeX commands and braces; a statement is a
# maximal run holding '=' (found as maximal runs, then filtered: "X*=X*" itself backtracks quadratically on a long
# run without '=')
_RUN = re.compile(r"(?:[\d.\s(){}+\-*/^%=~]|\\[A-Za-z]+)+")


# a clause of modular arithmetic or digits: its '=' are congruences or "is" of a digit, not equalities
_MODULAR = re.compile(r"(?i)remainder|\bmod(?:ulo)?\b|\\[pb]mod|\\equiv|≡|congruent|\bdigits?\b")
# what says a statement just made does not hold: it was a candidate tried ("Test x = 0: 1 + 19 = 1, 20 \neq 1")
_REJECTED = re.compile(r"(?i)\\neq?\b|≠|\bnot (?:a |the )?(?:solution|equal|correct|true|valid|possible)|\bincorrect\b"
                       r"|\bcontradiction\b|\bdoes(?:n't| not) (?:work|hold|satisfy)|\bis(?:n't| not) (?:correct|right|true)")
_REJECT_WINDOW = 160  # characters after the statement's clause


_OR_AFTER = re.compile(r"[ \t]*or\b")  # alternatives: "x = 5/24 or 1/8"
_OR_BEFORE = re.compile(r"\bor[ \t]*$")


_NAMED = re.compile(r"[A-Za-z]\s*$")  # the text before a run ends in a word and a space: "Step 1 = ...", "Year 2010 ="


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
    named: bool = False  # the left side is a bare number right after a word ("Distance 1 = ...")
    approx: bool = False  # written with \approx: "0.3333 * 100 ≈ 33%"
    rejected: bool = False  # the text right after says it does not hold ("\neq", "not a solution"): a tried candidate

    @cached_property  # read several times per statement by the detectors
    def ok(self) -> bool | None:
        if self.lhs_value is None or self.rhs_value is None:
            return None
        if self.rejected and self.lhs_value != self.rhs_value:
            return None  # "1 + 19 = 1 \n 20 \neq 1, so x = 0 is not a solution": a candidate tried and rejected
        if self.approx:  # a rounding is right or unread, never a false claim: "≈ 33%" of 33.33, "≈ 1.98" of 4499/2250
            return True if _rounds_to(self) else None
        if self.lhs_value and self.rhs_value and self.lhs_value / self.rhs_value in _TIME_AND_SPEED_FACTORS:
            return None  # "1 hour + 0.25 hours = 60 minutes + 15 minutes", "1 km / 2.5 hours = 1000 m / (2.5 * 3600 s)":
            # a conversion of time or speed, not a false sum
        if self.lhs_value != self.rhs_value and not _computed(self.lhs) and not _computed(self.rhs):
            return None  # "3 dozen = 36", "1 bap = 5/3 yaps": a conversion with its units dropped, not arithmetic; "the
            # value of 10/21 is 49", "f(6) = 1/2": a fraction is a value, and a value named by another is no claim
        if (self.lhs_value != self.rhs_value and not _OPERATOR.search(self.lhs)
                and self.lhs_value in numbers(without_separators(self.rhs))):
            return None  # "90 minutes = 90/60 hours", "$220: 0.40 * 220 = 88" read as "220 = 0.40 * 220": a label
        if self.named and not _OPERATOR.search(self.lhs):
            return None  # "Distance 1 = 60 * 2 = 120", "the 2010 penny = 3/4 * 48": a number that names, not a claim
        return (agrees(self.lhs_value, self.rhs_value, self.rhs) or agrees(self.rhs_value, self.lhs_value, self.lhs)
                or _percent_rounded(self) or _rounded_operand(self.lhs, self.lhs_value, self.rhs_value)
                or _rounded_operand(self.rhs, self.rhs_value, self.lhs_value))  # "0.777777 = 7/9", "18*4/9 = 18*0.4444"

    @property
    def text(self) -> str:
        return f"{self.lhs} {'≈' if self.approx else '='} {self.rhs}"


_PERCENT_SIDE = re.compile(r"^\s*-?[\d.]+\s*%\s*$")
_FRACTION_VALUE = re.compile(r"\(\(\s*-?[\d.]+\s*\)/\(\s*[\d.]+\s*\)\)")  # \frac{5}{3} as normalised: a value


def _computed(side: str) -> bool:
    """Whether the side computes (holds an operator), a fraction of two numbers being a value."""
    return bool(_OPERATOR.search(_FRACTION_VALUE.sub("1", side) if "((" in side else side))


def _percent_rounded(s: Statement) -> bool:
    """``(32/96) * 100% = 33.33%``; ``(7/20) * 100 = 35%``, a percent sign as the unit of a value already multiplied by
    100: a percent, written to its decimals."""
    if not _PERCENT_SIDE.match(s.rhs):
        return False
    assert s.lhs_value is not None and s.rhs_value is not None
    written = s.rhs.strip().rstrip("%").strip()
    return agrees(s.lhs_value * 100, s.rhs_value * 100, written) or (
        bool(_TIMES_100.search(s.lhs)) and agrees(s.lhs_value, s.rhs_value * 100, written))


_TIMES_100 = re.compile(r"\*\s*100(?![\d.])|(?<![\d.])100\s*\*")
_DECIMALS = re.compile(r"(\d+)\.(\d+)")


_TIME_AND_SPEED_FACTORS = frozenset({Fraction(60), Fraction(1, 60), Fraction(3600), Fraction(1, 3600), Fraction(18, 5),
                           Fraction(5, 18)})  # ... and km/h to m/s
# a statement with no operator whose sides differ by one of these is a conversion ("$0.25 = 25 cents", "2 hours = 120
# minutes", "1.5 kg = 1500 g"): it gives its right side (gives())
_CONVERSIONS = frozenset(Fraction(f) for f in (60, 3600, 100, 1000, 12, 24, 7, 16)) | frozenset(
    Fraction(1, f) for f in (60, 3600, 100, 1000, 12, 24, 7, 16))


def _rounds_to(s: Statement) -> bool:
    """``a ≈ b``: b is a rounded to b's decimals (an integer: to the unit), or, b a percent, a or 100 a is."""
    assert s.lhs_value is not None and s.rhs_value is not None
    m = re.fullmatch(r"\s*-?\d+(?:\.(\d+))?\s*(%?)\s*", s.rhs)
    if not m:
        return False
    half = Fraction(1, 2 * 10 ** len(m.group(1) or ""))
    if m.group(2):
        return any(abs(v - s.rhs_value * 100) <= half for v in (s.lhs_value, s.lhs_value * 100))
    return abs(s.lhs_value - s.rhs_value) <= half


def _rounded_operand(side: str, value: Fraction | None, other: Fraction | None) -> bool:
    """``13.333 * 3 = 40``, ``0.6667 * 9 = 6``: an operand written to d >= 2 decimals may be a rounded value (a third,
    two thirds), off by up to half its last place; the result may be off by the sum of those relative errors."""
    rounded = [m for m in _DECIMALS.finditer(side) if len(m.group(2)) >= 2]
    if not rounded or value is None or other is None or other == 0:
        return False
    tolerance = sum((Fraction(1, 2 * 10 ** len(m.group(2))) / Fraction(m.group()) for m in rounded
                     if Fraction(m.group()) != 0), Fraction(0))
    return abs(value - other) <= abs(other) * tolerance


def agrees(value: Fraction, written: Fraction, text: str) -> bool:
    """``value`` equals the number written as ``text`` (``written``), to the decimals the writer kept."""
    if value == written:
        return True
    m = re.fullmatch(r"\s*-?\d+\.(\d+)\s*", text)
    if m:  # 10 / 3 = 3.33 (rounded) or 3.333 (truncated)
        step = Fraction(1, 10 ** len(m.group(1)))
        return abs(value - written) < step
    return False


def normalise(text: str) -> str:
    """Model text as arithmetic: markup, LaTeX, units, notes and separators gone, operators in words as symbols."""
    if "overline" in text:
        text = _OVERLINE.sub(lambda m: m.group(1) + m.group(2) * (6 // len(m.group(2)) or 1), text)
    if "dots" in text or "…" in text or "..." in text:
        text = _ELLIPSIS.sub("", text)
    if "*" in text or "_" in text or "\\" in text or "•" in text or "- " in text:
        text = _TEXT_WORDS.sub(lambda m: f" {_DIGITS.sub('', m.group(1))} ", _TEXT_UNIT.sub(" ", _MARKUP.sub(" ", text)))
    for a, b in _LATEX_OPS:
        if a in text:
            text = text.replace(a, b)
    if "(" in text:
        text = _NOTE.sub("", text)
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

    normal = normalise(text)
    start = 0
    for end_m in itertools.chain(CLAUSE.finditer(normal), [None]):
        end = end_m.start() if end_m else len(normal)
        clause = normal[start:end]
        start = end_m.end() if end_m else end
        if "=" not in clause:  # most clauses of a long text: no statement (a run holding '=' is one)
            continue
        if _MODULAR.search(clause):  # "6 / 4 = 1 remainder 2", "the units digit of 18^6 is 4": not equalities
            continue
        rejected = bool(_REJECTED.search(normal, end, end + _REJECT_WINDOW))
        for m in _RUN.finditer(clause):
            if "=" not in m.group():
                continue
            sides = [s.strip().rstrip(".").strip() for s in m.group().split("=")]
            approx = [side.startswith("~") for side in sides]  # "a =~ b": a ≈ b
            sides = [side.lstrip("~").strip() for side in sides]
            before = clause[max(0, m.start() - _WORD_BEFORE):m.start()]
            prev = before.rstrip()[-1:]
            if sides[0][:1] and (sides[0][0] in "+*/^" or (sides[0][0] == "-" and (
                    before[-1:].isalpha() or prev in "|!]"))) and (word := re.search(r"(\S+)\s*$", before)):
                sides[0] = f"{word.group(1)} {sides[0]}"  # "Ben * 4", "x - 10", "|x-4| - 10": a word in the arithmetic
            if clause[m.end():m.end() + 1].isalpha() and m.group()[-1:] in "0123456789)":
                sides[-1] += clause[m.end()]  # "45 + 5 = 2S": a coefficient, algebra, not a number
            if (clause[m.end():].lstrip()[:1] in ("|", "!") and clause[m.end():].strip()) or _OR_AFTER.match(
                    clause, m.end()):
                sides[-1] += " |"  # "6 = 1/2 |det|", "= 5!", "= 5/24 or 1/8": the side goes on past what is read
            if (before[-1:].isalpha() and m.group()[:1] in "0123456789(\\") or before[-1:] == "]":
                # "x2 = 4", "f(5) - 1", "i\\sin(3\\pi)", "\\sqrt[3]{2^6}": the same at the start
                sides[0] = re.search(r"\S*$", before).group() + sides[0]
            if _OR_BEFORE.search(before):
                sides[0] = "| " + sides[0]  # "5/12 or 3/12 = ...": one of two alternatives
            values = [value(side) if side else None for side in sides]  # each side once: a chain shares them
            for i, ((lhs, lv), (rhs, rv)) in enumerate(itertools.pairwise(zip(sides, values, strict=True))):
                if not lhs or not rhs:  # "x = 5", "Total = 40": a name, not a claim
                    if lhs or rhs:  # "x = 20 - 6" keeps its right side's value: the computation gives it
                        out.append(Statement(lhs or "…", rhs or "…", None, rv if not lhs and rhs else None))
                    continue
                named = i == 0 and bool(_NAMED.search(before))
                out.append(Statement(lhs, rhs, lv, rv, named, approx[i + 1], rejected))
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


def gives(s: Statement, target: Fraction) -> bool:
    """Whether ``s`` computes ``target``: a true statement with it on the right (or, the target a whole number, a
    fraction that rounds to it), a conversion of a value to it (``$0.25 = 25 cents``), or a name set to a computation
    of it (``x = 20 - 6`` gives 14)."""
    if s.ok:
        assert s.rhs_value is not None
        values = (s.rhs_value, s.rhs_value * 100) if _PERCENT_SIDE.match(s.rhs) else (s.rhs_value,)
        # ... or a value that the target rounds ("33.33%" for 33, "1.98 trips" for 2: a fraction rounded to a whole)
        return target in values or (target.denominator == 1 and any(
            v.denominator != 1 and abs(v - target) < Fraction(1, 2) for v in values))
    if (target and s.rhs_value == target and s.lhs_value and not _OPERATOR.search(s.lhs) and not _OPERATOR.search(s.rhs)
            and s.lhs_value / target in _CONVERSIONS):
        return True  # "$0.25 = 25 cents": a conversion of a value the working holds
    return s.lhs == "…" and s.rhs_value == target and bool(_OPERATOR.search(s.rhs))


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


_BOXED_WHOLE = re.compile(r"\\boxed\{(.*)\}")


def answer_key(answer: str, *, latex: bool = True) -> str:
    """One key per answer as the grader reads it: normalised, its box taken off, then its exact value where it is
    arithmetic (``943 * 13 = 10,229``, ``10229.0`` and ``10229`` are one answer; so are ``14 + 6`` and ``20``, and
    ``\\(\\boxed{4210_5}\\)`` and ``4210_5``)."""
    normal = normalize_answer(answer)
    if (boxed := _BOXED_WHOLE.fullmatch(normal)) and "boxed" not in boxed.group(1):
        answer = normal = boxed.group(1)
    value = answer_value(answer, latex=latex)
    return str(value) if value is not None else normal
