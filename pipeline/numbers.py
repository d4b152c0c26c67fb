"""One number grammar: how passband reads a number written in text, as named variants of the same pieces.

A number is digits with an optional decimal part; what varies is how separators, signs and the text
around it are read, and each variant says which reading it is::

    >>> [m.group() for m in IN_TEXT.finditer("Ann had 1,200 apples, then -3.5 (v2)")]
    ['1,200', '-3.5']
    >>> [m.group() for m in PLAIN_IN_TEXT.finditer(without_separators("1,200 and 12,34"))]
    ['1200', '12', '34']
    >>> [m.group() for m in STRICT_IN_TEXT.finditer("1,200 in v2, and .5")]
    ['1,200', '.5']

The pieces (pattern strings, for the bigger patterns built from them) are :data:`WRITTEN` (digits and any
commas as a model or a solution writes them: ``1,200``, also ``12,34``), :data:`STRICT` (commas only
between groups of three) and :data:`PLAIN` (no separators: the form after :func:`without_separators`).
:data:`NOT_INSIDE` and :data:`NOT_CONTINUED` keep a match from starting or ending inside a word or
another number. Callers: the gold checks (pipeline/gold.py), the extractors and the grader
(pipeline/verify), the flag detectors (pipeline/annotate) and the reformulators' numerals. One number written
alone is read by :func:`read_number` (exact, a Fraction), under :class:`Bounds` its caller chooses (the grader's fast
path keeps to math-verify's precision); the expression tokenizer of pipeline/arith/evaluate.py reads the same grammar.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

DECIMAL = r"(?:\.\d+)?"  # an optional decimal part
WRITTEN = r"\d[\d,]*" + DECIMAL  # digits and any commas, as written: 1,200 (and 12,34)
GROUPED = r"\d{1,3}(?:,\d{3})+"  # a whole number with commas between groups of three: 1,200
STRICT = r"(?:" + GROUPED + r"|\d+)" + DECIMAL  # commas only between groups of three: 1,200 or 1200
PLAIN = r"\d+" + DECIMAL  # no separators
NOT_INSIDE = r"(?<![\w.])"  # not the tail of a word, a name or a decimal
NOT_CONTINUED = r"(?![\w]|[.,]\d)"  # not followed by a letter, or by more digits after a period or comma

# a thousands separator: a comma after a digit and before exactly three digits
THOUSANDS_SEPARATOR = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# a signed number as written, standing alone in text (the flag detectors' reading of a question)
IN_TEXT = re.compile(NOT_INSIDE + "-?" + WRITTEN)
# a signed number without separators, standing alone (arithmetic read after without_separators)
PLAIN_IN_TEXT = re.compile(NOT_INSIDE + "-?" + PLAIN)
# a signed number as written anywhere, or a bare decimal such as .5 (the lenient last_number extractor)
ANYWHERE = re.compile("-?" + WRITTEN + r"|-?\.\d+")
# an unsigned digit run as written, anywhere (inside formulas and <<48/2=24>> annotations too)
DIGIT_RUN = re.compile(WRITTEN)
# an unsigned number with strict separators (or a bare decimal), standing alone and not continued
STRICT_IN_TEXT = re.compile(NOT_INSIDE + r"(?:" + STRICT + r"|\.\d+)" + NOT_CONTINUED)
# the whole text one signed plain number (a gold that is a plain number)
WHOLE_PLAIN = re.compile("^-?" + PLAIN + "$")
# a thousands separator as LaTeX writes it too: 11,\\!111, 11{,}111 (and a plain comma)
LATEX_SEPARATOR = re.compile(r",\\!|\{,\}|,")
# the whole text one signed number with separators between groups of three (LaTeX's included, a space after one)
SEPARATED_WHOLE = re.compile(r"^-?\d{1,3}(?:(?:" + LATEX_SEPARATOR.pattern + r")\s*\d{3})+" + DECIMAL + "$")
# IN_TEXT for DuckDB's regexp functions (RE2: no look-behind, so without NOT_INSIDE)
IN_TEXT_SQL = "-?" + WRITTEN.replace(r"[\d,]", "[0-9,]").replace(r"\d", "[0-9]").replace(r"\.", "[.]")




class Reading(NamedTuple):
    """A number read exactly: its value, and whether it was written with a decimal point (math-verify compares
    those at its float precision)."""

    value: Fraction
    decimal: bool


class Bounds(NamedTuple):
    """How long a number :func:`read_number` reads may be; a longer one is not read (None). The defaults guard the
    parser; a caller that must agree with math-verify keeps to its precision (the grader's fast path)."""

    whole_digits: int = 1000  # a number without a decimal point (its separators removed)
    decimal_digits: int = 1000  # each side of a decimal point
    significant: int = 2000  # a decimal's digits, leading zeros not counted
    fraction_digits: int = 1000  # a fraction's numerator and denominator, each


_READ_DECIMAL = re.compile(r"(-?)(" + GROUPED + r"|\d+)?(?:\.(\d+))?")
_READ_FRACTION = re.compile(r"(-?)(?:(\d+)/(\d+)|\\[dt]?frac\{(\d+)\}\{(\d+)\})")


def read_number(text: str, *, bounds: Bounds = Bounds(), fractions: bool = True,
                bare_decimal: bool = True) -> Reading | None:
    """``text`` as one number, exactly, or None: an optional minus, digits (commas only between groups of three), an
    optional decimal part (``.5`` alone with ``bare_decimal``); with ``fractions`` also ``a/b`` and ``\\frac{a}{b}``
    (``\\dfrac``, ``\\tfrac``). Nothing around it: each caller cleans its text its own way first (a currency sign,
    a trailing period, spaces). A zero denominator, or a number past ``bounds``, is None.

        >>> read_number("1,200"), read_number("-3.50").value, read_number("\\\\frac{3}{4}").value, read_number("12,34")
        (Reading(value=Fraction(1200, 1), decimal=False), Fraction(-7, 2), Fraction(3, 4), None)

    The one number reader of passband: the grader's fast path, the gold lint, the flags' arithmetic and the
    reformulators' numerals all read numbers through it."""
    if m := _READ_DECIMAL.fullmatch(text):
        sign, whole, frac = m.groups()
        if whole is None and (frac is None or not bare_decimal):
            return None
        whole = (whole or "").replace(",", "")
        if frac is None:
            return None if len(whole) > bounds.whole_digits else Reading(Fraction(int(sign + whole)), False)
        if max(len(whole), len(frac)) > bounds.decimal_digits or len((whole + frac).lstrip("0")) > bounds.significant:
            return None
        return Reading(Fraction(f"{sign}{whole or 0}.{frac}"), True)
    if fractions and (m := _READ_FRACTION.fullmatch(text)):
        sign, *parts = m.groups()
        num, den = parts[:2] if parts[0] is not None else parts[2:]
        if max(len(num), len(den)) > bounds.fraction_digits or not den.strip("0"):
            return None
        return Reading(Fraction(int(num), int(den)) * (-1 if sign else 1), False)
    return None


# Number words (English, up to the millions): "three", "twenty-five", "one hundred and twenty", "two thousand".
# A closed vocabulary, so a table, not a library: none of the small word-to-number packages is installed here.
_ONES = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"))}
_TENS = {w: 10 * i for i, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"),
                                         start=2)}
_SCALES = {"thousand": 1000, "million": 1_000_000}
NUMBER_WORDS = frozenset((*_ONES, *_TENS, "hundred", *_SCALES))


def words_value(words: list[str]) -> int | None:
    """The value of a run of number words (lower case, hyphens split, "and" allowed after "hundred" or a scale):
    ``["three", "hundred", "and", "twenty", "five"]`` -> 325; None when the words are no well-formed number
    ("twenty twenty", "hundred" alone, "and five")."""
    total, group, last = 0, 0, None  # last: the kind of the previous word (ones, tens, hundred, scale, and)
    for w in words:
        if w == "and":
            if last not in ("hundred", "scale"):
                return None
            last = "and"
        elif w in _ONES:
            if last in ("ones",) or (last == "tens" and _ONES[w] >= 10) or (last == "tens" and _ONES[w] == 0):
                return None
            group += _ONES[w]
            last = "ones"
        elif w in _TENS:
            if last in ("ones", "tens") or (group % 100 and last != "and" and last != "hundred"):
                return None
            group += _TENS[w]
            last = "tens"
        elif w == "hundred":
            if last != "ones" or not 0 < group % 100 < 10 or group >= 100:
                return None
            group *= 100
            last = "hundred"
        elif w in _SCALES:
            if last not in ("ones", "tens", "hundred") or group == 0 or (total and total < _SCALES[w] * 1000):
                return None
            total += group * _SCALES[w]
            group, last = 0, "scale"
        else:
            return None
    return total + group if last not in (None, "and") else None


def without_separators(text: str) -> str:
    """``text`` with its thousands separators removed: ``1,200,000`` -> ``1200000`` (``12,34`` is kept)."""
    return THOUSANDS_SEPARATOR.sub("", text)


__all__ = [
    "ANYWHERE",
    "DECIMAL",
    "DIGIT_RUN",
    "IN_TEXT",
    "IN_TEXT_SQL",
    "LATEX_SEPARATOR",
    "NOT_CONTINUED",
    "NOT_INSIDE",
    "NUMBER_WORDS",
    "PLAIN",
    "PLAIN_IN_TEXT",
    "SEPARATED_WHOLE",
    "STRICT",
    "STRICT_IN_TEXT",
    "THOUSANDS_SEPARATOR",
    "WHOLE_PLAIN",
    "WRITTEN",
    "Bounds",
    "Reading",
    "read_number",
    "without_separators",
    "words_value",
]
