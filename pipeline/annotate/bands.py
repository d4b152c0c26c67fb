"""Difficulty bands: where a problem's pass rate puts it for GRPO-style training.

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

from pipeline.annotate.stats import posterior_mass
from pipeline.config import BandsConfig

BANDS = ("too_easy", "learnable", "too_hard", "unsolved")


def band_ranges(cfg: BandsConfig) -> dict[str, tuple[float, float]]:
    return {
        "unsolved": (0.0, cfg.unsolved_max),
        "too_hard": (cfg.unsolved_max, cfg.learnable_min),
        "learnable": (cfg.learnable_min, cfg.learnable_max),
        "too_easy": (cfg.learnable_max, 1.0),
    }


def assign_band(c: int, n: int, cfg: BandsConfig) -> str:
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got c={c}, n={n}")
    p = c / n
    if c == 0:
        return "unsolved"
    if p < cfg.learnable_min:
        return "too_hard"
    if p <= cfg.learnable_max:
        return "learnable"
    return "too_easy"


def band_confidence(c: int, n: int, band: str, cfg: BandsConfig) -> float:
    lo, hi = band_ranges(cfg)[band]
    return posterior_mass(c, n, lo, hi)
