"""Gold answers: extraction from the sources' own formats, and the one way they are parsed.

Ingest rejects a gold that :func:`parse_gold` cannot parse (a reward of 1.0 for an
unparseable gold is a known failure of other pipelines); verify compares completions
against the same parse.

Bounded on any text: extraction (:func:`gsm8k_gold`, :func:`boxed_gold`) is linear, and the
checks that call math-verify from the caller's process (:func:`pipeline.verify.gold_check.gold_parses`,
:func:`~pipeline.verify.gold_check.golds_equivalent`: ingest, the reformulators) run in the verify worker
pool under its CPU-time and memory bounds (``verify.timeout_s``/``memory_mb`` defaults); a gold longer than
:data:`MAX_GOLD_CHARS` is not parsed at all. A gold whose parse runs past the bound does not parse.

    >>> gsm8k_gold("3 + 4 = 7\\n#### 1,007")
    '1007'
    >>> boxed_gold("so $x = \\\\boxed{\\\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
"""

from __future__ import annotations

import logging
import math
import re
from decimal import Decimal
from functools import lru_cache

from pipeline.numbers import LATEX_SEPARATOR, SEPARATED_WHOLE, WHOLE_PLAIN, without_separators


class GoldError(ValueError):
    """The gold answer could not be extracted; the message is the reject detail."""


def gsm8k_gold(answer_text: str) -> str:
    """Text after the last ``#### ``, thousands separators removed."""
    if "####" not in answer_text:
        raise GoldError("no '####' marker in the answer")
    gold = answer_text.rsplit("####", 1)[1].strip()
    gold = without_separators(gold).replace("$", "").strip()
    if not gold:
        raise GoldError("empty text after '####'")
    return gold


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (brace-matched) or ``\\boxed 2``.

    Returns None when there is none; raises :class:`GoldError` when the last one never closes.
    """
    starts = [m for m in re.finditer(r"\\(?:boxed|fbox)\s*(\{|\s(?=[^\s{]))", text)]
    if not starts:
        return None
    m = starts[-1]
    if m.group(1) != "{":
        # \boxed 2 : the next token up to whitespace, '$' or end
        rest = text[m.end():]
        tok = re.match(r"[^\s$]+", rest)
        return tok.group(0).rstrip(".,") if tok else None
    depth, i = 1, m.end()
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[m.end():i].strip()
        i += 1
    raise GoldError("\\boxed{ without a closing brace")


def _tidy(gold: str) -> str:
    """Drop what typesetting adds and graders trip on: thin spaces (``\\!``) and trailing punctuation."""
    gold = re.sub(r"(?<=\d),\\!(?=\d{3})", "", gold)  # MATH's 29,\!322 thousands separator
    return gold.replace("\\!", "").strip().rstrip(".,;").strip()


def boxed_gold(solution: str) -> str:
    gold = last_boxed(solution)
    if gold is None:
        raise GoldError("no \\boxed{...} or \\fbox{...} in the solution")
    gold = _tidy(gold)
    if not gold:
        raise GoldError("empty \\boxed{}")
    return gold


def normalize_gold(gold: str) -> str:
    """Canonical string used to compare golds of duplicate questions: thousands separators (``,``, ``,\\!``,
    ``{,}``, ``, `` between digit groups of three) never make two golds differ."""
    g = gold.strip().strip("$").strip()
    if SEPARATED_WHOLE.match(g):  # 11,111, 11,\!111, 11{,}111, 11, 111 (digit groups of three)
        g = LATEX_SEPARATOR.sub("", g)
    g = without_separators(g)
    return re.sub(r"\s+", "", g)


def json_gold(value: object) -> str:
    """A gold given as an ordinary JSON value, as a gold string (:class:`TypeError` for any other value).

    A string as it is; a number its canonical string (``2.0`` -> ``2``, ``1e-05`` -> ``0.00001``); a
    boolean a text answer (``\\text{True}``); a list of numbers and strings a tuple answer (``[1, 2]`` ->
    ``(1, 2)``; a one-element list is its element).
        >>> json_gold([1, 2.5]), json_gold(True), json_gold(3.0)
        ('(1, 2.5)', '\\\\text{True}', '3')
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return f"\\text{{{value}}}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"the number {value} is not a finite value")
        text = format(Decimal(repr(value)).normalize(), "f")
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, list) and value and all(isinstance(v, int | float | str) and not isinstance(v, bool)
                                                  for v in value):
        parts = [json_gold(v).strip() for v in value]
        return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    what = "an empty list" if value == [] else ("a nested list" if isinstance(value, list) else type(value).__name__)
    raise TypeError(f"answer is {what}, expected a string, a number, a boolean or a list of numbers")


def is_plain_number(gold: str) -> bool:
    return bool(WHOLE_PLAIN.match(gold))


MAX_GOLD_CHARS = 1000  # longer golds do not parse: no GSM8K or MATH gold comes near it


@lru_cache(maxsize=65536)
def parse_gold(gold: str) -> tuple:
    """math-verify's parse of a gold answer (empty when it cannot be parsed). Unbounded: called inside verify
    workers (the pool's CPU-time kill bounds it); elsewhere use :mod:`pipeline.verify.gold_check`."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" notice, per call

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    text = gold if "\\boxed" in gold else f"${gold}$"
    parsed = parse(text, extraction_config=configs, parsing_timeout=None)
    if not parsed:
        parsed = parse(gold, extraction_config=configs, parsing_timeout=None)
    return tuple(parsed)
