"""How many runs an arm would decide each contrast, at the effect and the run-to-run spread measured? From the report.

The report's contrasts compare arms' mean held-out change with runs as the unit. This reads the report's
JSON (``data/report/band_value.json``, or ``--report``), takes each arm's runs' changes against the base
(their mean and standard deviation) and, per contrast, the runs an arm that a two-sided test would need to
find the measured difference with 80 % power (normal approximation, equal runs per arm:
``n = (z_{1-a/2} + z_{0.8})^2 (sd_1^2 + sd_2^2) / d^2``), at a = 0.05 and at a = 0.05 / m (Holm's first,
strictest step over the set's m contrasts). A planning figure for the next run of the experiment, not a
test: it takes the measured difference as the true one, and the winner's curse makes that optimistic.

    .venv/bin/python experiments/band_value/power.py [--report PATH] [--json]
"""

from __future__ import annotations

import json
import math
import statistics

from signal_vs_gain import read_report  # beside this script

NORMAL = statistics.NormalDist()


def runs_needed(diff: float, sd_a: float, sd_b: float, alpha: float, power: float = 0.8) -> float:
    """Runs an arm for a two-sided z-test of ``diff`` between two arms of run-level spread sd_a, sd_b."""
    if diff == 0:
        return math.inf
    z = NORMAL.inv_cdf(1 - alpha / 2) + NORMAL.inv_cdf(power)
    return z * z * (sd_a ** 2 + sd_b ** 2) / diff ** 2


def analyse(report: dict) -> dict:
    out = {}
    for name, section in report["sets"].items():
        deltas: dict[str, list[float]] = {}
        for p in section["policies"]:
            if p.get("arm") not in (None, "base") and p.get("delta") is not None:
                deltas.setdefault(p["arm"], []).append(p["delta"])
        arms = {a: {"runs": len(d), "mean": statistics.fmean(d), "sd": statistics.stdev(d) if len(d) > 1 else 0.0}
                for a, d in deltas.items()}
        m = len(section["contrasts"])
        rows = []
        for c in section["contrasts"]:
            a, b = arms[c["better"]], arms[c["worse"]]
            diff = a["mean"] - b["mean"]
            rows.append({"contrast": f"{c['better']} > {c['worse']}", "diff": diff, "sd": [a["sd"], b["sd"]],
                         "runs_now": [a["runs"], b["runs"]],
                         "runs_needed_alpha_05": runs_needed(diff, a["sd"], b["sd"], 0.05),
                         "runs_needed_holm_first": runs_needed(diff, a["sd"], b["sd"], 0.05 / m)})
        out[name] = {"arms": arms, "contrasts": rows, "m": m}
    return out


def main() -> None:
    report, as_json = read_report(__doc__.split("\n\n")[0])
    res = analyse(report)
    if as_json:
        print(json.dumps(res, indent=2, default=str))
        return
    for name, r in res.items():
        print(f"## {name}\n")
        print("| arm | runs | mean change | sd over runs |\n|---|---|---|---|")
        for a, x in r["arms"].items():
            print(f"| {a} | {x['runs']} | {x['mean']:+.3f} | {x['sd']:.3f} |")
        print(f"\n| contrast | difference | runs an arm now | for 80 % power at 0.05 | at 0.05/{r['m']} (Holm's first step) |")
        print("|---|---|---|---|---|")
        for c in r["contrasts"]:
            print(f"| {c['contrast']} | {c['diff']:+.3f} | {c['runs_now'][0]} / {c['runs_now'][1]} | "
                  f"{math.ceil(c['runs_needed_alpha_05'])} | {math.ceil(c['runs_needed_holm_first'])} |"
                  .replace("| inf |", "| never |"))
        print()


if __name__ == "__main__":
    main()
