"""``hint_prefix`` (as in QuestA): the question plus the first part of the reference solution, as a ladder.

The solution is cut into steps (lines, and sentences outside math); a bare one-operation
step on a multi-digit number (the synthetic set's ``52 - 27 = 25.``) is first expanded into
place-value steps (``52 - 27 = 52 - 20 - 7. 52 - 20 = 32. 32 - 7 = 25.``), so a one-step
solution still has a beginning to give. Each of ``fractions`` (default 0.25, 0.5, 0.75) is a
rung: the first share of the steps (at least one, never all) becomes the hint, the gold stays
the parent's. The ladder (:mod:`pipeline.reformulate.ladder`) measures the rungs smallest first
and keeps the smallest that lands in the target band; a longer hint only helps more, so a rung
already too easy ends it (``monotone``). GSM8K's calculator annotations ``<<48/2=24>>`` and its
``#### 72`` line are dropped first. GSM8K train item 1::

    Natalia sold clips to 48 of her friends in April, and then she sold half as many clips
    in May. How many clips did Natalia sell altogether in April and May?
    Hint (the beginning of a solution): Natalia sold 48/2 = 24 clips in May.      -> 72

QuestA's own script never checked that the hint does not already give the answer away; this
one does, and skips the rung (``hint_leaks_answer``) when the hint holds a ``\\boxed{}``, when
it states a number with the answer's value (sign ignored; an operand of an expression such as
the ``2`` of ``x+2`` is not a statement of its value; with ``exact_leak_check``, neither is a
number the question itself gives that the hint only mentions, not as the result of ``=`` or
``is``: "she bought 5 shorts" when the answer is 5), when it contains the answer's text, or when
one side of a relation in one of its formulas is equal to the answer according to math-verify
and is about as short as the answer (a longer side is an unevaluated expression, work still to
do; a restatement of the question is not a leak).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, field_validator

from pipeline.arith import expand
from pipeline.config import Model
from pipeline.gold import is_plain_number
from pipeline.reformulate.numerals import find_numbers, to_value
from pipeline.reformulate.registry import Child, Outcome, Parent, Reformulator, Rung, register
from pipeline.verify.gold_check import golds_equivalent

TEMPLATE = "{question}\nHint (the beginning of a solution): {hint}"

_CALC = re.compile(r"<<[^<>]*>>")
_GSM8K_FINAL = re.compile(r"\n?####.*$", re.S)
_BOXED = re.compile(r"\\(?:boxed|fbox)\b")
_MATH_SEGMENT = re.compile(
    r"\$\$(.+?)\$\$|\$(.+?)\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\\begin\{(\w+\*?)\}(.+?)\\end\{\5\}", re.S
)
_RELATION = re.compile(
    r"=|<|>|\\le(?:q)?\b|\\ge(?:q)?\b|\\approx|\\Rightarrow|\\implies|\\to\b|&|\\\\|\\quad|\\text\{[^}]*\}|,\s"
)
_LATEX_NOISE = re.compile(r"\\[,;!: ]|\\left|\\right|\\displaystyle|\s+|\$")
_COMMAND = re.compile(r"\\text\{[^}]*\}|\\[A-Za-z]+")
MAX_PIECES = 200
SLACK = 4  # characters a formula part may exceed the answer by and still count as "the answer"


class HintPrefixOptions(Model):
    fractions: list[float] = Field(
        default_factory=lambda: [0.25, 0.5, 0.75], min_length=1,
        description="the ladder's rungs: shares of the solution's steps given as the hint, measured smallest first",
    )
    expand_arithmetic: bool = Field(
        True, description="a bare one-operation step on a multi-digit number becomes place-value steps first",
    )
    exact_leak_check: bool = Field(
        True, description="a hint number equal to the answer that only restates a given of the question is no leak",
    )

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        if any(not 0 < f < 1 for f in v) or v != sorted(set(v)):
            raise ValueError(f"fractions must be increasing, distinct and inside (0, 1), got {v}")
        return v


def clean_solution(solution: str) -> str:
    """Drop GSM8K's calculator annotations and final ``####`` line."""
    return _GSM8K_FINAL.sub("", _CALC.sub("", solution)).strip()


def steps(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of the steps of ``text``: cut at newlines and sentence ends outside math."""
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    start, i, n = 0, 0, len(text)

    def cut(end: int) -> None:
        nonlocal start
        if text[start:end].strip():
            spans.append((start, end))
        start = end

    while i < n:
        c = text[i]
        if text.startswith("\\begin{", i):
            stack.append("env")
            i += 7
        elif text.startswith("\\end{", i):
            if stack and stack[-1] == "env":
                stack.pop()
            i += 5
        elif text.startswith("\\[", i) or text.startswith("\\(", i):
            stack.append(text[i:i + 2])
            i += 2
        elif text.startswith("\\]", i) or text.startswith("\\)", i):
            if stack and stack[-1] in ("\\[", "\\("):
                stack.pop()
            i += 2
        elif c == "\\":
            i += 2
        elif text.startswith("$$", i):
            if stack and stack[-1] == "$$":
                stack.pop()
            else:
                stack.append("$$")
            i += 2
        elif c == "$":
            if stack and stack[-1] == "$":
                stack.pop()
            else:
                stack.append("$")
            i += 1
        elif (not stack and c == "\n") or (not stack and c in ".!?" and i + 1 < n and text[i + 1] in " \n\t"):
            cut(i + 1)
            i += 1
        else:
            i += 1
    cut(n)
    return spans


def _squash(text: str) -> str:
    return _LATEX_NOISE.sub("", text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def _letters(text: str) -> frozenset[str]:
    """The variable letters of a formula (LaTeX commands, \\text{} and units removed)."""
    return frozenset(re.findall(r"[A-Za-z]", _COMMAND.sub("", text)))


_OP_BEFORE = re.compile(r"(?:[+*/^(\[{]|\\cdot|\\times|\\div|[\w)}\]]\s*-)\s*$")
_OP_AFTER = re.compile(r"^\s*(?:[-+*/^)\]}]|\\cdot|\\times|\\div)")


def is_operand(text: str, start: int, end: int) -> bool:
    """True when the number at ``text[start:end]`` is an operand (``x+2``, ``2 \\cdot 3``), not a stated value.

    A leading minus after ``=`` or at the start is a sign, not an operator (``= -4`` states -4).
    """
    return bool(_OP_BEFORE.search(text[max(0, start - 12):start]) or _OP_AFTER.match(text[end:end + 12]))


_RESULT_WORDS = "is|are|was|were|equals|gives|yields|becomes|makes|get|gets|got|total|totals|left"
_RESULT_BEFORE = re.compile(rf"(?:=|\\approx|\b(?:{_RESULT_WORDS})\s*:?)\s*[$\\(]*\s*-?$", re.I)


def is_result(text: str, start: int) -> bool:
    """True when the number at ``text[start:]`` is the result of something (``= 24``, ``is 24``), not a mention."""
    return bool(_RESULT_BEFORE.search(text[max(0, start - 16):start]))


def find_leak(hint: str, answer: str, *, question: str = "", exact: bool = True) -> str | None:
    """Why ``hint`` gives ``answer`` away, or None when it does not.

    ``exact`` reads a number equal to the answer that the question itself states, and that the
    hint only mentions (not as the result of ``=`` or ``is``), as a restated given, not a leak;
    ``exact=False`` (the conservative reading) rejects every stated number equal to the answer.
    """
    if _BOXED.search(hint):
        return "the hint holds a \\boxed{}"
    plain = answer.replace(",", "").strip()
    if is_plain_number(plain):
        value = to_value(plain)
        given = {abs(n.value) for n in find_numbers(question)} if exact else set()
        for n in find_numbers(hint):
            if value is not None and abs(n.value) == abs(value) and not is_operand(hint, n.start, n.end):
                if abs(value) in given and not is_result(hint, n.start):
                    continue  # a restated given of the question ("she had 24 clips"), not the answer
                return f"the hint states the number {n.text} at offset {n.start}"
    else:
        squashed = _squash(answer)
        if len(squashed) >= 2 and squashed in _squash(hint):
            return f"the hint contains the answer text {answer!r}"
    pieces: list[str] = []
    for m in _MATH_SEGMENT.finditer(hint):
        body = next(g for g in (m.group(1), m.group(2), m.group(3), m.group(4), m.group(6)) if g is not None)
        pieces.extend(p.strip() for p in _RELATION.split(body) if p and p.strip())
    letters, size, in_question = _letters(answer), len(_squash(answer)), _squash(question)
    for piece in pieces[:MAX_PIECES]:
        squashed = _squash(piece)
        if is_plain_number(piece.replace(",", "")) and is_plain_number(plain):
            continue  # compared above, by value
        if _letters(piece) != letters:  # a constant never equals an expression in x, and vice versa
            continue
        if len(squashed) > size + SLACK or squashed in in_question:
            continue  # an unevaluated expression, or the question restated: work left to do, not the answer
        try:
            if golds_equivalent(piece, answer):
                return f"the formula part {piece!r} equals the answer"
        except Exception:  # math-verify internals: an unparseable piece says nothing
            continue
    return None


@register
class HintPrefix(Reformulator):
    name = "hint_prefix"
    version = "2"
    Options = HintPrefixOptions
    monotone = True  # a longer hint only helps more
    reasons: ClassVar[dict[str, str]] = {
        "no_solution": "the parent has no reference solution to take a hint from",
        "solution_too_short": "the solution has fewer than two steps, so any hint would be the whole solution",
        "hint_leaks_answer": "the hint would give the final answer away",
        "same_hint": "this rung's share of the steps rounds to the same hint as a smaller rung",
    }

    def ladder(self, parents: Sequence[Parent]) -> list[list[Rung]]:
        return [self.rungs(p) for p in parents]

    def rungs(self, parent: Parent) -> list[Rung]:
        """One rung per fraction, smallest first; a rung that rounds to a smaller rung's hint is ``same_hint``."""
        fractions = self.options.fractions
        if not parent.solution or not parent.solution.strip():
            return [(str(f), self.skip("no_solution", "the parent has no reference solution")) for f in fractions]
        text = clean_solution(parent.solution)
        pieces = [" ".join(text[a:b].split()) for a, b in steps(text)]
        expanded = expand(pieces) if self.options.expand_arithmetic else pieces
        spans = expanded  # the steps a hint is cut from
        if len(spans) < 2:
            return [(str(f), self.skip("solution_too_short", f"{len(spans)} step(s) in the solution")) for f in fractions]
        out: list[Rung] = []
        made: dict[int, str] = {}
        for f in fractions:
            k = min(max(1, int(f * len(spans))), len(spans) - 1)
            if k in made:
                out.append((str(f), self.skip("same_hint", f"{k}/{len(spans)} steps, as rung {made[k]}")))
                continue
            made[k] = str(f)
            hint = " ".join(spans[:k])
            if leak := find_leak(hint, parent.answer, question=parent.question, exact=self.options.exact_leak_check):
                out.append((str(f), self.skip("hint_leaks_answer", f"{leak} (hint of {k}/{len(spans)} steps)")))
                continue
            meta = {"fraction": f, "steps_total": len(spans), "steps_in_hint": k, "hint": hint,
                    "expanded": len(expanded) != len(pieces)}
            out.append((str(f), Child(TEMPLATE.format(question=parent.question, hint=hint), parent.answer,
                                      parent.solution, meta)))
        return out

    def one(self, parent: Parent) -> Outcome:
        """The smallest rung the method can make (the child without measuring), or the first rung's skip."""
        rungs = [out for _, out in self.rungs(parent)]
        return next((o for o in rungs if isinstance(o, Child)), rungs[0])
