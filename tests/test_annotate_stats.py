"""Pass-rate statistics against high-precision references (mpmath, shipped with sympy) and brute force; bands."""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest

from pipeline.bands import assign_band, band_confidence, band_ranges
from pipeline.config import BandsConfig, ConfigError, parse_params
from pipeline.pass_rate_stats import (
    beta_cdf,
    beta_ppf,
    grpo_advantage,
    jeffreys_interval,
    learnability,
    pass_at_k,
    pass_ks,
    posterior_mass,
    wilson,
)


@pytest.mark.parametrize(("x", "a", "b"),
                         [(0.1, 0.5, 8.5), (0.5, 4.5, 4.5), (0.9, 7.5, 1.5), (0.02, 0.5, 64.5), (0.3, 20.5, 44.5)])
def test_beta_cdf_matches_mpmath(x, a, b):
    assert beta_cdf(x, a, b) == pytest.approx(float(mpmath.betainc(a, b, 0, x, regularized=True)), abs=1e-12)


@pytest.mark.parametrize(("c", "n"), [(0, 8), (1, 8), (2, 8), (4, 8), (7, 8), (8, 8), (3, 10), (17, 64)])
def test_jeffreys_interval_matches_mpmath_quantiles(c, n):
    lo, hi = jeffreys_interval(c, n)
    a, b = c + 0.5, n - c + 0.5
    if c > 0:
        assert float(mpmath.betainc(a, b, 0, lo, regularized=True)) == pytest.approx(0.025, abs=1e-9)
    else:
        assert lo == 0.0
    if c < n:
        assert float(mpmath.betainc(a, b, 0, hi, regularized=True)) == pytest.approx(0.975, abs=1e-9)
    else:
        assert hi == 1.0
    assert beta_ppf(0.5, a, b) == pytest.approx(float(mpmath.findroot(
        lambda t: mpmath.betainc(a, b, 0, t, regularized=True) - 0.5, (1e-9, 1 - 1e-9), solver="bisect")), abs=1e-9)


def test_wilson_known_values():
    # Wilson 95 % for 0/10 is [0, 0.2775]; for 5/10 [0.2366, 0.7634] (textbook values)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_pass_at_k_is_the_subset_average(n):
    for c in range(n + 1):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            brute = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_ks_and_learnability_and_advantage():
    assert pass_ks(8) == [1, 2, 4, 8] and pass_ks(6) == [1, 2, 4, 6] and pass_ks(1) == [1]
    assert learnability(4, 8) == 0.25 and learnability(0, 8) == 0.0
    for k in (2, 4, 8, 16, 64):
        # TRL's GRPOTrainer: the group's rewards over their sample std (Bessel) + 1e-4
        r = [1.0] + [0.0] * (k - 1)
        mean = sum(r) / k
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / (k - 1))
        assert grpo_advantage(1, k) == pytest.approx((1 - mean) / (std + 1e-4), rel=1e-12)
        assert grpo_advantage(1, k) == pytest.approx((k - 1) / math.sqrt(k), rel=1e-3)
    assert round(grpo_advantage(1, 8), 2) == 2.47  # not sqrt(7) = 2.65: that is the population std
    assert grpo_advantage(8, 8) == 0.0 and math.isnan(grpo_advantage(0, 8))
    with pytest.raises(ValueError, match="c=9, n=8"):
        pass_at_k(8, 9, 1)


def test_bands_default_edges_with_k8():
    cfg = BandsConfig()
    assert [assign_band(c, 8, cfg) for c in range(9)] == (
        ["unsolved", "too_hard", "learnable", "learnable", "learnable", "learnable", "learnable", "too_easy", "too_easy"])
    assert assign_band(1, 100, cfg) == "too_hard"  # a success is never unsolved, even below unsolved_max


def test_band_confidence_is_posterior_mass_of_the_band():
    cfg = BandsConfig()
    assert band_confidence(0, 8, "unsolved", cfg) == pytest.approx(float(mpmath.betainc(0.5, 8.5, 0, 0.02, regularized=True)))
    assert band_confidence(4, 8, "learnable", cfg) > 0.9
    # the four bands partition [0, 1]
    for c in range(9):
        assert sum(posterior_mass(c, 8, lo, hi) for lo, hi in band_ranges(cfg).values()) == pytest.approx(1.0)
    # more samples, more confidence
    assert band_confidence(0, 64, "unsolved", cfg) > band_confidence(0, 8, "unsolved", cfg)


def test_band_config_must_be_ordered():
    raw = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {}}, "rollout": {"policies": ["p"]},
           "annotate": {"bands": {"learnable_min": 0.9, "learnable_max": 0.8}}}
    with pytest.raises(ConfigError, match="learnable_min < learnable_max"):
        parse_params(raw)
