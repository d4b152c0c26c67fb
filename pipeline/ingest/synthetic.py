"""Seeded arithmetic problems of graded intrinsic difficulty, so the default pipeline needs no download.

The grading starts where the embedded 135M model succeeds and reaches past what it can do
(measured with SmolLM2-135M, k=8, T=0.8, 3-shot: one-digit sums and products 4-8 of 8,
two-digit sums 0-5, carries, borrows and one-step word problems 0-6, two- and three-step
problems always 0), so the default set populates every band. One example per level::

    L1 add1   What is 3 + 5?                                   -> 8
    L5 sub2b  What is 52 - 27?                                 -> 25
    L7 word2  Mia has 14 pens. She buys 9 more and then gives
              5 to a friend. How many pens does Mia have now?  -> 18
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import Field, field_validator

from pipeline.config import Model


@dataclass(frozen=True, slots=True)
class Item:
    level: str
    skill: str
    question: str
    answer: str
    solution: str


NAMES = [("Tom", "He"), ("Mia", "She"), ("Sam", "He"), ("Ana", "She"), ("Leo", "He"), ("Zoe", "She"),
         ("Ben", "He"), ("Ivy", "She"), ("Max", "He"), ("Eva", "She")]
THINGS = ["apples", "pens", "books", "stickers", "marbles", "cards", "shells", "coins", "eggs", "cookies"]


def _fin(steps: list[str], answer: int) -> tuple[str, str]:
    return str(answer), " ".join(steps) + f" The answer is \\boxed{{{answer}}}."


def _add1(r: random.Random) -> tuple[str, str, str]:
    a, b = r.randint(1, 9), r.randint(1, 9)
    return (f"What is {a} + {b}?", *_fin([f"{a} + {b} = {a + b}."], a + b))


def _mul1(r: random.Random) -> tuple[str, str, str]:
    a, b = r.randint(2, 9), r.randint(2, 9)
    return (f"What is {a} * {b}?", *_fin([f"{a} * {b} = {a * b}."], a * b))


def _add2(r: random.Random) -> tuple[str, str, str]:
    a1, b1 = r.randint(1, 4), r.randint(1, 4)
    a0, b0 = r.randint(0, 4), r.randint(0, 5)
    a, b = 10 * a1 + a0, 10 * b1 + b0
    return (f"What is {a} + {b}?", *_fin([f"{a} + {b} = {a + b}."], a + b))


def _add2c(r: random.Random) -> tuple[str, str, str]:
    a0 = r.randint(2, 9)
    b0 = r.randint(10 - a0, 9)
    a, b = 10 * r.randint(1, 8) + a0, 10 * r.randint(1, 8) + b0
    return (f"What is {a} + {b}?", *_fin([f"{a} + {b} = {a + b}."], a + b))


def _sub2b(r: random.Random) -> tuple[str, str, str]:
    a0 = r.randint(0, 8)
    b0 = r.randint(a0 + 1, 9)
    a1 = r.randint(3, 9)
    b1 = r.randint(1, a1 - 1)
    a, b = 10 * a1 + a0, 10 * b1 + b0
    return (f"What is {a} - {b}?", *_fin([f"{a} - {b} = {a - b}."], a - b))


def _who(r: random.Random) -> tuple[str, str, str]:
    name, pron = r.choice(NAMES)
    return name, pron, r.choice(THINGS)


def _word1(r: random.Random) -> tuple[str, str, str]:
    name, pron, thing = _who(r)
    a, b = r.randint(3, 20), r.randint(2, 15)
    q = f"{name} has {a} {thing}. {pron} buys {b} more. How many {thing} does {name} have now?"
    return (q, *_fin([f"{a} + {b} = {a + b}."], a + b))


def _word2(r: random.Random) -> tuple[str, str, str]:
    name, pron, thing = _who(r)
    a, b = r.randint(8, 30), r.randint(3, 20)
    c = r.randint(2, a + b - 1)
    q = (f"{name} has {a} {thing}. {pron} buys {b} more and then gives {c} to a friend. "
         f"How many {thing} does {name} have now?")
    return (q, *_fin([f"{a} + {b} = {a + b}.", f"{a + b} - {c} = {a + b - c}."], a + b - c))


def _word3(r: random.Random) -> tuple[str, str, str]:
    name, pron, thing = _who(r)
    a, b, c = r.randint(3, 9), r.randint(4, 12), r.randint(5, 25)
    d = r.randint(2, a * b + c - 1)
    q = (f"{name} buys {a} bags with {b} {thing} in each bag. {pron} already had {c} {thing} "
         f"and then gives away {d}. How many {thing} does {name} have now?")
    steps = [f"{a} * {b} = {a * b}.", f"{a * b} + {c} = {a * b + c}.", f"{a * b + c} - {d} = {a * b + c - d}."]
    return (q, *_fin(steps, a * b + c - d))


def _mul3(r: random.Random) -> tuple[str, str, str]:
    a, b = r.randint(101, 999), r.randint(11, 99)
    return (f"What is {a} * {b}?", *_fin([f"{a} * {b} = {a * b}."], a * b))


LEVELS: dict[str, tuple[str, Callable[[random.Random], tuple[str, str, str]]]] = {
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


class SyntheticOptions(Model):
    n_per_level: int = Field(12, gt=0)
    seed: int = 0
    levels: list[str] = Field(default_factory=lambda: list(LEVELS))

    @field_validator("levels")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        if unknown := [lv for lv in v if lv not in LEVELS]:
            raise ValueError(f"unknown levels {unknown}; known: {list(LEVELS)}")
        return v


def generate(opts: SyntheticOptions) -> Iterator[Item]:
    """``n_per_level`` items per level, level by level; the same options give the same items."""
    for level in opts.levels:
        skill, fn = LEVELS[level]
        rng = random.Random(f"{opts.seed}:{level}")
        for _ in range(opts.n_per_level):
            q, a, s = fn(rng)
            yield Item(level, skill, q, a, s)
