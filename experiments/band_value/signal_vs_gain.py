"""Does a run's count of GRPO groups with a signal predict how far its held-out pass rate moved? From the report.

The band-value hypothesis runs through the signal: a group whose 8 rewards are all equal has no advantage
and, with ``beta: 0``, gives no gradient, so an arm that keeps more groups with a signal should learn more.
This reads the report's JSON (``data/report/band_value.json``, or ``--report``) and, per measured set, sets
each run's groups with a signal (of its 16) beside its change in pass rate against the base policy:

- Spearman's rho over all runs, with a two-sided permutation p-value (10,000 seeded shuffles), for the
  change and for its size ``|change|`` (a run that moves far either way);
- the same within arms (each arm's rho, and a permutation that shuffles only within arms, so that the
  arms' different signal levels do not make the correlation);
- the mean change of the runs with few signal groups (<= 4) and with many (>= 10).

Nothing is trained or measured here: it reads the figures the report already holds.

    .venv/bin/python experiments/band_value/signal_vs_gain.py [--report PATH] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHUFFLES = 10_000


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), as Spearman's rho needs."""
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):
        tie = x == v
        r[tie] = r[tie].mean()
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def within_rho(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    """Mean of the per-group Spearman rhos (groups where both vary)."""
    rhos = [spearman(x[groups == g], y[groups == g]) for g in np.unique(groups)]
    rhos = [r for r in rhos if not np.isnan(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def permutation_p(stat, x: np.ndarray, y: np.ndarray, groups: np.ndarray | None, seed: int = 0) -> float:
    """Two-sided: the share of shuffles of ``x`` (within ``groups`` if given) whose |stat| reaches the observed."""
    rng = np.random.default_rng(seed)
    observed = abs(stat(x, y))
    hits = 0
    for _ in range(SHUFFLES):
        xs = x.copy()
        if groups is None:
            rng.shuffle(xs)
        else:
            for g in np.unique(groups):
                idx = np.flatnonzero(groups == g)
                xs[idx] = rng.permutation(xs[idx])
        hits += abs(stat(xs, y)) >= observed - 1e-12
    return (hits + 1) / (SHUFFLES + 1)


def analyse(report: dict) -> dict:
    out = {}
    for name, section in report["sets"].items():
        runs = [p for p in section["policies"] if p.get("arm") not in (None, "base") and p.get("groups")]
        sig = np.array([p["groups_with_signal"] for p in runs], dtype=float)
        delta = np.array([p["delta"] for p in runs], dtype=float)
        arms = np.array([p["arm"] for p in runs])
        res = {"runs": len(runs)}
        for label, y in (("change", delta), ("abs_change", np.abs(delta))):
            res[label] = {
                "rho": spearman(sig, y),
                "p": permutation_p(spearman, sig, y, None),
                "rho_within_arms": within_rho(sig, y, arms),
                "p_within_arms": permutation_p(functools.partial(within_rho, groups=arms), sig, y, arms),
                "per_arm": {a: spearman(sig[arms == a], y[arms == a]) for a in dict.fromkeys(arms)},
            }
        few, many = sig <= 4, sig >= 10
        res["few_signal"] = {"runs": int(few.sum()), "mean_change": float(delta[few].mean()) if few.any() else None,
                             "mean_abs_change": float(np.abs(delta[few]).mean()) if few.any() else None}
        res["many_signal"] = {"runs": int(many.sum()),
                              "mean_change": float(delta[many].mean()) if many.any() else None,
                              "mean_abs_change": float(np.abs(delta[many]).mean()) if many.any() else None}
        out[name] = res
    return out


def read_report(description: str) -> tuple[dict, bool]:
    """The command line these report readers share: ``--report PATH`` (its JSON, loaded) and ``--json``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--report", type=Path, default=HERE / "data" / "report" / "band_value.json",
                    help="the report's JSON (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if not args.report.exists():
        raise SystemExit(f"{args.report}: no report yet; run `dvc repro -s experiments/band_value/dvc.yaml:report`")
    return json.loads(args.report.read_text(encoding="utf-8")), args.json


def main() -> None:
    report, as_json = read_report(__doc__.split("\n\n")[0])
    res = analyse(report)
    if as_json:
        print(json.dumps(res, indent=2))
        return
    for name, r in res.items():
        print(f"## {name} ({r['runs']} runs): groups with a signal (of 16) against the change vs base\n")
        print("| measure | Spearman rho [p, permutation] | within arms: mean rho [p, shuffled within arms] | "
              "per arm |")
        print("|---|---|---|---|")
        for label in ("change", "abs_change"):
            x = r[label]
            per = ", ".join(f"{a} {v:+.2f}" for a, v in x["per_arm"].items())
            print(f"| {label} | {x['rho']:+.2f} [{x['p']:.3f}] | {x['rho_within_arms']:+.2f} "
                  f"[{x['p_within_arms']:.3f}] | {per} |")
        for key in ("few_signal", "many_signal"):
            x = r[key]
            if x["runs"]:
                print(f"\n{key.replace('_', ' ')} ({'<= 4' if key == 'few_signal' else '>= 10'} groups): "
                      f"{x['runs']} runs, mean change {x['mean_change']:+.3f}, mean |change| "
                      f"{x['mean_abs_change']:.3f}", end="")
        print("\n")


if __name__ == "__main__":
    main()
