"""Sampling budgets: how many samples of a (problem, policy) the run takes, and why it stopped.

``fixed``: exactly ``rollout.k``. ``adaptive``: ``min_k`` samples, then ``step`` more at a time,
up to ``max_k`` (= ``rollout.k``); after each round the rule below looks at the verdicts so far
(``n`` samples, ``c`` correct) and stops the first time one of these holds::

    curtailed   every count the samples left up to max_k could add gives the same band at max_k
                (so stopping cannot change the band a fixed max_k run would assign)
    confident   rule predictive (default): the side of the observed band is, with probability
                >= confidence, the side a full max_k run would assign: the max_k - n samples left
                are Beta-binomial under the posterior Beta(c + 1 + w c0, n - c + 1 + w (n0 - c0))
                rule posterior: the posterior Beta(c + 1/2 + w c0, n - c + 1/2 + w (n0 - c0)) puts
                >= confidence on the side of the observed band
    max_k       max_k samples taken

The side, not the band, is certified: eight samples cannot tell ``unsolved`` (< 0.02) from
``too_hard``, and training only needs to know whether an item is learnable and, if not, on which
side (below learnable, learnable, above). (c0, n0) are the counts of the prior policy (a previous
checkpoint) and ``w`` its weight: they only decide when to stop; every published figure comes from
the policy's own samples. The predictive rule asks what a fixed max_k run would say, which is what
"as good as fixed k" means; its uniform prior is the one that stays calibrated when pass rates are
spread evenly (with the Jeffreys prior it stops too early there: benchmarks/adaptive_vs_fixed.py).
Decisions (AdaptiveBudget's and BandsConfig's defaults, max_k 32)::

    >>> rule = StoppingRule(AdaptiveBudget(), k=32, bands=BandsConfig())
    >>> rule.replay([False] * 32), rule.replay([True, False, False] * 11)[:2]
    ((10, 'confident'), (10, 'confident'))
    >>> rule.decide(8, 16), rule.decide(0, 4), rule.decide(4, 4)   # any 8..24 of 32 is learnable
    ('curtailed', None, None)

Replaying the rule over a fixed ``max_k`` run's verdicts (in sample_idx order) gives exactly the
samples an adaptive run takes: adaptive samples are the prefix 0..n-1 with the same seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipeline.bands import SIDES, assign_band, side_ranges
from pipeline.config import AdaptiveBudget, BandsConfig, FixedBudget, RolloutConfig
from pipeline.pass_rate_stats import beta_binomial_pmf, beta_cdf

STOP_REASONS = ("fixed", "curtailed", "confident", "max_k", "incomplete")


def budget_label(cfg: RolloutConfig) -> str:
    """The budget as one readable, canonical string (the difficulty table's ``budget`` column)."""
    b = cfg.budget
    if isinstance(b, FixedBudget):
        return f"fixed(k={cfg.k})"
    return f"adaptive(rule={b.rule},min_k={b.min_k},max_k={cfg.k},step={b.step},confidence={b.confidence:g})"


def checkpoints(min_k: int, step: int, max_k: int) -> list[int]:
    """The sample counts at which the rule looks: min_k, min_k + step, ..., and max_k last."""
    out = list(range(min_k, max_k, step))
    return [*out, max_k]


@dataclass(frozen=True)
class StoppingRule:
    """The adaptive rule for one run (budget, max_k, band edges); pure and cached per (c, n, prior)."""

    budget: AdaptiveBudget
    k: int
    bands: BandsConfig

    @property
    def checkpoints(self) -> list[int]:
        return checkpoints(self.budget.min_k, self.budget.step, self.k)

    def side_range(self, side: str) -> tuple[float, float]:
        return side_ranges(self.bands)[side]

    def decide(self, c: int, n: int, prior: tuple[float, float] = (0.0, 0.0)) -> str | None:
        """Why sampling stops after ``n`` samples with ``c`` correct, or None to continue.

        ``prior``: pseudo-counts (correct, incorrect) from the prior policy, already weighted.
        """
        return _decide(self, c, n, float(prior[0]), float(prior[1]))

    def replay(self, outcomes: Sequence[bool], prior: tuple[float, float] = (0.0, 0.0)) -> tuple[int, str]:
        """(samples taken, stop reason) for outcomes in sample_idx order; ``incomplete`` if they run out first."""
        have, c = 0, 0
        for n in self.checkpoints:
            if len(outcomes) < n:
                return have, "incomplete"
            c += sum(bool(x) for x in outcomes[have:n])
            have = n
            reason = self.decide(c, n, prior)
            if reason is not None:
                return n, reason
        raise AssertionError("the last checkpoint is max_k, where the rule always stops")  # pragma: no cover


@lru_cache(maxsize=200_000)
def _decide(rule: StoppingRule, c: int, n: int, prior_c: float, prior_f: float) -> str | None:
    if n >= rule.k:
        return "max_k"
    left = rule.k - n
    finals = [assign_band(c + x, rule.k, rule.bands) for x in range(left + 1)]  # the band at max_k, x more correct
    if len(set(finals)) == 1:
        return "curtailed"
    side = SIDES[assign_band(c, n, rule.bands)]
    if rule.budget.rule == "predictive":
        a, b = c + 1.0 + prior_c, n - c + 1.0 + prior_f
        same = sum(beta_binomial_pmf(x, left, a, b) for x, band in enumerate(finals) if SIDES[band] == side)
    else:
        lo, hi = rule.side_range(side)
        a, b = c + 0.5 + prior_c, n - c + 0.5 + prior_f
        same = beta_cdf(hi, a, b) - beta_cdf(lo, a, b)
    if same >= rule.budget.confidence:
        return "confident"
    return None


def select(cfg: RolloutConfig, bands: BandsConfig, outcomes: Sequence[bool],
           prior: tuple[float, float] = (0.0, 0.0)) -> tuple[int, str]:
    """(n, stop reason) of one (problem, policy) under the run's budget, from its outcomes in sample_idx order."""
    if isinstance(cfg.budget, FixedBudget):
        return (cfg.k, "fixed") if len(outcomes) >= cfg.k else (len(outcomes), "incomplete")
    return StoppingRule(cfg.budget, cfg.k, bands).replay(outcomes, prior)


def prior_counts(c0: int, n0: int, weight: float) -> tuple[float, float]:
    """The prior policy's counts as weighted pseudo-counts (correct, incorrect)."""
    return weight * c0, weight * (n0 - c0)
