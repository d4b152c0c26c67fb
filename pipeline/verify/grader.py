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
from functools import lru_cache

from pydantic import Field

from pipeline.config import Model
from pipeline.gold import parse_gold
from pipeline.numbers import NUMBER_WORDS, PLAIN, WRITTEN, Bounds, read_number, without_separators, words_value
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


# linear on any text: a whitespace run is entered only at its start; the trailing dollars are stripped, not matched
_PERCENT = re.compile(r"(?<!\s)\s*+\\?%\s*+$")
_LEADING_DOLLARS = re.compile(r"^\s*+\\?\$++\s*+")
# a number and then words: space-separated (the first word of two or more letters, not pi), or a glued unit
_GLUED_UNIT = r"(?:cm|mm|km|kg|mg|lbs?|oz|ft|mph|hrs?|mins?|secs?|ml|cents?|dollars?|units?)\.?"
_UNIT_WORDS = re.compile(rf"^(-?{WRITTEN})(?:\s+(?!pi\b)[A-Za-z]{{2,}}[A-Za-z. ]*|\s*{_GLUED_UNIT})$")
_TEXT = re.compile(r"^\\(?:text|textbf|mathrm)\{(.*)\}$")
_PROSE_WORD = re.compile(r"^[A-Za-z'’]+[,.;:!?]?$")
_CHOICE = re.compile(r"^\(?([A-Ea-e])\)?$")
# a choice letter in parentheses followed by its option's words: "(B) Circle", "\text{(B)} Circle"
_CHOICE_LEAD = re.compile(r"^(?:\\text\{\s*)?\(([A-Ea-e])\)\}?\s+[A-Za-z][A-Za-z .,'-]*$")
# LaTeX text wrappers inside an answer, unwrapped to read an ordinal: "11^{\text{th}}\text{ grade}" -> "11^{th} grade"
_TEXT_ANY = re.compile(r"\\(?:text|textrm|mathrm)\{([^{}]*)\}")
# a clock time, "7:15", "7:15 a.m.", "19:05", "7:15pm"
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})\s*(?:([ap])\.?\s*m\.?)?$", re.I)


# unicode math a model writes that math-verify's LaTeX parser does not read: pi, infinity, the minus sign
_UNICODE_MATH = {"π": "\\pi ", "∞": "\\infty ", "−": "-"}
# a word after a number that makes it no unit but an operation or a comparison: "3 times the radius", "5 more than x"
_NOT_UNIT_WORDS = frozenset(("times", "plus", "minus", "over", "divided", "and", "or", "of", "more", "less", "than",
                             "fewer", "greater", "smaller", "larger", "mod", "if", "when", "where", "for", "is", "are",
                             "equals", "to", "by", "with", "not"))
# words that are math, not units: "12 pi", "5 sqrt 2" stay math
_MATH_WORDS = frozenset(("pi", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "frac", "cdot",
                         "infty", "text", "mathrm"))
_UNIT_WORD = re.compile(r"[A-Za-z]{2,}\.?")
_MATH_MARK = re.compile(r"[\d\\]")  # a digit or a LaTeX command: the head is math, not words ("twenty-one")
_MAX_UNIT_WORDS = 4
_ORDINAL = re.compile(r"^(-?\d+)(?:st|nd|rd|th|\^\{?(?:\\text\{)?(?:st|nd|rd|th)\}?\}?)(?:\s+[A-Za-z][A-Za-z ]*)?$")
_GOLD_WORD = re.compile(r"[A-Za-z]{2,}")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")


def _unit_tail(a: str) -> int:
    """Where trailing unit words start in ``a`` ("12\\pi inches per second" -> 6), or -1: up to
    :data:`_MAX_UNIT_WORDS` words of two or more letters, none an operation or math, after something that ends a
    value (a digit, a symbol such as ``2i`` or ``\\circ``, a closing brace or bracket, a dollar), not after a word."""
    words = a.split(" ")
    k = len(words)
    while k > 0 and len(words) - k < _MAX_UNIT_WORDS and _UNIT_WORD.fullmatch(words[k - 1]) and (
            words[k - 1].lower().rstrip(".") not in _NOT_UNIT_WORDS | _MATH_WORDS | NUMBER_WORDS):
        k -= 1
    if k == len(words) or k == 0 or (k > 0 and _UNIT_WORD.fullmatch(words[k - 1]) and len(words) - k == _MAX_UNIT_WORDS):
        return -1
    head = " ".join(words[:k]).rstrip()
    last = words[k - 1]
    if _UNIT_WORD.fullmatch(last) or not (head[-1:].isalnum() or head[-1:] in "})]$|") or not _MATH_MARK.search(head):
        return -1  # the scan stopped at a word ("5 more apples"), the head ends in an operator or is no math
    return len(head)


def has_words(gold: str) -> bool:
    """Whether a gold holds a word (two or more letters outside LaTeX commands): ``5 \\text{ cm}``, ``\\text{Monday}``."""
    return bool(_GOLD_WORD.search(_LATEX_COMMAND.sub(" ", gold)))


# in a clause after a count, words that make the count part of a computation or a comparison ("four more than")
_COMPUTING = frozenset(("times", "plus", "minus", "over", "divided", "more", "less", "than", "fewer", "greater",
                        "smaller", "larger", "mod", "equals", "equal", "product", "sum", "difference", "quotient",
                        "twice", "half", "percent", "per"))


def _counted_clause(tail: list[str]) -> bool:
    """A clause after a count that says what it counts: plain words only (no digit, no math), the first a noun-like
    word that is no operation ("boxes hold neither pens nor pencils"), none computing with the count."""
    return (_UNIT_WORD.fullmatch(tail[0]) is not None and tail[0].rstrip(".") not in _NOT_UNIT_WORDS | _MATH_WORDS
            and all(_PROSE_WORD.match(w) and w.strip(",.;:!?").lower() not in _COMPUTING | _MATH_WORDS | NUMBER_WORDS
                    for w in tail))


def number_words(a: str) -> str | None:
    """``three boxes`` -> ``3``, ``one hundred and twenty`` -> ``120``: number words, then at most
    :data:`_MAX_UNIT_WORDS` unit words (none an operation: "three times x" is no number), or a longer clause of
    plain words about the count (:func:`_counted_clause`: "four boxes hold neither pens nor pencils"); None
    otherwise."""
    words = a.lower().replace("-", " ").split()
    k = 0
    while k < len(words) and (words[k] in NUMBER_WORDS or (words[k] == "and" and k > 0)):
        k += 1
    while k > 0 and words[k - 1] == "and":
        k -= 1
    tail = words[k:]
    if k == 0:
        return None
    if len(tail) > _MAX_UNIT_WORDS:  # "four boxes hold neither pens nor pencils": a count, then a clause about it
        if not _counted_clause(tail):
            return None
    elif any(not _UNIT_WORD.fullmatch(w) or w.rstrip(".") in _NOT_UNIT_WORDS | _MATH_WORDS for w in tail):
        return None
    value = words_value(words[:k])
    return str(value) if value is not None else None


_WHICH_IS = re.compile(r"(?i),?(?<!\s)\s++which\s++is\s++")


def _last_rhs(a: str) -> str:
    """``4 + 2 + 10 = 24 bars`` -> ``24 bars``; ``..., which is 12`` -> ``12`` (outside braces only)."""
    if "=" not in a and "which" not in a.lower():  # the common case, without the walk
        return a
    parts = _WHICH_IS.split(a)
    a = parts[-1] if len(parts) > 1 and parts[-1].strip() else a
    depth, cut = 0, -1
    for i, ch in enumerate(a):
        depth += {"{": 1, "}": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "=" and depth == 0 and a[i - 1:i] not in ("<", ">", "!") and a[i + 1:i + 2] != "=":
            cut = i
    return a[cut + 1:].strip() if cut >= 0 and a[cut + 1:].strip() else a


def is_equation(text: str) -> bool:
    """A top-level ``=`` (not ``<=``, ``>=``, ``!=``, ``==``) outside braces and brackets."""
    return "=" in text and _last_rhs(text.split(",")[0] if "which" in text.lower() else text) != text


def is_prose(text: str) -> bool:
    """Three or more plain words, two of them of three or more letters: "the number of stickers"; not ``p - q``."""
    words = text.split()
    return (len(words) >= 3 and all(_PROSE_WORD.match(w) for w in words)
            and sum(len(w.strip(",.;:!?")) >= 3 for w in words) >= 2)


def _strip_dollars(a: str) -> str:
    """A leading ``$``/``\\$`` run and a trailing ``$`` run removed, with the whitespace around them."""
    a = _LEADING_DOLLARS.sub("", a, count=1)
    t = a.rstrip()
    if t.endswith("$"):
        return t.rstrip("$").rstrip()
    return a


@lru_cache(maxsize=65536)  # answers repeat across a problem's k samples
def normalize(answer: str, *, keep_equation: bool = False, strip_units: bool = False) -> tuple[str, tuple[str, ...]]:
    """The answer as it is compared, and the policies (:data:`~pipeline.verify.policies.POLICIES`) that shaped it:
    unicode pi, infinity and minus as LaTeX, math delimiters and a currency sign stripped, the last right-hand side
    of an equation kept (unless ``keep_equation``: the gold is an equation), a trailing percent sign and trailing
    unit words dropped (after an expression only with ``strip_units``: the gold has no words)."""
    fired: list[str] = []
    a = answer.strip().rstrip(".").strip()
    if any(c in a for c in _UNICODE_MATH):
        for c, latex in _UNICODE_MATH.items():
            a = a.replace(c, latex)
        a = a.replace(" $", "$").strip()
        fired.append("unicode_math")
    if (a.startswith("\\(") and a.endswith("\\)")) or (a.startswith("\\[") and a.endswith("\\]")):
        a = a[2:-2].strip()
    if strip_units and not _UNIT_WORDS.match(a) and (cut := _unit_tail(a)) > 0:
        a = a[:cut].rstrip()  # "$12\\pi$ inches per second", "12\\pi inches per second": the expression
        fired.append("unit_words")
    b = _strip_dollars(a)
    if b != a and ("\\$" in a or a.count("$") % 2 or not (a.startswith("$") and a.endswith("$"))):
        fired.append("currency")
    a = b
    if not keep_equation:
        b = _last_rhs(a)
        if b != a:
            fired.append("last_rhs")
        a = b
    b = _PERCENT.sub("", a)
    if b != a:
        fired.append("percent_unit")
    a = b
    if m := _UNIT_WORDS.match(a):
        b = without_separators(m.group(1))
        if b != a and a != m.group(1):
            fired.append("unit_words")
        a = b
    return a.strip().rstrip(".").strip(), tuple(fired)


def normalize_answer(answer: str) -> str:
    """The answer as it is compared with a value gold (see :func:`normalize`)."""
    return normalize(answer)[0]


def choice_letter(text: str) -> str | None:
    """``C``, ``(C)``, ``\\text{(C)}`` -> ``C``; anything else -> None."""
    t = text.strip().strip("$").strip()
    if m := _TEXT.match(t):
        t = m.group(1).strip()
    m = _CHOICE.match(t)
    return m.group(1).upper() if m else None


def clock_time(text: str) -> tuple[int, int, str | None] | None:
    """A clock time as (hours, minutes, "a"/"p"/None): ``7:15 \\text{ a.m.}``, ``\\text{7:15 a.m.}``, ``19:05``."""
    t = _TEXT_ANY.sub(r"\1", text.strip().strip("$")).replace("~", " ").strip()
    m = _CLOCK.match(t)
    if m is None or int(m.group(2)) >= 60:
        return None
    return int(m.group(1)), int(m.group(2)), (m.group(3) or "").lower() or None


def clock_verdict(gold: str, answer: str) -> bool | None:
    """Whether two clock times are the same time (None: the gold is no clock time; False: it is and the answer is not).
    With a.m./p.m. on both, or on
    neither, the times compare as written; a 24-hour time equals its 12-hour form (19:15 is 7:15 p.m.); a 12-hour
    time without a.m./p.m. (7:15) equals either half of the day only as a gold, never as the answer to a gold that
    names the half (precision first: the answer left it open)."""
    g, a = clock_time(gold), clock_time(answer)
    if g is None:
        return None
    if a is None:  # a time is asked: any other answer is wrong (math-verify would read 05:00 as a ratio, or fail)
        return False

    def minutes(h: int, m: int, half: str | None) -> int:
        return (h % 12 + (12 if half == "p" else 0)) * 60 + m if half else h * 60 + m

    if bool(g[2]) == bool(a[2]):
        return minutes(*g) == minutes(*a)
    if a[2]:  # the gold names no half: a 24-hour gold, or a 12-hour one that either half answers
        return minutes(*a) == minutes(*g) or (g[0] <= 12 and minutes(*a) % 720 == minutes(*g) % 720)
    return a[0] > 12 and minutes(*a) == minutes(*g)  # only an unambiguous 24-hour answer matches a named half


def bracket_kind(text: str) -> str | None:
    """The outer bracket of an answer: ``set`` (``\\{...\\}``), ``tuple`` (``(...)``/``[...]`` with a comma) or None."""
    t = text.strip().strip("$").strip()
    t = re.sub(r"\\left|\\right", "", t).strip()
    if t.startswith("\\{") and t.endswith("\\}"):
        return "set"
    if t[:1] in "([" and t[-1:] in ")]" and "," in t:
        return "tuple"
    return None


def parse_answer(answer: str) -> list:
    """math-verify's parse of a normalised answer: LaTeX in ``$...$`` first, plain expression as fallback."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    text = answer if "\\boxed" in answer else f"${answer}$"
    parsed = parse(text, extraction_config=[LatexExtractionConfig()], parsing_timeout=None, raise_on_error=True)
    if not parsed:
        parsed = parse(answer, extraction_config=[ExprExtractionConfig()], parsing_timeout=None, raise_on_error=True)
    return parsed


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
    t = _strip_dollars(_LATEX_UNIT.sub("", text.strip()).strip())
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
        elif m := _ORDINAL.match(_TEXT_ANY.sub(r"\1", norm).strip()):
            norm, fired = m.group(1), (*fired, "ordinal")
    if is_prose(norm):
        return Grade("no_answer", detail_with(("prose",), "the extracted answer is prose (no digit, no math)"))
    if (clock := clock_verdict(gold, norm)) is not None:
        return Grade("correct" if clock else "incorrect", detail_with((*fired, "clock_time")))
    gold_choice, ans_choice = choice_letter(gold), choice_letter(norm)
    if gold_choice is not None and ans_choice is None and (m := _CHOICE_LEAD.match(norm.strip().strip("$").strip())):
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
    if not gold_parsed and is_equation(gold) and (rhs := _last_rhs(gold)) != gold and (
            gold_parsed := _expressions(parse_gold(rhs))):
        # "m_{\\max}=n^{2}-n-1": math-verify cannot read the left side; a reader grades the value on the right
        norm, fired = _last_rhs(norm), (*fired, "gold_rhs")
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
