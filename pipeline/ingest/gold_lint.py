"""Gold lint: defects of a gold answer that a reader would see, each a named, registered check.

A check is one function ``(gold, question) -> evidence | None`` registered with :func:`check`; its name is the
defect's name in the ``problems`` table's ``gold_issues``, its docstring's first line the defect's description
(docs/stages.md), and ``unusable`` says whether the defect makes the gold unusable (the row is then a
``garbled_gold`` reject; the other defects are recorded and the problem kept). One real MATH case::

    >>> [f.name for f in lint_gold("2, 8", question="Find the minimum and maximum values of f, in that order.")]
    ['order_as_set']

Every check is linear in the gold's and the question's length (no regex that backtracks), and none but
``unparseable`` calls math-verify (that one through :func:`pipeline.verify.gold_check.gold_parses`, bounded).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from pipeline import numbers
from pipeline.verify.answer_text import is_equation, last_rhs
from pipeline.verify.gold_check import gold_parses

__all__ = ["CHECKS", "Finding", "GoldCheck", "check", "lint_gold", "unusable"]


@dataclass(frozen=True)
class GoldCheck:
    """One registered lint rule."""

    name: str
    fn: Callable[[str, str], str | None]
    unusable: bool

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]


@dataclass(frozen=True)
class Finding:
    """A defect found: the check's name and what in the gold (or question) shows it."""

    name: str
    evidence: str


CHECKS: dict[str, GoldCheck] = {}


def check(*, unusable: bool) -> Callable[[Callable[[str, str], str | None]], Callable[[str, str], str | None]]:
    """Register ``fn`` under its own name (``unusable``: the defect makes the gold a reject)."""

    def add(fn: Callable[[str, str], str | None]) -> Callable[[str, str], str | None]:
        if fn.__name__ in CHECKS:
            raise ValueError(f"gold lint check {fn.__name__!r} registered twice")
        CHECKS[fn.__name__] = GoldCheck(fn.__name__, fn, unusable)
        return fn

    return add


def lint_gold(gold: str, *, question: str = "") -> list[Finding]:
    """Every registered check's finding on ``gold`` (in registry order); empty when the gold is clean."""
    out = []
    for c in CHECKS.values():
        if (evidence := c.fn(gold, question)) is not None:
            out.append(Finding(c.name, evidence[:120]))
    return out


def unusable(findings: list[Finding]) -> list[Finding]:
    """The findings whose defect makes the gold unusable."""
    return [f for f in findings if CHECKS[f.name].unusable]


# --- the text around a gold -------------------------------------------------------------------------------------

_ESCAPED = re.compile(r"\\[{}]")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mbox|mathrm|operatorname)\s*\{([^{}]*)\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")


def _top_level_parts(gold: str) -> list[str]:
    """The gold split at commas outside every bracket and brace (``(1,2), 3`` -> 2 parts)."""
    parts, depth, start = [], 0, 0
    text = _ESCAPED.sub("  ", gold)  # same length: \{ \} count as no brace here
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(gold[start:i].strip())
            start = i + 1
    parts.append(gold[start:].strip())
    return parts


_THOUSANDS = re.compile("-?" + numbers.GROUPED + numbers.DECIMAL)


def _unwrapped(gold: str) -> tuple[str, str] | None:
    """``(opening, inside)`` when one bracket pair (``( )``, ``\\left( \\right)``, ``[ ]``, ``\\{ \\}``) wraps the
    whole gold, else None."""
    g = gold.strip().strip("$").strip()
    g = re.sub(r"\\(?:left|right|big|Big|bigl|bigr)\b\s*", "", g)
    for o, c in (("(", ")"), ("[", "]"), ("\\{", "\\}")):
        if g.startswith(o) and g.endswith(c) and len(g) > len(o) + len(c):
            inside = g[len(o):-len(c)]
            if _balanced_inside(inside):
                return o, inside
    return None


def _balanced_inside(text: str) -> bool:
    depth = 0
    for ch in _ESCAPED.sub("  ", text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _is_list(gold: str) -> bool:
    """A bare list of several parts (``2, 8``), not a thousands-separated number."""
    g = gold.strip().strip("$").strip()
    return not _THOUSANDS.fullmatch(g) and len(_top_level_parts(g)) > 1


def _number(text: str) -> Fraction | None:
    """A number (:func:`~pipeline.numbers.read_number`: ``1,200``, ``-3.5``, ``3/4``, ``-\\frac{a}{b}``) as a
    Fraction, dollar signs and spaces around it dropped; None for anything else."""
    got = numbers.read_number(re.sub(r"\s+", "", text.strip().strip("$")))
    return None if got is None else got.value


# --- the checks -------------------------------------------------------------------------------------------------

_EMPTY_ARG = re.compile(r"(\\[A-Za-z]+\*?|[\^_]|\})\s*\{\s*\}")
_HARMLESS = {"\\text", "\\mbox", "\\textbf", "\\mathrm", "\\,", "\\quad"}


@check(unusable=True)
def empty_braces(gold: str, question: str) -> str | None:
    """An empty argument where LaTeX needs one (``\\frac{}{2k}``, ``\\sqrt{}``, ``x^{}``): text lost from the gold."""
    for m in _EMPTY_ARG.finditer(_ESCAPED.sub("  ", gold)):
        if m.group(1) not in _HARMLESS:
            return gold[max(0, m.start() - 10):m.end() + 10]
    return None


@check(unusable=True)
def unbalanced_delimiters(gold: str, question: str) -> str | None:
    """Braces, ``\\{ \\}`` or brackets that do not pair up (``(1, 2``, ``\\frac{1}{2``); ``[0, 1)`` is an interval."""
    sets = len(re.findall(r"\\\{", gold)) - len(re.findall(r"\\\}", gold))
    if sets:
        return f"\\{{ and \\}} differ by {sets}"
    braces = brackets = 0
    for ch in _ESCAPED.sub("  ", re.sub(r"\\(?:left|right)\s*\.", "", gold)):
        braces += (ch == "{") - (ch == "}")
        brackets += (ch in "([") - (ch in ")]")
        if braces < 0 or brackets < 0:
            return f"a closing {'brace' if braces < 0 else 'bracket'} with none open"
    if braces or brackets:
        return f"{braces or brackets} {'brace' if braces else 'bracket'}(s) never closed"
    return None


@lru_cache(maxsize=4096)
def _parses(gold: str) -> bool:
    """:func:`~pipeline.verify.gold_check.gold_parses`, once per gold (two checks ask); raises GoldBudgetSpent."""
    return gold_parses(gold)


def _rhs(gold: str) -> str | None:
    """The right-hand side of a gold equation (``m_{\\max}=n^{2}-n-1`` -> ``n^{2}-n-1``), None for no equation."""
    rhs = last_rhs(gold)
    return rhs if is_equation(gold) and rhs != gold else None


@check(unusable=True)
def unparseable(gold: str, question: str) -> str | None:
    """math-verify cannot turn the gold into an expression, and no other route of the verifier reads it (bounded: the
    verify pool's limits; once the ingest's gold budget is spent the row is an ungradable_gold reject that says so)."""
    if _parses(gold) or ((rhs := _rhs(gold)) is not None and _parses(rhs)):
        return None
    return gold[:80]


@check(unusable=False)
def unparsed_left_side(gold: str, question: str) -> str | None:
    """math-verify cannot read the gold equation's left side (``m_{\\max}=n^{2}-n-1``); it is graded on the right."""
    if _parses(gold) or (rhs := _rhs(gold)) is None or not _parses(rhs):
        return None
    return gold[:80]


# letters or words lost from a gold: "=3,=-1+\sqrt{5}" (x stripped), "g(x)=+c" (a term stripped), "(x)=x^2" (a name)
_STRIPPED = re.compile(r"(?:^|,)\s*=|=\s*[+,]|^\s*\(\s*[a-z]?\s*\)\s*=|^\s*[\^_]"
                       # a polynomial with its variable lost: powers of bare numbers added up ("-3^2+9-11")
                       r"|^-?\d+\^\{?\d+\}?(?:\s*[+-]\s*\d+(?:\^\{?\d+\}?)?){2,}\s*$"
                       # an operator with an operand lost: "9(2-)(2+)", "19(^2+4)", "[+,]"
                       r"|\(\s*\)|[+\-*/^=]\s*[)\]},]|[(\[,]\s*[*/^=]|[(\[]\s*[+,]|[+*/^=]\s*$|[+\-*/]\s*\^")
_RUN = re.compile(r"(?<![\\A-Za-z])[a-z]{12,}")  # "wherecisaninteger": a phrase whose spaces were lost
_GLUE = ("where", "integer", "constant", "number", "real", "and", "the", "for", "with", "any", "some", "such")


@check(unusable=True)
def stripped_letters(gold: str, question: str) -> str | None:
    """Letters lost from the gold: an equation with no left side (``=3,=-1+\\sqrt{5}``), a sign with no term (``=+c``),
    a function with no name (``(x)=x^2``), a power with no base (``^2+5``), a polynomial with no variable
    (``-3^2+9-11``), words run together (``wherecisaninteger``)."""
    text = _TEXT_CMD.sub(lambda m: " " + m.group(1).replace(" ", "_") + " ", gold)
    m = _STRIPPED.search(text) or next((r for r in _RUN.finditer(text)
                                         if sum(w in r.group() for w in _GLUE) >= 2), None)
    return gold[max(0, m.start() - 10):m.end() + 10] if m else None


@check(unusable=True)
def cut_short(gold: str, question: str) -> str | None:
    """The gold ends in two dots (``7:15a..``): it was cut short where it was copied."""
    return gold[-20:] if re.search(r"(?<!\.)\.\.\s*$", gold) else None


_FUNCTION_WORDS = frozenset(("a", "an", "the", "is", "are", "was", "were", "be", "so", "therefore", "thus", "it",
                            "there", "this", "that", "of", "has", "have", "answer", "which", "when", "if", "then",
                            "because"))


@check(unusable=False)
def sentence(gold: str, question: str) -> str | None:
    """The gold is prose (``The answer is 5 apples``), not an answer: what math-verify reads from it is a guess."""
    text = _TEXT_CMD.sub(r" \1 ", gold)
    words = [w.lower() for w in re.findall(r"[A-Za-z]{2,}", _COMMAND.sub(" ", text))]
    if len(words) >= 5 or (len(words) >= 3 and _FUNCTION_WORDS.intersection(words)):
        return " ".join(words[:8])
    return None


_ORDER_FIXED = re.compile(
    r"(?i)ordered (?:pair|triple|quadruple|tuple|list)|(?<!necessarily )in (?:that|this|the same|the given) order"
    r"|respectively|in (?:increasing|decreasing|ascending|descending) order|in the form \$?\\?(?:left)?\(")
_SET_ASKED = re.compile(r"(?i)separated by commas|separate (?:your|the) answers (?:with|using) commas")
# a sentence that tells how to write the answer: only there does an order phrase speak of the answer's parts
_DIRECTIVE = re.compile(r"(?i)\b(?:enter|answer|express|list|write(?!ten)|give|separate)")  # "written": a description


def _directives(question: str) -> str:
    """The question's sentences that say how to write the answer."""
    return " ".join(s for s in re.split(r"(?<=[.?!])\s+", question) if _DIRECTIVE.search(s))
_LOW = r"(?:minimum|smallest|least|lowest|min)"
_HIGH = r"(?:maximum|largest|greatest|highest|max)"
_EXTREMES = re.compile(rf"(?i)\b({_LOW}|{_HIGH})\b(?: possible)?(?: value)?s? (?:and|,) (?:the )?(?:{_LOW}|{_HIGH})\b")


@check(unusable=False)
def order_as_set(gold: str, question: str) -> str | None:
    """The question fixes the parts' order, the gold is a bare list (``2, 8``): math-verify compares it as a set."""
    if not _is_list(gold):
        return None
    m = _ORDER_FIXED.search(_directives(question)) or _EXTREMES.search(question)
    return m.group(0) if m else None


@check(unusable=False)
def tuple_as_set(gold: str, question: str) -> str | None:
    """The question asks for a set (``separated by commas``), the gold is a tuple: a reordered answer fails."""
    wrapped = _unwrapped(gold)
    if wrapped is None or wrapped[0] != "(" or len(_top_level_parts(wrapped[1])) < 2:
        return None
    if "\\infty" in gold or re.search(r"(?i)interval|ordered|in the form|coordinates|point", question):
        return None
    m = _SET_ASKED.search(question)
    return m.group(0) if m else None


@check(unusable=False)
def order_reversed(gold: str, question: str) -> str | None:
    """The question asks for a smallest and a largest value in one order, the gold's two numbers are the other."""
    m = _EXTREMES.search(question)
    if m is None:
        return None
    wrapped = _unwrapped(gold)
    inside = wrapped[1] if wrapped and wrapped[0] == "(" else gold
    parts = _top_level_parts(inside) if _is_list(inside) else []
    if len(parts) != 2 or None in (values := [_number(p) for p in parts]):
        return None
    low_first = re.fullmatch(_LOW, m.group(1), flags=re.IGNORECASE) is not None
    if values[0] != values[1] and (values[0] < values[1]) != low_first:
        return f"{m.group(0)!r}, gold {gold.strip()[:40]!r}"
    return None
