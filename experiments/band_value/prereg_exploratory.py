"""Exploratory figures beside the band-value design's pre-registered analysis. None of them is confirmatory.

PREREGISTRATION.md fixes one primary and two secondary contrasts (``prereg_analysis.py``); everything else is
exploratory and reported as such. This script was written and committed while the design's runs were still
going, before any analysis of them was run (git history shows the order), and reads the same folder:

1. **Signal.** Per arm, the GRPO groups with a signal (rewards that differed: the only groups with an advantage)
   per run and over all groups (Wilson 95 %); for ``hard_signal``, the groups drawn for its 16 steps (the
   gate's skipped groups), which says what equalising the signal cost.
2. **The primary under other tests.** The re-analysis of the 50 earlier runs found the tests disagreeing
   (permutation of the mean 0.045, Welch's t 0.060, Mann-Whitney 0.17), so the primary contrast is also given
   under Welch's t-distribution, the plain mean-difference permutation test and the Mann-Whitney rank-sum
   permutation test, all one-sided. A difference between these is a fact about the tests, not a second verdict.
3. **Signal against gain.** Within each arm, Spearman's rho of a run's groups with a signal against its
   held-out change (permutation p, two-sided); and over the learnable and hard runs together, the arm
   difference with the signal count held fixed (least squares ``change ~ arm + groups_with_signal``, a 95 %
   bootstrap interval resampling runs within arms). The arms differ in signal by design, so the adjusted
   difference leans on the few hard runs with many signal groups: read it as a description, not a test.
   Its support (added 2 Dec 2026, after an audit): how many hard runs had at least the learnable runs' median
   count (and its lower quartile), and what the fit predicts for a hard run at the gate's 16 groups with a
   signal (the pooled fit, and one over the hard runs alone) beside what the gated hard runs gained.

    .venv/bin/python experiments/band_value/prereg_exploratory.py [--results DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from prereg_analysis import BASE, PRIMARY, run_means, t_sf, welch
from progress import wilson
from signal_vs_gain import permutation_p, ranks, spearman

HERE = Path(__file__).resolve().parent
RESAMPLES = 100_000
BOOTSTRAP = 10_000
SEED = 20261129


# --- the other tests of the primary ----------------------------------------------------------------------

def _shuffled(x: np.ndarray, na: int, resamples: int, seed: int):
    """Label shuffles of the pooled runs, in blocks: (first arm's values, second arm's values) per block."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < resamples:
        k = min(20_000, resamples - done)
        perm = x[np.argsort(rng.random((k, len(x))), axis=1)]
        yield perm[:, :na], perm[:, na:]
        done += k


def mean_permutation_p(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES,
                       seed: int = SEED) -> float:
    """One-sided permutation p of mean(a) > mean(b) with the plain difference of means as the statistic."""
    x = np.asarray([*a, *b], dtype=float)
    observed = float(np.mean(a) - np.mean(b))
    hits = sum(int((pa.mean(axis=1) - pb.mean(axis=1) >= observed - 1e-12).sum())
               for pa, pb in _shuffled(x, len(a), resamples, seed))
    return (1 + hits) / (1 + resamples)


def rank_sum_permutation_p(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES,
                           seed: int = SEED) -> float:
    """One-sided Mann-Whitney test of a > b: the permutation p of the first arm's rank sum (ties share ranks)."""
    r = ranks(np.asarray([*a, *b], dtype=float))
    observed = float(r[: len(a)].sum())
    hits = sum(int((ra.sum(axis=1) >= observed - 1e-9).sum()) for ra, _ in _shuffled(r, len(a), resamples, seed))
    return (1 + hits) / (1 + resamples)


def primary_under_other_tests(a: Sequence[float], b: Sequence[float]) -> dict:
    t, df, _ = welch(a, b)
    return {"welch_t_distribution": t_sf(t, df), "mean_difference_permutation": mean_permutation_p(a, b),
            "mann_whitney_permutation": rank_sum_permutation_p(a, b)}


# --- signal --------------------------------------------------------------------------------------------

def train_logs(results: Path) -> dict[str, dict]:
    """run name -> its ``train_log.json`` (the runs' folders keep a copy; the base policy has none)."""
    return {p.parent.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(results.glob("*/train_log.json")) if p.parent.name != BASE}


def logged_runs(means: dict[str, dict[str, float]], logs: dict[str, dict]):
    """(arm, its runs that have a training log, in ``means``' order) for every trained arm."""
    for arm, runs in means.items():
        if arm not in (BASE, "_items"):
            yield arm, [r for r in runs if r in logs]


def signal(means: dict[str, dict[str, float]], logs: dict[str, dict]) -> dict:
    out = {}
    for arm, names in logged_runs(means, logs):
        per_run = [logs[r]["groups_with_signal"] for r in names]
        groups = sum(logs[r]["groups"] for r in names)
        res = {"runs_with_log": len(per_run), "groups": groups, "groups_with_signal": sum(per_run),
               "per_run_mean": float(np.mean(per_run)) if per_run else None,
               "per_run_range": [min(per_run), max(per_run)] if per_run else None,
               "share": sum(per_run) / groups if groups else None, "share_ci95": wilson(sum(per_run), groups)}
        gated = [logs[r]["signal_gate"] for r in names if "signal_gate" in logs[r]]
        if gated:
            res["gate"] = {"steps_taken": [g["steps_taken"] for g in gated],
                           "groups_drawn": [g["steps_taken"] + g["groups_skipped"] for g in gated]}
        out[arm] = res
    return out


def adjusted_difference(change: np.ndarray, is_first: np.ndarray, sig: np.ndarray, *,
                        resamples: int = BOOTSTRAP, seed: int = SEED) -> dict:
    """Least squares ``change ~ 1 + is_first + sig``: the arm coefficient, with a 95 % percentile bootstrap
    interval that resamples runs within each arm (so every resample keeps both arms' sizes)."""

    def coef(idx: np.ndarray) -> float:
        x = np.column_stack([np.ones(len(idx)), is_first[idx], sig[idx]])
        return float(np.linalg.lstsq(x, change[idx], rcond=None)[0][1])

    rng = np.random.default_rng(seed)
    first, second = np.flatnonzero(is_first), np.flatnonzero(~is_first)
    boots = [coef(np.concatenate([rng.choice(first, len(first)), rng.choice(second, len(second))]))
             for _ in range(resamples)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"difference": coef(np.arange(len(change))), "ci95_bootstrap": [float(lo), float(hi)]}


def signal_against_gain(means: dict[str, dict[str, float]], logs: dict[str, dict]) -> dict:
    base = next(iter(means[BASE].values()))
    out: dict = {"per_arm": {}}
    for arm, names in logged_runs(means, logs):
        if len(names) < 3:
            continue
        sig = np.array([logs[r]["groups_with_signal"] for r in names], dtype=float)
        change = np.array([means[arm][r] - base for r in names])
        if np.ptp(sig) == 0:  # every run had the same count (the gate fixes hard_signal's): rho is undefined
            out["per_arm"][arm] = {"runs": len(names), "rho": None, "p": None, "constant": int(sig[0])}
            continue
        out["per_arm"][arm] = {"runs": len(names), "rho": spearman(sig, change),
                               "p": permutation_p(spearman, sig, change, None, seed=SEED)}
    better, worse = PRIMARY
    names = [(r, arm == better) for arm in PRIMARY for r in means.get(arm, {}) if r in logs]
    if names and {f for _, f in names} == {True, False}:
        change = np.array([means[better if f else worse][r] - base for r, f in names])
        is_first = np.array([f for _, f in names])
        sig = np.array([logs[r]["groups_with_signal"] for r, _ in names], dtype=float)
        out["adjusted"] = {"contrast": f"{better} - {worse}, groups with a signal held fixed",
                           **adjusted_difference(change, is_first, sig)}
        out["support"] = fit_support(change, is_first, sig, means, logs, base)
    return out


def fit_support(change: np.ndarray, is_first: np.ndarray, sig: np.ndarray, means: dict[str, dict[str, float]],
                logs: dict[str, dict], base: float, *, at: int = 16) -> dict:
    """What the adjusted difference rests on: the second arm's runs with at least the first arm's median signal
    count, and the change the fits predict for a second-arm run with ``at`` groups with a signal (the pooled fit
    ``change ~ 1 + arm + signal`` and a line over the second arm alone), beside the gated arm's observed mean."""
    x = np.column_stack([np.ones(len(change)), is_first, sig])
    b = np.linalg.lstsq(x, change, rcond=None)[0]
    slope, intercept = np.polyfit(sig[~is_first], change[~is_first], 1)
    quartile, median = (float(q) for q in np.percentile(sig[is_first], [25, 50]))
    gated = {r: means["hard_signal"][r] - base for r in means.get("hard_signal", {}) if r in logs}
    second = sig[~is_first]
    return {"first_arm_signal_quartile": quartile, "second_arm_runs_at_or_above_quartile": int((second >= quartile).sum()),
            "first_arm_median_signal": median, "second_arm_runs_at_or_above": int((sig[~is_first] >= median).sum()),
            "second_arm_runs": int((~is_first).sum()), "at": at,
            "predicted_pooled": float(b[0] + b[2] * at), "predicted_second_arm_only": float(intercept + slope * at),
            "gated_runs": len(gated), "gated_observed": float(np.mean(list(gated.values()))) if gated else None}


def explore(results: Path) -> dict:
    means, logs = run_means(results), train_logs(results)
    better, worse = PRIMARY
    return {"exploratory": True, "signal": signal(means, logs),
            "primary_under_other_tests": primary_under_other_tests(list(means[better].values()),
                                                                   list(means[worse].values())),
            "signal_against_gain": signal_against_gain(means, logs)}


def markdown(res: dict) -> str:
    lines = ["*Exploratory: none of these figures is a pre-registered test.*", "",
             "| arm | runs | groups with a signal a run (mean, range) | share of all groups [95 %] | "
             "groups drawn (hard_signal's gate) |", "|---|---|---|---|---|"]
    for arm, s in res["signal"].items():
        gate = s.get("gate")
        drawn = "" if gate is None else (f"{np.mean(gate['groups_drawn']):.0f} a run "
                                         f"({min(gate['groups_drawn'])}-{max(gate['groups_drawn'])})")
        lo_hi = s["per_run_range"]
        per_run = "" if lo_hi is None else f"{s['per_run_mean']:.1f} ({lo_hi[0]}-{lo_hi[1]})"
        share = "" if s["share"] is None else f"{s['share']:.2f} [{s['share_ci95'][0]:.2f}, {s['share_ci95'][1]:.2f}]"
        lines.append(f"| {arm} | {s['runs_with_log']} | {per_run} | {share} | {drawn} |")
    o = res["primary_under_other_tests"]
    lines += ["", f"The primary ({PRIMARY[0]} > {PRIMARY[1]}), one-sided p under other tests: Welch's t-distribution "
              f"{o['welch_t_distribution']:.4f}, permutation of the mean difference {o['mean_difference_permutation']:.4f}, "
              f"Mann-Whitney (permutation) {o['mann_whitney_permutation']:.4f}.", ""]
    g = res["signal_against_gain"]
    lines += ["| arm | runs | Spearman rho, groups with a signal vs held-out change | p (permutation, two-sided) |",
              "|---|---|---|---|"]
    lines += [f"| {arm} | {x['runs']} | undefined: every run had {x['constant']} |  |" if x["rho"] is None else
              f"| {arm} | {x['runs']} | {x['rho']:+.2f} | {x['p']:.3f} |" for arm, x in g["per_arm"].items()]
    if "adjusted" in g:
        a = g["adjusted"]
        lines += ["", f"{a['contrast']} (least squares): {a['difference']:+.3f}, bootstrap 95 % "
                  f"[{a['ci95_bootstrap'][0]:+.3f}, {a['ci95_bootstrap'][1]:+.3f}]."]
    if "support" in g:
        s = g["support"]
        lines += ["", f"Its support: of {s['second_arm_runs']} {PRIMARY[1]} runs, "
                  f"{s['second_arm_runs_at_or_above_quartile']} had "
                  f"at least the {PRIMARY[0]} runs' lower quartile of {s['first_arm_signal_quartile']:g} groups with a signal "
                  f"and {s['second_arm_runs_at_or_above']} at least their median of {s['first_arm_median_signal']:g}. "
                  f"At {s['at']} such groups the fits predict {s['predicted_pooled']:+.3f} (pooled) and "
                  f"{s['predicted_second_arm_only']:+.3f} ({PRIMARY[1]} runs alone) for a {PRIMARY[1]} run"
                  + ("" if s["gated_observed"] is None else
                     f"; the {s['gated_runs']} gated hard runs, which had {s['at']}, gained {s['gated_observed']:+.3f}")
                  + "."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=HERE / "prereg" / "results", help="default: %(default)s")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.results.is_dir():
        raise SystemExit(f"{args.results}: no results yet; the design's runs write them (PREREGISTRATION.md)")
    res = explore(args.results)
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
