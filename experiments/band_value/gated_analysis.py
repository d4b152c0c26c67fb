"""The pre-registered analysis of the gated band-value design (PREREGISTRATION_GATED.md).

Its sha256 is recorded in PREREGISTRATION_GATED.md before the first run of the design
(``tests/test_band_value_design.py`` checks that the two agree): an edit to this file after that shows.

Both arms filter online the way DAPO does: a run's optimizer steps only on GRPO groups whose rewards differ
(``signal_gate.py``), 16 such steps a run, the next drawn item tried after a group without a signal. Each run
draws its own items, so the run is the unit. A run's figure is its mean held-out pass rate over the items every
measured policy has.

- **Primary**: learnable > random (random: the whole pool, drawn within level to the learnable band's level
  mix), the studentized (Welch-t) permutation test, one-sided, 100,000 seeded shuffles, alpha 0.05.
- **Equivalence reading**, pre-registered beside it: "the band adds less than +0.05 over filtering" when the
  one-sided 95 % upper bound of the difference (Welch) is below +0.05. The design decides either way: the
  primary, this reading, both (a real but small gain) or, with the probability the power table gives, neither.
- **Achieved power**: at the spreads the runs show, the probability that this allocation decides the primary
  at a true +0.05, and the equivalence reading at a true 0 (Welch's t, normal runs, 20,000 seeded simulations).
- **Secondary**: groups drawn per optimizer step in each arm (a run's groups drawn / its steps taken: what the
  gate paid for a step), each arm's mean with its t 95 % interval, and random − learnable with Welch's 95 %
  interval, in groups and in rollouts (x the GRPO group size, a step and a 16-step run): the rollouts the band
  saves a trainer that filters online. Runs that reached the cap on groups before 16 steps are counted.
- Nothing else is confirmatory.

    .venv/bin/python experiments/band_value/gated_analysis.py [--results DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from prereg_analysis import t_ppf, t_sf, welch, welch_interval, welch_permutation_p

HERE = Path(__file__).resolve().parent
ALPHA = 0.05
MARGIN = 0.05            # the equivalence reading's bound: the band adds less than this over filtering
SEED = 20261202
SIMS = 20_000
STEPS = 16               # optimizer steps a run (band_value.yaml's grpo.steps)
GROUP = 8                # completions a group (band_value.yaml's grpo.num_generations)
PRIMARY = ("learnable", "random")
BASE = "base"
RUN = re.compile(r"(.+)-d(\d+)-s(\d+)")


def run_means(results: Path) -> dict[str, dict[str, float]]:
    """arm -> {run: mean held-out pass rate over the items the base and every run measured}; ``base`` too."""
    import pyarrow.parquet as pq

    rates: dict[str, dict[str, float]] = {}
    for folder in sorted(p for p in results.iterdir() if (p / "difficulty").is_dir()):
        rows = pq.read_table(folder / "difficulty", columns=["problem_id", "pass_rate"]).to_pylist()
        rates[folder.name] = {r["problem_id"]: r["pass_rate"] for r in rows}
    if BASE not in rates:
        raise SystemExit(f"{results}/base: no base measurement; measure the base policy first")
    common = sorted(set.intersection(*(set(r) for r in rates.values())))
    out: dict[str, dict[str, float]] = {}
    for name, r in rates.items():
        m = RUN.fullmatch(name)
        if name != BASE and not m:
            raise SystemExit(f"{results / name}: not a run of the design (<arm>-d<run>-s<run>) nor base")
        out.setdefault(BASE if name == BASE else m.group(1), {})[name] = float(np.mean([r[p] for p in common]))
    out["_items"] = {"count": float(len(common))}
    return out


def gate_counts(results: Path) -> dict[str, dict[str, int]]:
    """run -> the gate's counts from its training log: steps taken and groups drawn (taken + skipped)."""
    out = {}
    for p in sorted(results.glob("*/train_log.json")):
        g = json.loads(p.read_text(encoding="utf-8")).get("signal_gate")
        if g is None:
            raise SystemExit(f"{p}: no signal_gate counts; every run of this design is gated")
        out[p.parent.name] = {"steps_taken": g["steps_taken"], "groups_drawn": g["steps_taken"] + g["groups_skipped"]}
    return out


def upper_one_sided(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> float:
    """Welch's one-sided ``level`` upper bound of mean(a) - mean(b)."""
    _, df, se = welch(a, b)
    return float(np.mean(a) - np.mean(b)) + t_ppf(level, df) * se


def quantile(df: np.ndarray, q: float = 1 - ALPHA, *, n_a: int, n_b: int) -> np.ndarray:
    """Student's t ``q``-quantile at each Welch df, interpolated (in log df) from exact quantiles on a grid spanning
    the df these sizes can give (min(n) - 1 to n_a + n_b - 2): both readings compare against it."""
    grid = np.geomspace(min(n_a, n_b) - 1, n_a + n_b - 2, 64)
    exact = np.array([t_ppf(q, float(g)) for g in grid])
    return np.interp(np.log(df), np.log(grid), exact)


def simulated(sd_a: float, sd_b: float, n_a: int, n_b: int, *, effect: float, what: str, sims: int = SIMS,
              seed: int = SEED) -> float:
    """Share of simulated experiments (normal runs with these sds, a true difference ``effect``) in which
    ``what`` holds: ``primary`` (Welch's one-sided p < alpha) or ``equivalence`` (upper bound < MARGIN)."""
    rng = np.random.default_rng(seed)
    a = effect + rng.normal(0, sd_a, (sims, n_a))
    b = rng.normal(0, sd_b, (sims, n_b))
    va, vb = a.var(axis=1, ddof=1) / n_a, b.var(axis=1, ddof=1) / n_b
    se = np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
    d = a.mean(axis=1) - b.mean(axis=1)
    q = quantile(df, n_a=n_a, n_b=n_b)
    if what == "primary":
        return float(np.mean(d / se > q))
    if what == "equivalence":
        return float(np.mean(d + q * se < MARGIN))
    if what == "neither":
        return float(np.mean(~(d / se > q) & ~(d + q * se < MARGIN)))
    raise ValueError(f"what: primary, equivalence or neither, got {what!r}")


def mean_interval(x: Sequence[float]) -> list[float]:
    x = np.asarray(x, float)
    if len(x) < 2:
        return [float("nan"), float("nan")]
    h = t_ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return [float(x.mean() - h), float(x.mean() + h)]


def analyse(means: dict[str, dict[str, float]], gates: dict[str, dict[str, int]]) -> dict:
    arms = {a: v for a, v in means.items() if a not in (BASE, "_items")}
    base = next(iter(means[BASE].values()))
    better, worse = PRIMARY
    a, b = list(arms[better].values()), list(arms[worse].values())
    t, df, se = welch(a, b)
    upper = upper_one_sided(a, b)
    sd_a, sd_b = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    out = {"items": int(means["_items"]["count"]), "base": base,
           "arms": {k: {"runs": len(v), "mean_change": float(np.mean(list(v.values()))) - base,
                        "sd": float(np.std(list(v.values()), ddof=1)) if len(v) > 1 else None}
                    for k, v in arms.items()}}
    p = welch_permutation_p(a, b)
    out["primary"] = {"contrast": f"{better} > {worse}", "runs": [len(a), len(b)], "diff": float(np.mean(a) - np.mean(b)),
                      "welch_t": t, "df": df, "se": se, "p_one_sided": p, "welch_p_one_sided": t_sf(t, df),
                      "ci90": welch_interval(a, b, 0.90), "ci95": welch_interval(a, b, 0.95), "decided": p < ALPHA}
    out["equivalence"] = {"reading": f"{better} adds less than {MARGIN:+.2f} over {worse}", "margin": MARGIN,
                          "upper_one_sided_95": upper, "decided": upper < MARGIN}
    out["achieved_power"] = {"sd": [sd_a, sd_b],
                             "primary_at_margin": simulated(sd_a, sd_b, len(a), len(b), effect=MARGIN, what="primary"),
                             "equivalence_at_zero": simulated(sd_a, sd_b, len(a), len(b), effect=0.0,
                                                              what="equivalence")}
    per_step: dict[str, list[float]] = {}
    capped: dict[str, int] = {}
    for arm, runs in arms.items():
        missing = [r for r in runs if r not in gates]
        if missing:
            raise SystemExit(f"runs without a training log: {missing}")
        per_step[arm] = [gates[r]["groups_drawn"] / max(gates[r]["steps_taken"], 1) for r in runs]
        capped[arm] = sum(gates[r]["steps_taken"] < STEPS for r in runs)
    d = float(np.mean(per_step[worse]) - np.mean(per_step[better]))
    spread = np.std(per_step[worse]) + np.std(per_step[better])
    lo, hi = welch_interval(per_step[worse], per_step[better], 0.95) if spread > 0 else (d, d)
    out["groups_per_step"] = {
        "arms": {arm: {"mean": float(np.mean(v)), "ci95": mean_interval(v), "runs_capped": capped[arm]}
                 for arm, v in per_step.items()},
        "saved": {"contrast": f"{worse} - {better}", "groups_per_step": d, "ci95": [lo, hi],
                  "rollouts_per_step": GROUP * d, "rollouts_per_step_ci95": [GROUP * lo, GROUP * hi],
                  "rollouts_per_run": GROUP * STEPS * d, "rollouts_per_run_ci95": [GROUP * STEPS * lo, GROUP * STEPS * hi]}}
    return out


def markdown(res: dict) -> str:
    p, e, w = res["primary"], res["equivalence"], res["achieved_power"]
    g = res["groups_per_step"]
    lines = [f"Base policy: {res['base']:.3f} on {res['items']} held-out items.", "",
             "| arm | runs | mean change vs base | sd over runs | groups drawn an optimizer step [95 %] | runs capped |",
             "|---|---|---|---|---|---|"]
    for arm, x in res["arms"].items():
        s = g["arms"][arm]
        lines.append(f"| {arm} | {x['runs']} | {x['mean_change']:+.3f} | "
                     f"{'' if x['sd'] is None else format(x['sd'], '.3f')} | "
                     f"{s['mean']:.2f} [{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] | {s['runs_capped']} |")
    lines += ["", "| reading (confirmatory) | runs | difference | Welch 90 % | Welch 95 % | p (Welch-t permutation, "
              "one-sided) | one-sided 95 % upper bound | decided |", "|---|---|---|---|---|---|---|---|",
              f"| {p['contrast']} | {p['runs'][0]} / {p['runs'][1]} | {p['diff']:+.3f} | "
              f"[{p['ci90'][0]:+.3f}, {p['ci90'][1]:+.3f}] | [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] | "
              f"{p['p_one_sided']:.4f} | {e['upper_one_sided_95']:+.3f} | primary: {'yes' if p['decided'] else 'no'}; "
              f"{e['reading']}: {'yes' if e['decided'] else 'no'} |", "",
              f"Achieved power at the runs' sds ({w['sd'][0]:.3f}, {w['sd'][1]:.3f}): the primary at a true "
              f"{MARGIN:+.2f}: {w['primary_at_margin']:.2f}; the equivalence reading at a true 0: "
              f"{w['equivalence_at_zero']:.2f}.", ""]
    s = g["saved"]
    lines.append(f"Groups drawn an optimizer step, {s['contrast']}: {s['groups_per_step']:+.2f} "
                 f"[{s['ci95'][0]:+.2f}, {s['ci95'][1]:+.2f}]; rollouts {s['rollouts_per_step']:+.1f} a step "
                 f"[{s['rollouts_per_step_ci95'][0]:+.1f}, {s['rollouts_per_step_ci95'][1]:+.1f}], "
                 f"{s['rollouts_per_run']:+.0f} a {STEPS}-step run "
                 f"[{s['rollouts_per_run_ci95'][0]:+.0f}, {s['rollouts_per_run_ci95'][1]:+.0f}].")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=HERE / "gated" / "results", help="default: %(default)s")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.results.is_dir():
        raise SystemExit(f"{args.results}: no results yet; the design's runs write them (PREREGISTRATION_GATED.md)")
    res = analyse(run_means(args.results), gate_counts(args.results))
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
