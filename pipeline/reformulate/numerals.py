"""Numbers in question and solution text: find them, compare their values, mask one.

A *standalone* number is a run of digits (thousands separators and a decimal part allowed)
that is not glued to a letter or digit (``5th``, ``x2`` and ``3x`` are not numbers here).
It is *maskable* when it is not part of a compound token either: a fraction ``1/2``, a time
``3:00``, a power ``x^2``, a range ``3-4``::

    >>> [(n.text, n.maskable) for n in find_numbers("Pay $80,000 for 1/2 of 150% at 3:00.")]
    [('80,000', True), ('1', False), ('2', False), ('150', True), ('3', False), ('00', False)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from pipeline.numbers import DIGIT_RUN, STRICT_IN_TEXT, read_number

_GLUE_BEFORE = set("/:^_")
_GLUE_AFTER = set("/:^_")
_X = re.compile(r"(?<![A-Za-z\\])x(?![A-Za-z])")


@dataclass(frozen=True, slots=True)
class Number:
    text: str
    start: int
    end: int
    value: Fraction
    maskable: bool


def to_value(text: str) -> Fraction | None:
    """The numeric value of ``1,000`` / ``3.50`` / ``-2`` / ``.5`` (None when it is not a plain number), exactly."""
    got = read_number(text.replace(",", "").strip(), fractions=False)
    return None if got is None else got.value


def find_numbers(text: str) -> list[Number]:
    """Every standalone number in ``text``, in order."""
    out = []
    for m in STRICT_IN_TEXT.finditer(text):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        after2 = text[m.end() + 1] if m.end() + 1 < len(text) else ""
        glued = (
            before in _GLUE_BEFORE
            or after in _GLUE_AFTER
            or (before == "-" and m.start() >= 2 and text[m.start() - 2].isdigit())  # 3-4: a range
            or (after == "-" and after2.isdigit())
        )
        value = to_value(m.group())
        if value is not None:
            out.append(Number(m.group(), m.start(), m.end(), value, not glued))
    return out


def loose_values(text: str) -> set[Fraction]:
    """Values of every digit run in ``text`` (inside formulas and ``<<48/2=24>>`` too)."""
    values = set()
    for m in DIGIT_RUN.finditer(text):  # what a solution's arithmetic uses
        tok = m.group().rstrip(",")
        if (v := to_value(tok)) is not None:
            values.add(v)
    return values


def has_variable_x(text: str) -> bool:
    """True when ``text`` already uses a standalone ``x`` (``$x$``, ``2 x 3``), which masking would collide with."""
    return bool(_X.search(text))


def count_x(text: str) -> int:
    return len(_X.findall(text))


def gold_text(number: Number) -> str:
    """The masked number as a gold: ``1,000`` -> ``1000``, ``.5`` -> ``0.5``."""
    text = number.text.replace(",", "")
    return "0" + text if text.startswith(".") else text


def mask(text: str, number: Number, symbol: str = "x") -> str:
    return text[: number.start] + symbol + text[number.end:]


def substitute_x(text: str, replacement: str) -> str:
    return _X.sub(replacement, text)
