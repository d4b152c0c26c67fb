"""Bounded checks of gold answers from the caller's process: does a gold parse, are two golds the same answer.

Ingest (:mod:`pipeline.ingest.core`, :mod:`pipeline.ingest.fold`) and the reformulators call these on golds
that may be hostile. Each check runs :func:`pipeline.gold.parse_gold` (math-verify) in the verify worker pool
under its default CPU-time and memory bounds (``verify.timeout_s``/``memory_mb``); a gold longer than
:data:`pipeline.gold.MAX_GOLD_CHARS` is not parsed at all, and a parse that runs past the bound does not parse.

    >>> gold_parses("7"), golds_equivalent("1,007", "1007")
    (True, True)
"""

from __future__ import annotations

from functools import lru_cache

from pipeline.config import VerifyConfig
from pipeline.gold import MAX_GOLD_CHARS, is_plain_number, normalize_gold, parse_gold
from pipeline.verify.grader import Grade
from pipeline.verify.pool import shared_pool


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
    return _bounded(_equivalent_check, a, b)


__all__ = ["gold_parses", "golds_equivalent"]
