"""Did the pool's measurement predict which GRPO groups would have a signal? Read from the finished runs.

Every recorded GRPO group (one item, ``num_generations`` completions, in a checkpoint's ``records/``) has a
signal when its rewards differ. Before training, each arm's items were measured by passband (``n`` samples,
``n_correct`` of them correct, in ``data/arms/d<draw>/<arm>.jsonl``). From that measurement this script
predicts each group's chance of a signal, two ways:

- plug-in: the pass rate ``n_correct / n`` taken as true: P(signal) = 1 - p^g - (1 - p)^g;
- posterior: the Beta(1 + n_correct, 1 + n - n_correct) posterior of the pass rate (uniform prior), and the
  beta-binomial chance that ``g`` draws are not all equal.

and prints, per arm and per window of training steps, the realised share of groups with a signal beside the
mean predicted one. A gap that opens in the later window is the policy moving; a gap from the first steps is
the measurement's own error (8 samples an item, and for the online arm the selection of items whose measured
rate looked best: the winner's curse).

    .venv/bin/python experiments/band_value/signal_calibration.py [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from pathlib import Path

import duckdb
import yaml

HERE = Path(__file__).resolve().parent


def p_signal_plugin(c: int, n: int, g: int) -> float:
    p = c / n
    return 1.0 - p ** g - (1.0 - p) ** g


def _lbeta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def p_signal_beta(c: int, n: int, g: int, a0: float, b0: float) -> float:
    """P(signal) under the posterior Beta(a0 + c, b0 + n - c): the prior Beta(a0, b0) fitted to the population."""
    a, b = a0 + c, b0 + n - c
    return 1.0 - math.exp(_lbeta(a, b + g) - _lbeta(a, b)) - math.exp(_lbeta(a + g, b) - _lbeta(a, b))


def p_signal_posterior(c: int, n: int, g: int) -> float:
    """P(signal) under the uniform prior's posterior Beta(1 + c, 1 + n - c)."""
    return p_signal_beta(c, n, g, 1.0, 1.0)


def fit_beta_prior(measured: list[tuple[int, int]]) -> tuple[float, float]:
    """The Beta(a, b) maximising the beta-binomial likelihood of the population's (n_correct, n), on a log grid
    (a, b in [0.01, 100]): the empirical-Bayes prior (a U shape when most items are always or never solved)."""
    counts: dict[tuple[int, int], int] = {}
    for c, n in measured:
        counts[(c, n)] = counts.get((c, n), 0) + 1
    grid = [10 ** (-2 + 4 * i / 100) for i in range(101)]
    best, arg = -math.inf, (1.0, 1.0)
    for a in grid:
        for b in grid:
            ll = sum(m * (_lbeta(a + c, b + n - c) - _lbeta(a, b)) for (c, n), m in counts.items())
            if ll > best:
                best, arg = ll, (a, b)
    return arg


def measured_dir(root: Path, cfg: dict, arm: str, table: str) -> Path:
    """Where passband measured the items ``arm`` is drawn from (``table``: difficulty, rollouts): the reformulate
    stages' folder for an arm drawn from the published ``reformulated`` config, the pool's folder otherwise."""
    return root / "data" / ("reformulated" if "reformulated" in cfg["arms"][arm] else "") / table


@functools.cache
def population_prior(table: Path) -> tuple[float, float]:
    """The Beta prior fitted to every item measured in ``table`` (a difficulty folder); fitted once per folder."""
    rows = duckdb.connect().execute(f"SELECT n_correct, n FROM read_parquet('{table}/*.parquet')").fetchall()
    return fit_beta_prior(rows)


def groups(checkpoint: Path, g: int) -> list[dict]:
    """One row per recorded GRPO group: its window of steps (0, 1, ... in step order), item, correct count."""
    recs = checkpoint / "records"
    con = duckdb.connect()
    rows = con.execute(f"""
        SELECT r.policy_id, r.problem_id, r.sample_idx // {g} AS occurrence,
               count(*) AS n, sum(CASE WHEN v.status = 'correct' THEN 1 ELSE 0 END) AS correct,
               count(DISTINCT r.completion) AS distinct_texts
        FROM read_parquet('{recs / "rollouts"}/*.parquet') r
        JOIN read_parquet('{recs / "verdicts"}/*.parquet') v USING (problem_id, policy_id, sample_idx)
        GROUP BY ALL ORDER BY 1, 2, 3""").fetchall()
    starts = dict(con.execute(f"""
        SELECT policy_id, CAST(json_extract(identity, '$.steps[0]') AS INTEGER)
        FROM read_parquet('{recs / "policies"}/*.parquet')""").fetchall())
    order = {pol: i for i, pol in enumerate(sorted(starts, key=starts.get))}  # windows by first step
    out = []
    for pol, pid, _occurrence, n, correct, distinct in rows:
        out.append({"window": order[pol], "problem_id": pid, "n": n, "correct": int(correct), "distinct": distinct})
    return out


def calibration(root: Path = HERE) -> dict:
    cfg = yaml.safe_load((root / "band_value.yaml").read_text(encoding="utf-8"))
    g = cfg["grpo"]["num_generations"]
    out: dict = {"num_generations": g, "arms": {}}
    for arm in cfg["arms"]:
        cells: dict[int, dict] = {}
        runs = []
        a0, b0 = population_prior(measured_dir(root, cfg, arm, "difficulty"))
        for draw in cfg["draws"]:
            prior = {}
            for line in (root / "data" / "arms" / f"d{draw}" / f"{arm}.jsonl").read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                prior[r["problem_id"]] = (r["n_correct"], r["n"])
            for seed in cfg["seeds"]:
                ck = root / "data" / "checkpoints" / f"{arm}-d{draw}-s{seed}"
                if not (ck / "train_log.json").is_file() or not (ck / "records").is_dir():
                    continue
                runs.append(f"d{draw}-s{seed}")
                for grp in groups(ck, g):
                    if grp["n"] != g:
                        continue  # a group cut short (none expected): not a GRPO group of g completions
                    c, n = prior[grp["problem_id"]]
                    cell = cells.setdefault(grp["window"], dict.fromkeys(KEYS, 0.0))
                    cell["groups"] += 1
                    cell["signal"] += 0 < grp["correct"] < g
                    cell["plugin"] += p_signal_plugin(c, n, g)
                    cell["posterior"] += p_signal_posterior(c, n, g)
                    cell["empirical"] += p_signal_beta(c, n, g, a0, b0)
                    cell["prior_rate"] += c / n
                    cell["pass_rate"] += grp["correct"] / g
                    cell["distinct"] += grp["distinct"]
        total = {k: sum(c[k] for c in cells.values()) for k in KEYS}
        out["arms"][arm] = {"runs": runs, "population_prior": [round(a0, 3), round(b0, 3)],
                            "windows": {w: _shares(c) for w, c in sorted(cells.items())},
                            "all": _shares(total) if total["groups"] else None}
    return out


KEYS = ("groups", "signal", "plugin", "posterior", "empirical", "prior_rate", "pass_rate", "distinct")


def _shares(c: dict) -> dict:
    n = c["groups"]
    return {"groups": int(n), "realised": c["signal"] / n, "predicted_plugin": c["plugin"] / n,
            "predicted_posterior": c["posterior"] / n, "predicted_empirical": c["empirical"] / n,
            "mean_prior_pass_rate": c["prior_rate"] / n, "mean_group_pass_rate": c["pass_rate"] / n,
            "distinct_completions": c["distinct"] / n}


def markdown(c: dict) -> str:
    lines = ["| arm | runs | steps | groups | pass rate: measured | pass rate: in training | predicted: plug-in "
             "| predicted: uniform prior | predicted: population prior | realised | distinct texts / group |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, a in c["arms"].items():
        if not a["all"]:
            continue
        rows = [(f"window {w + 1}", s) for w, s in a["windows"].items()] + [("all", a["all"])]
        for label, s in rows:
            lines.append(f"| {arm} | {len(a['runs'])} | {label} | {s['groups']} | {s['mean_prior_pass_rate']:.2f} | "
                         f"{s['mean_group_pass_rate']:.2f} | {s['predicted_plugin']:.2f} | "
                         f"{s['predicted_posterior']:.2f} | {s['predicted_empirical']:.2f} | {s['realised']:.2f} | "
                         f"{s['distinct_completions']:.1f} |")
    priors = ", ".join(f"{arm} Beta({a['population_prior'][0]:g}, {a['population_prior'][1]:g})"
                       for arm, a in c["arms"].items() if a["all"])
    return "\n".join(lines) + f"\n\nPopulation priors (beta-binomial fit to the measured pool): {priors}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    args = parser.parse_args()
    c = calibration()
    print(json.dumps(c, indent=1) if args.json else markdown(c))


if __name__ == "__main__":
    main()
