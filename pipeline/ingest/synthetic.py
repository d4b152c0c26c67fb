"""Seeded arithmetic problems of graded intrinsic difficulty, so the default pipeline needs no download.

The grading starts where the embedded 135M model succeeds and reaches past what it can do
(measured with SmolLM2-135M, k=8, T=0.8, 3-shot: one-digit sums and products 4-8 of 8,
two-digit sums 0-5, carries, borrows and one-step word problems 0-6, two- and three-step
problems always 0), so the default set populates every band. One example per level::

    L1 add1   What is 3 + 5?                                   -> 8
    L5 sub2b  What is 52 - 27?                                 -> 25
    L7 word2  Mia has 14 pens. She buys 9 more and then gives
              5 to a friend. How many pens does Mia have now?  -> 18

``part`` splits the items for an experiment that must not test on what it trained on: each skill has
three phrasings (``FORMS``: train, test, ood), and each operand tuple belongs to one half (a hash of
the skill and the sorted numbers): ``train`` items use the first phrasing and the train half's numbers, ``test``
(held-out) and ``ood`` items the second and third phrasings and the other half's numbers. Within a
part a level's items are distinct. ``part: null`` (the default) is the original generator, item for item.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from pipeline.config import Model


@dataclass(frozen=True, slots=True)
class Item:
    level: str
    skill: str
    question: str
    answer: str
    solution: str
    form: int = 0  # the phrasing: its index in FORMS[skill] (0: the original text)


NAMES = [("Tom", "He"), ("Mia", "She"), ("Sam", "He"), ("Ana", "She"), ("Leo", "He"), ("Zoe", "She"),
         ("Ben", "He"), ("Ivy", "She"), ("Max", "He"), ("Eva", "She")]
THINGS = ["apples", "pens", "books", "stickers", "marbles", "cards", "shells", "coins", "eggs", "cookies"]


# Each skill's phrasings, in part order (train, test, ood); the first is the original text.
ARITH = ("What is {e}?", "Calculate {e}.", "Work out {e}. What number do you get?")
FORMS: dict[str, tuple[str, ...]] = {
    "word1": ("{name} has {a} {thing}. {pron} buys {b} more. How many {thing} does {name} have now?",
              "{name} had {a} {thing} and got {b} more. How many {thing} does {name} have in total?",
              "There are {a} {thing} in a box. {name} puts in {b} more. How many {thing} are in the box now?"),
    "word2": ("{name} has {a} {thing}. {pron} buys {b} more and then gives {c} to a friend. "
              "How many {thing} does {name} have now?",
              "{name} had {a} {thing}, got {b} more, then gave {c} away. How many {thing} does {name} have left?",
              "A box holds {a} {thing}. {name} adds {b} and then takes out {c}. How many {thing} are in the box now?"),
    "word3": ("{name} buys {a} bags with {b} {thing} in each bag. {pron} already had {c} {thing} "
              "and then gives away {d}. How many {thing} does {name} have now?",
              "There are {a} bags of {b} {thing}. {name} had {c} {thing} before buying them and gives {d} away. "
              "How many {thing} does {name} keep?",
              "A shop packs {a} boxes of {b} {thing} and has {c} loose {thing}. It sells {d}. "
              "How many {thing} does the shop have left?"),
}
Drawn = tuple[tuple[int, ...], str, str, str]  # (operands, question, answer, solution)


def _fin(steps: list[str], answer: int) -> tuple[str, str]:
    return str(answer), " ".join(steps) + f" The answer is \\boxed{{{answer}}}."


def _arith(a: int, op: str, b: int, answer: int, form: int) -> Drawn:
    e = f"{a} {op} {b}"
    return ((a, b), ARITH[form].format(e=e), *_fin([f"{e} = {answer}."], answer))


def _add1(r: random.Random, form: int = 0) -> Drawn:
    a, b = r.randint(1, 9), r.randint(1, 9)
    return _arith(a, "+", b, a + b, form)


def _mul1(r: random.Random, form: int = 0) -> Drawn:
    a, b = r.randint(2, 9), r.randint(2, 9)
    return _arith(a, "*", b, a * b, form)


def _add2(r: random.Random, form: int = 0) -> Drawn:
    a1, b1 = r.randint(1, 4), r.randint(1, 4)
    a0, b0 = r.randint(0, 4), r.randint(0, 5)
    a, b = 10 * a1 + a0, 10 * b1 + b0
    return _arith(a, "+", b, a + b, form)


def _add2c(r: random.Random, form: int = 0) -> Drawn:
    a0 = r.randint(2, 9)
    b0 = r.randint(10 - a0, 9)
    a, b = 10 * r.randint(1, 8) + a0, 10 * r.randint(1, 8) + b0
    return _arith(a, "+", b, a + b, form)


def _sub2b(r: random.Random, form: int = 0) -> Drawn:
    a0 = r.randint(0, 8)
    b0 = r.randint(a0 + 1, 9)
    a1 = r.randint(3, 9)
    b1 = r.randint(1, a1 - 1)
    a, b = 10 * a1 + a0, 10 * b1 + b0
    return _arith(a, "-", b, a - b, form)


def _who(r: random.Random) -> tuple[str, str, str]:
    name, pron = r.choice(NAMES)
    return name, pron, r.choice(THINGS)


def _word1(r: random.Random, form: int = 0) -> Drawn:
    name, pron, thing = _who(r)
    a, b = r.randint(3, 20), r.randint(2, 15)
    q = FORMS["word1"][form].format(name=name, pron=pron, thing=thing, a=a, b=b)
    return ((a, b), q, *_fin([f"{a} + {b} = {a + b}."], a + b))


def _word2(r: random.Random, form: int = 0) -> Drawn:
    name, pron, thing = _who(r)
    a, b = r.randint(8, 30), r.randint(3, 20)
    c = r.randint(2, a + b - 1)
    q = FORMS["word2"][form].format(name=name, pron=pron, thing=thing, a=a, b=b, c=c)
    return ((a, b, c), q, *_fin([f"{a} + {b} = {a + b}.", f"{a + b} - {c} = {a + b - c}."], a + b - c))


def _word3(r: random.Random, form: int = 0) -> Drawn:
    name, pron, thing = _who(r)
    a, b, c = r.randint(3, 9), r.randint(4, 12), r.randint(5, 25)
    d = r.randint(2, a * b + c - 1)
    q = FORMS["word3"][form].format(name=name, pron=pron, thing=thing, a=a, b=b, c=c, d=d)
    steps = [f"{a} * {b} = {a * b}.", f"{a * b} + {c} = {a * b + c}.", f"{a * b + c} - {d} = {a * b + c - d}."]
    return ((a, b, c, d), q, *_fin(steps, a * b + c - d))


def _mul3(r: random.Random, form: int = 0) -> Drawn:
    a, b = r.randint(101, 999), r.randint(11, 99)
    return _arith(a, "*", b, a * b, form)


LEVELS: dict[str, tuple[str, Callable[..., Drawn]]] = {
    "L1": ("add1", _add1),
    "L2": ("mul1", _mul1),
    "L3": ("add2", _add2),
    "L4": ("add2c", _add2c),
    "L5": ("sub2b", _sub2b),
    "L6": ("word1", _word1),
    "L7": ("word2", _word2),
    "L8": ("word3", _word3),
    "L9": ("mul3", _mul3),
}
PARTS = ("train", "test", "ood")  # part -> its phrasing: the index in FORMS (ARITH for the arithmetic skills)


def operand_half(skill: str, operands: tuple[int, ...]) -> str:
    """``train`` or ``test``: the half an operand tuple belongs to (a hash of the skill and the sorted numbers, the
    same in every run: ``8 + 2`` and ``2 + 8`` fall in the same half)."""
    digest = hashlib.sha256(f"{skill}:{','.join(map(str, sorted(operands)))}".encode()).digest()
    return "train" if digest[0] % 2 == 0 else "test"


def template_of(item: Item) -> tuple[str, int]:
    """An item's template: its skill and phrasing."""
    return item.skill, item.form


def operands_of(item: Item) -> tuple[int, ...]:
    """The numbers in an item's question, in order (the operand tuple up to the phrasing's order)."""
    return tuple(int(x) for x in re.findall(r"\d+", item.question))


class SyntheticOptions(Model):
    n_per_level: int = Field(12, gt=0)
    seed: int = 0
    levels: list[str] = Field(default_factory=lambda: list(LEVELS))
    part: Literal["train", "test", "ood"] | None = Field(
        None, description="train / held-out (test) / out-of-distribution: disjoint phrasings and operand halves")

    @field_validator("levels")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        if unknown := [lv for lv in v if lv not in LEVELS]:
            raise ValueError(f"unknown levels {unknown}; known: {list(LEVELS)}")
        return v


def generate(opts: SyntheticOptions) -> Iterator[Item]:
    """``n_per_level`` items per level, level by level; the same options give the same items."""
    form = PARTS.index(opts.part) if opts.part else 0
    half = "train" if opts.part == "train" else "test"
    for level in opts.levels:
        skill, fn = LEVELS[level]
        rng = random.Random(f"{opts.seed}:{level}")
        if opts.part is None:
            for _ in range(opts.n_per_level):
                _nums, q, a, s = fn(rng)
                yield Item(level, skill, q, a, s)
            continue
        seen: set[tuple[int, ...]] = set()
        for _ in range(200 * opts.n_per_level):  # bounded: a level's half may hold fewer distinct tuples
            if len(seen) == opts.n_per_level:
                break
            nums, q, a, s = fn(rng, form)
            key = tuple(sorted(nums))
            if key not in seen and operand_half(skill, nums) == half:
                seen.add(key)
                yield Item(level, skill, q, a, s, form)
        if len(seen) < opts.n_per_level:
            raise ValueError(f"level {level} ({skill}) has {len(seen)} distinct {half}-half items, "
                             f"fewer than n_per_level={opts.n_per_level}; lower n_per_level")


__all__ = ["PARTS", "Item", "SyntheticOptions", "generate", "operand_half", "operands_of", "template_of"]
