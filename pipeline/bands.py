"""Difficulty bands, declared once: names, order, colours, default edges, sides, and the assignment rule.

Config (defaults and validation), annotate, the catalog's ``bands`` view (and the views and summary that order by
it), the plots, the dataset card, publish and adaptive sampling (its sides) all read this module; no other Python
module spells a band name (tests/test_bands.py).

Each band is a range of the *true* pass rate theta (``annotate.bands`` in params.yaml)::

    unsolved   [0, unsolved_max)               default [0, 0.02)
    too_hard   [unsolved_max, learnable_min)   default [0.02, 0.2)
    learnable  [learnable_min, learnable_max]  default [0.2, 0.8]
    too_easy   (learnable_max, 1]              default (0.8, 1]

A group is assigned the band of its observed pass rate c/n, except that a group with no
success is always ``unsolved`` and a group with a success never is. ``band_confidence`` is
the Jeffreys posterior probability that theta lies in the assigned band's range: with k = 8,
0/8 gives only 0.44 for unsolved (eight samples cannot tell "never" from "rarely"), 4/8 gives
0.94 for learnable.

Why these defaults: the GRPO signal p(1 - p) is at least 0.16 (64 % of its maximum) on
[0.2, 0.8]; with k = 8 that is 2..6 successes. One success in 8 is the rare-success regime
the research warns about (its advantage in TRL is 7 / sqrt(8) = 2.47), so it is too_hard; 7 of 8 leaves
one failure, a weak and mostly negative signal, so it is too_easy. Below 2 % a group of 8
holds a success less than 15 % of the time: for training purposes the policy cannot solve it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pipeline.pass_rate_stats import posterior_mass
from pipeline.sqltext import sql_literal

TOO_EASY = "too_easy"
LEARNABLE = "learnable"
TOO_HARD = "too_hard"
UNSOLVED = "unsolved"

BANDS: tuple[str, ...] = (TOO_EASY, LEARNABLE, TOO_HARD, UNSOLVED)  # display order: easiest first
HARD: tuple[str, ...] = (TOO_HARD, UNSOLVED)  # what reformulation rewrites by default
COLOURS: dict[str, str] = {TOO_EASY: "#4c72b0", LEARNABLE: "#55a868", TOO_HARD: "#dd8452", UNSOLVED: "#c44e52"}
DEFAULT_EDGES: dict[str, float] = {"unsolved_max": 0.02, "learnable_min": 0.2, "learnable_max": 0.8}


class Edges(Protocol):
    """What the rule needs of ``annotate.bands`` (pipeline.config.BandsConfig)."""

    unsolved_max: float
    learnable_min: float
    learnable_max: float


def band_ranges(cfg: Edges) -> dict[str, tuple[float, float]]:
    return {
        UNSOLVED: (0.0, cfg.unsolved_max),
        TOO_HARD: (cfg.unsolved_max, cfg.learnable_min),
        LEARNABLE: (cfg.learnable_min, cfg.learnable_max),
        TOO_EASY: (cfg.learnable_max, 1.0),
    }


# The side of learnable a band lies on: what adaptive sampling certifies (eight samples cannot tell unsolved from
# too_hard, and training only needs to know whether an item is learnable and, if not, on which side).
SIDES: dict[str, str] = {UNSOLVED: "below", TOO_HARD: "below", LEARNABLE: LEARNABLE, TOO_EASY: "above"}


def side_ranges(cfg: Edges) -> dict[str, tuple[float, float]]:
    """Each side's range of the true pass rate: the union of its bands' :func:`band_ranges`."""
    out: dict[str, tuple[float, float]] = {}
    for band, (lo, hi) in band_ranges(cfg).items():
        a, b = out.get(SIDES[band], (lo, hi))
        out[SIDES[band]] = (min(a, lo), max(b, hi))
    return out


def describe_ranges(cfg: Edges) -> str:
    """``unsolved [0, 0.02), too_hard [0.02, 0.2), learnable [0.2, 0.8], too_easy (0.8, 1]``."""
    r = band_ranges(cfg)
    return (f"{UNSOLVED} [0, {r[UNSOLVED][1]}), {TOO_HARD} [{r[TOO_HARD][0]}, {r[TOO_HARD][1]}), "
            f"{LEARNABLE} [{r[LEARNABLE][0]}, {r[LEARNABLE][1]}], {TOO_EASY} ({r[TOO_EASY][0]}, 1]")


def assign_band(c: int, n: int, cfg: Edges) -> str:
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got c={c}, n={n}")
    p = c / n
    if c == 0:
        return UNSOLVED
    if p < cfg.learnable_min:
        return TOO_HARD
    if p <= cfg.learnable_max:
        return LEARNABLE
    return TOO_EASY


def band_confidence(c: int, n: int, band: str, cfg: Edges) -> float:
    lo, hi = band_ranges(cfg)[band]
    return posterior_mass(c, n, lo, hi)


def check_bands(values: Iterable[str], *, key: str) -> list[str]:
    """``values`` if every one is a band, else a ValueError naming the key, the bad value and the bands."""
    values = list(values)
    for v in values:
        if v not in BANDS:
            raise ValueError(f"{key}: unknown band {v!r}; allowed: {', '.join(BANDS)}")
    return values


def sql_values() -> str:
    """The ``bands`` view: band, band_order (1 = easiest), colour, hard (reformulation's default)."""
    rows = ", ".join(f"({sql_literal(b)}, {i}, {sql_literal(COLOURS[b])}, {str(b in HARD).lower()})"
                     for i, b in enumerate(BANDS, 1))
    return f"SELECT * FROM (VALUES {rows}) AS t(band, band_order, colour, hard)"


__all__ = ["BANDS", "COLOURS", "DEFAULT_EDGES", "HARD", "LEARNABLE", "TOO_EASY", "TOO_HARD", "UNSOLVED", "Edges",
           "assign_band", "band_confidence", "band_ranges", "check_bands", "describe_ranges", "sql_values"]
