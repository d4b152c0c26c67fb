"""Bounded checks of gold answers from the caller's process: does a gold parse, are two golds the same answer,
can the verifier grade answers against a gold at all.

Ingest (:mod:`pipeline.ingest.core`, :mod:`pipeline.ingest.fold`) and the reformulators call these on golds
that may be hostile. Each check runs :func:`pipeline.gold.parse_gold` (math-verify) in the verify worker pool
under its default CPU-time and memory bounds (``verify.timeout_s``/``memory_mb``); a gold longer than
:data:`pipeline.gold.MAX_GOLD_CHARS` is not parsed at all, and a parse that runs past the bound does not parse.

    >>> gold_parses("7"), golds_equivalent("1,007", "1007")
    (True, True)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

from pipeline.config import VerifyConfig, parse_options
from pipeline.gold import MAX_GOLD_CHARS, is_plain_number, normalize_gold, parse_gold
from pipeline.verify.grader import Grade, GradeOptions, fast_grade
from pipeline.verify.pool import shared_pool

# The wrong answer every gold is graded against once: a gold the verifier cannot compare with 0 within its
# bounds (math-verify expanding (x+1)^{10000}, evaluating \binom{10^9}{10^8}) times out on every wrong sample.
PROBE_ANSWER = "0"


def _parses_check(gold: str, _unused: str, *, options) -> Grade:  # runs in a verify worker
    parses = any(not isinstance(x, str) for x in parse_gold(gold))
    return Grade("correct" if parses else "incorrect")


def _equivalent_check(a: str, b: str, *, options) -> Grade:  # runs in a verify worker
    from math_verify import verify  # lazy: sympy's import is paid once, in the forkserver that preloads it

    pa_, pb = parse_gold(a), parse_gold(b)
    same = bool(pa_ and pb and verify(list(pa_), list(pb), timeout_seconds=None))
    return Grade("correct" if same else "incorrect")


def _bounded(fn, a: str, b: str) -> bool:
    """``fn(a, b)`` in the verify worker pool (default bounds): True when it says ``correct``; a timeout, an error
    or the memory limit is False."""
    _check_budget()
    cfg = VerifyConfig()
    pool = shared_pool(workers=1, timeout_s=cfg.timeout_s, memory_mb=cfg.memory_mb, fn=fn)
    return pool.map([(a, b)], workers=1)[0].status == "correct"


@lru_cache(maxsize=65536)
def gold_parses(gold: str) -> bool:
    """True when math-verify turns the gold into an expression (a bare string fallback does not count), within the
    verify pool's bounds; a gold over :data:`~pipeline.gold.MAX_GOLD_CHARS` does not parse."""
    if is_plain_number(gold):
        return True
    return len(gold) <= MAX_GOLD_CHARS and _bounded(_parses_check, gold, "")


def golds_equivalent(a: str, b: str) -> bool:
    """Two golds are the same answer: the same after :func:`~pipeline.gold.normalize_gold`, or equal to math-verify
    within the verify pool's bounds (a gold over :data:`~pipeline.gold.MAX_GOLD_CHARS` equals only itself)."""
    if normalize_gold(a) == normalize_gold(b):
        return True
    if max(len(a), len(b)) > MAX_GOLD_CHARS:
        return False
    try:
        return _bounded(_equivalent_check, a, b)
    except GoldBudgetSpent:
        return False  # not shown equal: both kept, as for a check that timed out


class GoldBudget:
    """The wall-clock seconds the golds of one ingest may spend in the worker pool, all checks together (does the
    gold parse, can it be graded, are two golds one answer): once they are spent, a gold not yet checked is not sent
    to the pool and is an ``ungradable_gold`` reject that says so (8 golds that each ran to the check's time limit
    took 52 s before). Plain numbers, checked in the caller's process, cost none. Set for a block by
    :func:`gold_budget`."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.skipped = 0

    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def reason(self) -> str:
        return (f"not checked: the ingest's gold-grading budget (ingest.gold_budget_s = {self.seconds:g} s) was spent on "
                "golds before it; raise the budget to grade it")


class GoldBudgetSpent(Exception):
    """Raised instead of a check once the block's :class:`GoldBudget` is spent; its message is the reject's detail."""


_BUDGET: ContextVar[GoldBudget | None] = ContextVar("gold_budget", default=None)


@contextmanager
def gold_budget(seconds: float | None) -> Iterator[GoldBudget]:
    """Every gold check in the block (this thread) shares one :class:`GoldBudget` of ``seconds`` (None: unbounded)."""
    budget = GoldBudget(seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _check_budget() -> None:
    budget = _BUDGET.get()
    if budget is not None and budget.spent():
        budget.skipped += 1
        raise GoldBudgetSpent(budget.reason())


def ungradable_golds(golds: Sequence[str], *, config: VerifyConfig | None = None) -> list[str | None]:
    """For each gold, why the verifier could never grade an answer against it, or None when it can.

    Each gold is graded as the verify stage grades a sample, with the same function, options and bounds
    (``config``: the verify settings; :func:`~pipeline.verify.judge.judge_many`'s worker pool, so the same warm
    workers): against itself, which must be ``correct``, and against the answer :data:`PROBE_ANSWER`, which must
    be decided (``correct`` or ``incorrect``, not ``timeout`` or ``error``). Two plain numbers are decided in
    this process (:func:`~pipeline.verify.grader.fast_grade`), so numeric golds cost no worker time.

        >>> ungradable_golds(["7", "\\frac{1}{2}"])   # doctest: +SKIP
        [None, None]
    """
    config = config or VerifyConfig()
    options = parse_options(GradeOptions, config.options, where="verify.options")
    grades: dict[tuple[str, str], Grade | None] = {}
    for gold in golds:
        for answer in (gold, PROBE_ANSWER):
            grades.setdefault((gold, answer), fast_grade(gold, answer, options))
    pending = [pair for pair, g in grades.items() if g is None]
    unchecked: set[str] = set()
    budget = _BUDGET.get()
    if pending:
        pool = shared_pool(workers=config.workers, timeout_s=config.timeout_s, memory_mb=config.memory_mb,
                           options=options)
        deadline = None if budget is None else budget.deadline
        done = pool.map(pending, workers=config.workers, deadline=deadline)
        grades.update((pair, g) for pair, g in zip(pending, done, strict=True) if g is not None)
        unchecked = {gold for (gold, _), g in zip(pending, done, strict=True) if g is None}
        if budget is not None:
            budget.skipped += len(unchecked)
    return [budget.reason() if gold in unchecked else
            _why_ungradable(gold, grades[(gold, gold)], grades[(gold, PROBE_ANSWER)]) for gold in golds]


def _why_ungradable(gold: str, itself: Grade | None, probe: Grade | None) -> str | None:
    shown = repr(gold[:80]) + ("..." if len(gold) > 80 else "")
    assert itself is not None and probe is not None
    if itself.status != "correct":
        return (f"the gold {shown} graded against itself is {itself.status}" + (f" ({itself.detail})" if itself.detail
                else "") + ": no answer could be graded correct")
    if probe.status not in ("correct", "incorrect"):
        return (f"grading the answer {PROBE_ANSWER} against the gold {shown} gives {probe.status}"
                + (f" ({probe.detail})" if probe.detail else "") + ": every wrong sample would end the same way")
    return None


__all__ = ["PROBE_ANSWER", "GoldBudget", "GoldBudgetSpent", "gold_budget", "gold_parses", "golds_equivalent", "ungradable_golds"]
