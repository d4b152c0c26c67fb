"""Grading one extracted answer against one gold: the part that runs inside a worker process.

:func:`grade` is pure and runs anywhere (tests call it directly); :mod:`pipeline.verify.pool`
runs it in worker processes with an outer kill and a memory limit, because math-verify can
hold the GIL for minutes on inputs like ``\\boxed{7^{7^{11}}}``. Inside the worker math-verify's
own SIGALRM timeout is switched off (it cannot interrupt C code and it turns a timeout into a
silent ``False``); the pool's deadline is the only clock.

Gold: parsed by :func:`pipeline.gold.parse_gold`, the project's one way (ingest already
rejected golds it cannot parse). Answer: normalised, then parsed with the same extraction
configuration, as LaTeX inside ``$...$`` first.

Decided policies for math-verify's known pitfalls (tests/test_verify_grader.py, golden cases):

- plain-text ``2*sqrt(3)``: math-verify's plain-expression parser reads it as ``2`` (a false
  positive against gold 2). The answer is parsed as LaTeX first (``$2*sqrt(3)$`` is
  ``2*sqrt(3)``); the plain parser is only a fallback.
- ``"#### 42\\nExtra 7"``: the ``gsm8k`` extractor takes the marker's own line (42).
- ``10\\%`` vs 0.1: a percent sign is a unit and is dropped: ``10\\%`` equals 10 and not 0.1
  (GSM8K and MATH golds for "what percent" questions are the bare number).
- ``(C)``: a lone choice letter (``C``, ``(C)``, ``\\text{(C)}``) is compared as a letter, and only
  with a gold that is itself a choice letter.
- ``(1,2)`` vs ``\\{1,2\\}``: math-verify calls an open interval equal to a set; an answer whose
  outer brackets are a tuple/interval is incorrect against a set gold, and the other way round.
- a number followed by plain words (``12 apples``) is the number; ``18 dollars`` would
  otherwise parse as a product of symbols.
- an extracted "answer" of three or more words with no digit and no math ("the number of
  stickers that Ana has now") is ``no_answer``: the model stated no answer.
- an answer that is an equation (``4 + 2 + 10 = 24 bars``, ``x = 5``) is graded by its last
  right-hand side; "..., which is 12" by what follows "which is".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fractions import Fraction

from pydantic import Field

from pipeline.config import Model
from pipeline.gold import parse_gold
from pipeline.numbers import PLAIN, Bounds, read_number
from pipeline.verify.answer_text import (
    CHOICE_LEAD,
    ORDINAL,
    TEXT_ANY,
    bracket_kind,
    choice_letter,
    clock_verdict,
    has_words,
    is_equation,
    is_prose,
    last_rhs,
    normalize,
    number_words,
    parse_answer,
    strip_dollars,
)
from pipeline.verify.policies import detail_with

STATUSES = ("correct", "incorrect", "no_answer", "timeout", "error")


class GradeOptions(Model):
    """math-verify's comparison knobs (``verify.options`` in params.yaml)."""

    float_rounding: int = Field(6, ge=0, le=15)
    numeric_precision: int = Field(15, ge=1, le=100)
    strict: bool = True


@dataclass(frozen=True)
class Grade:
    status: str
    detail: str | None = None


# Numbers decided without sympy (:func:`~pipeline.numbers.read_number` within math-verify's precision): an integer of
# up to 30 digits (separators in groups of three allowed), a decimal of up to 12 digits each side and 15 significant (its
# Float precision), a fraction ``a/b`` or ``\\frac{a}{b}`` of up to 15 digits each
FAST_BOUNDS = Bounds(whole_digits=30, decimal_digits=12, significant=15, fraction_digits=15)


def exact_number(text: str) -> tuple[Fraction, bool] | None:
    """``(value, is_decimal)`` of an integer, a decimal (either may have thousands separators in groups of three) or
    a simple fraction written alone; None for anything else."""
    got = read_number(text, bounds=FAST_BOUNDS, bare_decimal=False)
    return None if got is None else (got.value, got.decimal)


# a number in scientific notation: 4e33, 7.353E+14, 1e-5 (e-notation), and 4 \times 10^{33}, 6.5 \cdot 10^{-2}
_E_NOTATION = re.compile(rf"^(-?{PLAIN})[eE]([+-]?\d{{1,3}})$")
_TIMES_TEN = re.compile(rf"^(-?{PLAIN})\s*(?:\\times|\\cdot|×|\*)\s*10\s*\^\s*\{{?\s*([+-]?\d{{1,3}})\s*\}}?$")
# a LaTeX unit after a value: "\, \text{erg/s}", "~\mathrm{m}", " \text{ J}"
_LATEX_UNIT = re.compile(r"(?:\s|\\[,;:! ]|~)*\\(?:text|mathrm|rm)\s*\{[^{}]*\}\s*$")


def scientific(text: str) -> tuple[Fraction, bool] | None:
    """``(value, in e-notation)`` of a number in scientific notation (``4e33``, ``4 \\times 10^{33}``) or a plain one
    (:func:`exact_number`), a LaTeX unit after it dropped; None for anything else."""
    t = strip_dollars(_LATEX_UNIT.sub("", text.strip()).strip())
    if m := _E_NOTATION.match(t):
        return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2)), True
    if m := _TIMES_TEN.match(t):
        return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2)), False
    got = exact_number(t)
    return (got[0], False) if got is not None else None


def e_notation_verdict(gold: str, answer: str) -> bool | None:
    """Two numbers, one of them in e-notation (``4e33``, which math-verify reads as 4 * e * 33): equal when their
    values are exactly equal; None when that is not the case at hand."""
    g, a = scientific(gold), scientific(answer)
    if g is None or a is None or not (g[1] or a[1]):
        return None
    return g[0] == a[0]


# a subscript or superscript of one character in braces, and LaTeX spacing: written two ways, the same expression
_ONE_CHAR_SCRIPT = re.compile(r"([_^])\{\s*([A-Za-z0-9])\s*\}")
_SPACING = re.compile(r"\s+|\\[,;:! ]|\\left|\\right")


def same_text(gold: str, answer: str) -> bool:
    """The same expression as written, up to spacing and braces around a one-character script (``E_{1}`` and
    ``E_1``): math-verify cannot parse some of these (``\\frac{1}{3} E_{1}+\\frac{2}{3} E_{2}``)."""
    def canon(x: str) -> str:
        return _SPACING.sub("", _ONE_CHAR_SCRIPT.sub(r"\1\2", x.strip().strip("$")))
    return bool(gold.strip()) and canon(gold) == canon(answer)


_GOLD_SEAM = re.compile(r"(?<!\\)\$\s*\$")  # "$ $" inside a gold: a formula split by its source's formatting
_AND = re.compile(r"\s*(?:\\text\{\s*and\s*\}|\band\b)\s*")
_TOP_COMMAS = re.compile(r",(?![^{}()\[\]]*[}\)\]])")


def and_list(gold: str, answer: str) -> str | None:
    """``E_1 \\text{ and } E_2`` as ``E_1, E_2`` when the gold is a comma list of as many items (``E_{1},E_{2}``);
    None otherwise (no "and", or another count)."""
    if "and" not in answer:
        return None
    items = [x for x in _AND.split(answer.replace(", and", " and")) if x.strip()]
    parts = [x for p in items for x in _TOP_COMMAS.split(p) if x.strip()]
    n_gold = len(_TOP_COMMAS.split(gold))
    if len(items) < 2 or n_gold < 2 or len(parts) != n_gold:
        return None
    return ", ".join(x.strip() for x in parts)


def numbers_verdict(gold: str, answer: str, options: GradeOptions = GradeOptions()) -> bool | None:
    """math-verify's verdict on two plain numbers, decided exactly and without sympy; None where only
    math-verify can say (not both plain numbers, or a decimal within its rounding of the other value).

    Integers and fractions compare exactly (math-verify compares two rationals symbolically); when a decimal is
    involved math-verify compares after rounding to ``float_rounding`` places: equal values are equal, values
    two units of the last place or more apart are not, and the band in between goes to math-verify (so does a
    decimal when ``numeric_precision`` is below the 15 digits a decimal here may have)."""
    g, a = exact_number(gold), exact_number(answer)
    if g is None or a is None:
        return None
    decimal = g[1] or a[1]
    if decimal and options.numeric_precision < FAST_BOUNDS.significant:
        return None
    if g[0] == a[0]:
        return True
    if not decimal or abs(g[0] - a[0]) >= Fraction(2, 10**options.float_rounding):
        return False
    return None


def pre_grade(gold: str, answer: str, options: GradeOptions = GradeOptions()) -> Grade | tuple[str, tuple[str, ...]]:
    """The part of :func:`grade` that needs no sympy: the policies, and the verdict on two plain numbers.

    Returns the :class:`Grade` when it is decided here, else ``(normalised answer, policies fired)`` for
    math-verify. Pure string work on an answer of at most ``verify.max_answer_chars``: it runs in the
    caller's process (microseconds), and :func:`grade` starts with it, so both give the same verdicts."""
    norm, fired = normalize(answer, keep_equation=is_equation(gold), strip_units=not has_words(gold))
    if not norm:
        return Grade("no_answer", detail_with(fired, "the extracted answer is empty after normalisation"))
    if exact_number(gold) is not None:  # words and ordinals only against a number gold
        if (w := number_words(norm)) is not None:
            norm, fired = w, (*fired, "number_words")
        elif m := ORDINAL.match(TEXT_ANY.sub(r"\1", norm).strip()):
            norm, fired = m.group(1), (*fired, "ordinal")
    if is_prose(norm):
        return Grade("no_answer", detail_with(("prose",), "the extracted answer is prose (no digit, no math)"))
    if (clock := clock_verdict(gold, norm)) is not None:
        return Grade("correct" if clock else "incorrect", detail_with((*fired, "clock_time")))
    gold_choice, ans_choice = choice_letter(gold), choice_letter(norm)
    if gold_choice is not None and ans_choice is None and (m := CHOICE_LEAD.match(norm.strip().strip("$").strip())):
        ans_choice = m.group(1).upper()  # "(B) Circle": the letter, its option's text read past
    if gold_choice is not None:
        if ans_choice is None:
            return Grade("incorrect", detail_with(("choice_letter",),
                                                  f"gold is choice {gold_choice}; the answer is not a choice letter"))
        return Grade("correct" if ans_choice == gold_choice else "incorrect", detail_with(("choice_letter",)))
    gk, ak = bracket_kind(gold), bracket_kind(norm)
    if {gk, ak} == {"set", "tuple"}:
        return Grade("incorrect", detail_with(("set_vs_tuple",), f"gold is a {gk}, the answer a {ak}"))
    same = numbers_verdict(gold, norm, options)
    if same is not None:
        return Grade("correct" if same else "incorrect", detail_with(fired))
    if (sci := e_notation_verdict(gold, norm)) is not None:
        return Grade("correct" if sci else "incorrect", detail_with((*fired, "e_notation")))
    return norm, fired


MAX_FAST_GOLD_CHARS = 1000  # a longer gold goes to the worker pool whole (the policies' regexes stay cheap)


def fast_grade(gold: str, answer: str, options: GradeOptions = GradeOptions()) -> Grade | None:
    """:func:`pre_grade`'s verdict when it decides one (in-process, no sympy), else None (the worker pool decides)."""
    if len(gold) > MAX_FAST_GOLD_CHARS:
        return None
    got = pre_grade(gold, answer, options)
    return got if isinstance(got, Grade) else None


def _expressions(parsed: tuple) -> tuple:
    """math-verify's parse when it holds an expression; empty when it is at most the text itself."""
    return parsed if any(not isinstance(g, str) for g in parsed) else ()


def grade(gold: str, answer: str, *, options: GradeOptions = GradeOptions()) -> Grade:
    """Compare one extracted answer with one gold. Raises on math-verify errors (the pool records them).

    The detail of a verdict a policy shaped names it (``policy: percent_unit``)."""
    from math_verify import verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" notice
    got = pre_grade(gold, answer, options)
    if isinstance(got, Grade):
        return got
    norm, fired = got
    if _GOLD_SEAM.search(gold):  # "x_{0} \\cos (\\omega t)+$ $\\dot{x}_{0}": one formula cut in two by a stray "$ $"
        gold, fired = _GOLD_SEAM.sub(" ", gold), (*fired, "gold_seam")
    if (listed := and_list(gold, norm)) is not None:
        norm, fired = listed, (*fired, "and_list")
    raw = parse_gold(gold)  # parsed once: a gold math-verify reads only as text comes back as its string
    gold_parsed = _expressions(raw)
    if not gold_parsed and is_equation(gold) and (rhs := last_rhs(gold)) != gold and (
            gold_parsed := _expressions(parse_gold(rhs))):
        # "m_{\\max}=n^{2}-n-1": math-verify cannot read the left side; a reader grades the value on the right
        norm, fired = last_rhs(norm), (*fired, "gold_rhs")
    if not gold_parsed:
        if same_text(gold, norm):
            return Grade("correct", detail_with((*fired, "same_text")))
        if not raw:
            return Grade("error", f"gold {gold[:80]!r} does not parse")
        gold_parsed = raw  # its text only: math-verify compares the strings, as it always did
    parsed = parse_answer(norm)
    if not parsed:
        return Grade("no_answer", detail_with(fired, "math-verify cannot parse the extracted answer"))
    ok = verify(list(gold_parsed), parsed, float_rounding=options.float_rounding,
                numeric_precision=options.numeric_precision, strict=options.strict,
                timeout_seconds=None, raise_on_error=True)
    if not ok and same_text(gold, norm):  # what math-verify could not parse, written the same way
        return Grade("correct", detail_with((*fired, "same_text")))
    return Grade("correct" if ok else "incorrect", detail_with(fired))
