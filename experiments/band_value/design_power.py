"""What the pre-registered design needs: power simulated from the committed 50 runs, and their re-analysis.

Reads ``results/`` (git holds it: each run's held-out difficulty table) and the held-out items' ids (the
``heldout`` source as params.yaml generates it), so it needs neither DVC's cache nor the report. Prints:

1. the committed 50 runs re-analysed with the runs' draws in view: each arm's mean per item draw, the
   learnable - hard contrast per draw, and its p by four tests (the report's mean-difference permutation,
   Welch's t, the Welch-t permutation, Mann-Whitney), all two-sided as the report's was;
   online - learnable: Welch's 90 % interval and TOST p at margins;
2. each arm's spread for a run with its *own* item draw: the between-draw and within-draw variance
   components (one-way ANOVA over the 2 draws: 1 df between, so a rough figure) and their sum;
3. the power of the primary test (learnable > hard, one-sided 0.05) for allocations and true
   differences, by simulation under two models of a run's spread: ``normal`` (each arm's run sd the
   estimated fresh-draw sd) and ``resampled`` (a draw effect, ± the estimated between-draw sd, plus a
   within-draw residual resampled from the arm's own 10 runs: keeps the hard arm's skew); at the
   chosen allocation the Welch-t permutation test itself (:mod:`prereg_analysis`) is simulated too;
4. the budget: minutes a run, from the runs' training logs and the measurement's share.

    .venv/bin/python experiments/band_value/design_power.py [--sims N] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import prereg_analysis as pa  # beside this script

HERE = Path(__file__).resolve().parent
RUN = re.compile(r"(.+)-d(\d+)-s(\d+)")
PESSIMISTIC = math.sqrt(9 / 5.380)  # sqrt(df / chi2_{0.20}(df)), df = 9: 10 runs give an sd 1.29x too small 1 time in 5
MODELS = ("normal", "resampled", "pessimistic")


def committed_runs(root: Path = HERE) -> list[dict]:
    """Each committed run's arm, draw, seed, held-out and OOD change against the base (mean over the set's
    items), GRPO seconds and groups with a signal."""
    import pyarrow.parquet as pq

    from pipeline.config import load_params
    from pipeline.ingest.synthetic import SyntheticOptions, generate
    from pipeline.keys import problem_id

    params = load_params(root / "params.yaml")
    ids = {s.name: [problem_id(i.question) for i in generate(SyntheticOptions(**s.options))]
           for s in params.ingest.sources if s.name in ("heldout", "ood")}

    def table(folder: Path) -> dict[str, dict]:
        return {r["problem_id"]: r for r in pq.read_table(folder / "difficulty", columns=["problem_id", "pass_rate", "n"])
                .to_pylist()}

    def mean_rate(folder: Path, name: str = "heldout") -> float:
        rows = table(folder)
        return float(np.mean([rows[p]["pass_rate"] for p in ids[name]]))

    def sampling_var(folder: Path) -> float:
        """The variance of the run's held-out mean from sampling k completions an item (unbiased binomial)."""
        rows = [table(folder)[p] for p in ids["heldout"]]
        return sum(r["pass_rate"] * (1 - r["pass_rate"]) / max(r["n"] - 1, 1) for r in rows) / len(rows) ** 2

    base = mean_rate(root / "results" / "base")
    base_ood = mean_rate(root / "results" / "base", "ood")
    out = []
    for folder in sorted((root / "results").iterdir()):
        m = RUN.fullmatch(folder.name)
        if not m:
            continue
        log = json.loads((folder / "train_log.json").read_text(encoding="utf-8"))
        out.append({"arm": m.group(1), "draw": int(m.group(2)), "seed": int(m.group(3)),
                    "delta": mean_rate(folder) - base, "ood_delta": mean_rate(folder, "ood") - base_ood,
                    "sampling_var": sampling_var(folder),
                    "seconds": log["seconds"],
                    "groups_with_signal": log.get("groups_with_signal")})
    return out


def by_arm(runs: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in sorted(runs, key=lambda r: (r["arm"], r["draw"], r["seed"])):
        out.setdefault(r["arm"], []).append(r["delta"])
    return out


def components(runs: list[dict], arm: str) -> dict:
    """One-way ANOVA over the arm's draws: within-draw variance, between-draw variance component (floored at 0)
    and their sum, the variance of a run with its own draw."""
    draws: dict[int, list[float]] = {}
    for r in runs:
        if r["arm"] == arm:
            draws.setdefault(r["draw"], []).append(r["delta"])
    groups = list(draws.values())
    n = statistics.fmean(len(g) for g in groups)
    within = statistics.fmean(statistics.variance(g) for g in groups)
    means = [statistics.fmean(g) for g in groups]
    between = max(0.0, statistics.variance(means) - within / n)
    return {"draw_means": means, "sd_within": math.sqrt(within), "sd_between": math.sqrt(between),
            "sd_fresh": math.sqrt(within + between),
            "residuals": [x - statistics.fmean(g) for g in groups for x in g],
            "residual_scale": math.sqrt(n / (n - 1))}


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact Mann-Whitney p: the report's exact permutation test on the pooled ranks."""
    from signal_vs_gain import ranks

    from bandvalue.report import permutation_test

    r = ranks(np.asarray([*a, *b], dtype=float))  # average ranks: two runs tie at +0.139
    return permutation_test(r[:len(a)], r[len(a):])


def reanalysis(runs: list[dict]) -> dict:
    from bandvalue.report import permutation_test

    arms = by_arm(runs)
    learn, hard, online = arms["learnable"], arms["hard"], arms["online"]
    per_draw = {}
    for d in sorted({r["draw"] for r in runs}):
        m = {a: statistics.fmean(r["delta"] for r in runs if r["arm"] == a and r["draw"] == d) for a in arms}
        per_draw[d] = {"arm_means": m, "learnable_minus_hard": m["learnable"] - m["hard"]}
    t, df, _ = pa.welch(learn, hard)
    from bandvalue.report import PREDICTIONS, holm

    ood = {a: [r["ood_delta"] for r in sorted(runs, key=lambda r: (r["draw"], r["seed"])) if r["arm"] == a]
           for a in arms}
    ood_p = [permutation_test(ood[b], ood[w]) for b, w in PREDICTIONS]
    return {
        "per_draw": per_draw,
        "sd": {a: statistics.stdev(v) for a, v in arms.items()},
        "learnable_vs_hard_two_sided": {
            "diff": statistics.fmean(learn) - statistics.fmean(hard),
            "mean_difference_permutation": permutation_test(learn, hard),
            "welch_t": 2 * pa.t_sf(abs(t), df),
            "welch_t_permutation": min(1.0, 2 * pa.welch_permutation_p(learn, hard)),
            "mann_whitney": mann_whitney_p(learn, hard)},
        "online_vs_learnable": {
            "diff": statistics.fmean(online) - statistics.fmean(learn),
            "welch_ci90": pa.welch_interval(online, learn, 0.90),
            "welch_ci_bonferroni8": pa.welch_interval(online, learn, 1 - 2 * 0.05 / 8),
            "tost_p": {str(m): pa.tost(online, learn, m) for m in (0.02, 0.03, 0.04, 0.05, 0.078)}},
        "sampling_share": sum(statistics.fmean(r["sampling_var"] for r in runs if r["arm"] == a) for a in ("learnable", "hard"))
        / (statistics.variance(learn) + statistics.variance(hard)),
        "ood": {"mean_change": {a: statistics.fmean(v) for a, v in ood.items()},
                "min_p": min(ood_p), "min_p_holm": min(holm(ood_p))},
    }


# --- the simulation ----------------------------------------------------------------------------------

def draw_runs(rng: np.random.Generator, model: str, comp: dict, n: int, sims: int) -> np.ndarray:
    """sims x n run-level deviations from the arm's mean, each run with its own item draw."""
    if model in ("normal", "pessimistic"):  # pessimistic: the sd's one-sided 80 % upper bound from 9 df, x 1.29
        return rng.normal(0.0, comp["sd_fresh"] * (PESSIMISTIC if model == "pessimistic" else 1.0), size=(sims, n))
    res = np.asarray(comp["residuals"]) * comp["residual_scale"]
    draw = comp["sd_between"] * rng.choice([-1.0, 1.0], size=(sims, n))
    return draw + rng.choice(res, size=(sims, n))


def power(comp_a: dict, comp_b: dict, n_a: int, n_b: int, effect: float, *, model: str, sims: int,
          alpha: float = pa.ALPHA, test: str = "welch", seed: int = 0, resamples: int = 999) -> float:
    """Share of simulated experiments whose one-sided test of a > b rejects at ``alpha``; arm a's true mean
    ``effect`` above b's. ``test``: ``welch`` (Welch's t, its t distribution) or ``permutation`` (the Welch-t
    permutation test, ``resamples`` shuffles)."""
    rng = np.random.default_rng(seed)
    a = effect + draw_runs(rng, model, comp_a, n_a, sims)
    b = draw_runs(rng, model, comp_b, n_b, sims)
    hits = 0
    for i in range(sims):
        if test == "welch":
            p = pa.welch_p(a[i], b[i])
        else:
            p = pa.welch_permutation_p(a[i], b[i], resamples=resamples, seed=seed + i)
        hits += p < alpha
    return hits / sims


def neyman(total: int, sd_a: float, sd_b: float) -> tuple[int, int]:
    """Runs per arm minimising the difference's variance for ``total`` runs: proportional to each arm's sd."""
    n_a = max(2, round(total * sd_a / (sd_a + sd_b)))
    return n_a, total - n_a


def run_minutes(runs: list[dict], measure_seconds: float, heldout_share: float, signal_share: float) -> dict:
    """Minutes a run of the design takes: its GRPO seconds (the committed runs' median per arm) plus the
    measurement, of which only the held-out share is kept. ``hard_signal`` draws 1 / signal_share groups a
    step (the hard arm's share of groups with a signal), each costing a hard step."""
    per_arm = {a: statistics.median(r["seconds"] for r in runs if r["arm"] == a) for a in {r["arm"] for r in runs}}
    per_arm["hard_signal"] = per_arm["hard"] / signal_share
    return {a: (s + measure_seconds * heldout_share) / 60 for a, s in per_arm.items()}


def design(path: Path = HERE / "prereg" / "design.yaml") -> dict:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=2000, help="simulated experiments per cell (default %(default)s)")
    ap.add_argument("--perm-sims", type=int, default=1000, help="cells simulated with the permutation test itself")
    ap.add_argument("--measure-seconds", type=float, default=248.0,
                    help="one policy's held-out + OOD measurement and bookkeeping: the median commit gap between "
                         "consecutive committed runs less their GRPO seconds (PREREGISTRATION.md)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = committed_runs()
    plan = design()["runs"]
    re_ = reanalysis(runs)
    comps = {a: components(runs, a) for a in ("learnable", "hard", "random")}
    comps["hard_signal"] = comps["hard"]  # unmeasured: assumed to spread like the hard arm
    signal = sum(r["groups_with_signal"] for r in runs if r["arm"] == "hard") / (16 * sum(r["arm"] == "hard" for r in runs))
    mins = run_minutes(runs, args.measure_seconds, heldout_share=126 / 182, signal_share=signal)
    hours = sum(n * mins[a] for a, n in plan.items()) / 60
    cells = []
    for total in (48, 64, 72, 88):
        n_l, n_h = neyman(total, comps["learnable"]["sd_fresh"], comps["hard"]["sd_fresh"])
        for effect in (0.05, 0.078):
            for model in MODELS:
                cells.append({"runs": [n_l, n_h], "effect": effect, "model": model,
                              "power_welch": power(comps["learnable"], comps["hard"], n_l, n_h, effect, model=model,
                                                   sims=args.sims),
                              "hours": (n_l * mins["learnable"] + n_h * mins["hard"]) / 60})
    checks = []
    for n_l, n_h in ((plan["learnable"], plan["hard"]), (16, 56)):
        for effect in (0.0, 0.05, 0.078):
            for model in MODELS:
                checks.append({"runs": [n_l, n_h], "effect": effect, "model": model,
                               "power_permutation": power(comps["learnable"], comps["hard"], n_l, n_h, effect,
                                                          model=model, sims=args.perm_sims, test="permutation")})
    secondary = []  # at Holm's first step (0.05 / 2): the power of each is at least this
    for worse, effects in (("random", (0.043,)), ("hard_signal", (0.05, 0.078))):
        for effect in effects:
            for model in MODELS:
                secondary.append({"contrast": f"learnable > {worse}", "runs": [plan["learnable"], plan[worse]],
                                  "effect": effect, "model": model,
                                  "power_welch_holm_first": power(comps["learnable"], comps[worse], plan["learnable"],
                                                                  plan[worse], effect, model=model, sims=args.sims,
                                                                  alpha=pa.ALPHA / 2)})
    res = {"reanalysis": re_, "components": {a: {k: v for k, v in c.items() if k != "residuals"}
                                             for a, c in comps.items()},
           "hard_signal_share": signal, "minutes_per_run": mins, "design": plan, "design_hours": hours,
           "power": cells, "power_permutation": checks, "power_secondary": secondary}
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(json.dumps({k: res[k] for k in ("reanalysis", "components", "hard_signal_share", "minutes_per_run",
                                          "design", "design_hours")}, indent=1))
    print("\n| runs learnable / hard | true difference | model | power (Welch t, one-sided 0.05) | hours |")
    print("|---|---|---|---|---|")
    for c in cells:
        print(f"| {c['runs'][0]} / {c['runs'][1]} | {c['effect']:+.3f} | {c['model']} | {c['power_welch']:.3f} | "
              f"{c['hours']:.1f} |")
    print("\n| runs learnable / hard | true difference | model | rejection rate (Welch-t permutation, one-sided 0.05) |")
    print("|---|---|---|---|")
    for c in checks:
        print(f"| {c['runs'][0]} / {c['runs'][1]} | {c['effect']:+.3f} | {c['model']} | {c['power_permutation']:.3f} |")
    print("\n| secondary | runs | true difference | model | power (Welch t, one-sided 0.025) |\n|---|---|---|---|---|")
    for c in secondary:
        print(f"| {c['contrast']} | {c['runs'][0]} / {c['runs'][1]} | {c['effect']:+.3f} | {c['model']} | "
              f"{c['power_welch_holm_first']:.3f} |")


if __name__ == "__main__":
    main()
