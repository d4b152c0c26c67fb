"""Pass-rate statistics of one (problem, policy) group: everything is a function of (n, c).

``n`` rollouts, ``c`` of them correct. The interval is Jeffreys' (the equal-tailed 95 %
credible interval of the Beta(c + 1/2, n - c + 1/2) posterior, with the lower end 0 when
c = 0 and the upper end 1 when c = n, as in Brown, Cai & DasGupta 2001): its coverage is close
to nominal even for n = 8, unlike Wald's, and it is the same posterior that ``band_confidence``
integrates, so the interval and the band's confidence never disagree. :func:`wilson` is here
for comparison (tests check both against known values)::

    >>> [round(x, 4) for x in jeffreys_interval(2, 8)]
    [0.056, 0.5916]
    >>> round(pass_at_k(8, 1, 4), 4)      # one success in 8: P(a group of 4 holds it)
    0.5
    >>> round(grpo_advantage(1, 8), 2)    # TRL's group normalisation (sample std): 7 / sqrt(8)
    2.47
"""

from __future__ import annotations

import math
from functools import lru_cache

Z95 = 1.959963984540054


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """Regularised incomplete beta I_x(a, b): the CDF of Beta(a, b) at x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def beta_binomial_pmf(x: int, m: int, a: float, b: float) -> float:
    """P(X = x) for X ~ BetaBinomial(m, a, b): x successes in m more samples when the pass rate is Beta(a, b).

    >>> round(sum(beta_binomial_pmf(x, 4, 1.0, 1.0) for x in range(5)), 12), round(beta_binomial_pmf(0, 4, 1.0, 1.0), 12)
    (1.0, 0.2)
    """
    if not 0 <= x <= m:
        return 0.0
    log_choose = math.lgamma(m + 1) - math.lgamma(x + 1) - math.lgamma(m - x + 1)
    return math.exp(log_choose + _log_beta(x + a, m - x + b) - _log_beta(a, b))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_ppf(q: float, a: float, b: float) -> float:
    """Quantile of Beta(a, b), by bisection on :func:`beta_cdf` (exact to ~1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if beta_cdf(mid, a, b) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def jeffreys_interval(c: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    _check(c, n)
    alpha = 1.0 - level
    a, b = c + 0.5, n - c + 0.5
    lo = 0.0 if c == 0 else beta_ppf(alpha / 2, a, b)
    hi = 1.0 if c == n else beta_ppf(1 - alpha / 2, a, b)
    return lo, hi


def wilson(c: int, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (for comparison; the tables use Jeffreys)."""
    _check(c, n)
    p = c / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    _check(c, n)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n={n}, got {k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_ks(n: int) -> list[int]:
    """k = 1, 2, 4, ... up to n (and n itself)."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if n >= 1 and ks[-1] != n:
        ks.append(n)
    return ks


def learnability(c: int, n: int) -> float:
    p = c / n
    return p * (1 - p)


TRL_STD_EPS = 1e-4  # TRL's GRPOTrainer: advantages = (r - mean) / (std + 1e-4)


def grpo_advantage(c: int, n: int) -> float:
    """The advantage a correct sample gets in TRL's GRPOTrainer (default ``scale_rewards="group"``).

    TRL (trl/trainer/grpo_trainer.py, 1.16) normalises each group's rewards by their *sample*
    standard deviation (``nanstd``, with Bessel's correction) plus 1e-4: for c successes in n,
    (1 - p) / (sqrt(n p (1 - p) / (n - 1)) + 1e-4). One success in 8 gives 2.47 (the population
    std would give sqrt(7) = 2.65). Zero when every sample is correct (no signal); undefined (nan)
    when none is.
    """
    _check(c, n)
    if c == 0:
        return math.nan
    p = c / n
    if c == n:
        return 0.0
    return (1 - p) / (math.sqrt(n * p * (1 - p) / (n - 1)) + TRL_STD_EPS)


def posterior_mass(c: int, n: int, lo: float, hi: float) -> float:
    """P(lo <= theta <= hi) under the Jeffreys posterior Beta(c + 1/2, n - c + 1/2)."""
    _check(c, n)
    a, b = c + 0.5, n - c + 0.5
    return max(0.0, min(1.0, beta_cdf(hi, a, b) - beta_cdf(lo, a, b)))


def _check(c: int, n: int) -> None:
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got c={c}, n={n}")


@lru_cache(maxsize=100_000)
def group_stats(n: int, c: int) -> dict:
    """Everything the difficulty table derives from (n, c) alone, except the band."""
    lo, hi = jeffreys_interval(c, n)
    return {"pass_rate": c / n, "ci_low": lo, "ci_high": hi,
            "pass_at_k": [(k, pass_at_k(n, c, k)) for k in pass_ks(n)], "learnability": learnability(c, n)}
