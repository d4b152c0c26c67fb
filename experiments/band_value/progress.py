"""How far the band-value experiment's training has come, from the finished runs' training logs.

The report waits for all 50 runs; this reads what exists now (each run's ``train_log.json``: the
checkpoint's, else the copy a measured run keeps in ``results/``, committed to git) and prints, per arm:
runs done, GRPO seconds, mean training reward, and the share of GRPO groups with a signal (rewards that
differed: the only groups with an advantage; the online arm's goal is >= 0.8), with a 95 % Wilson interval
over groups. Training reward is on the arm's own items, so it is not a comparison of arms: the held-out
measurement is (the measure and report stages).

    .venv/bin/python experiments/band_value/progress.py [--json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def progress(root: Path = HERE) -> dict:
    cfg = yaml.safe_load((root / "band_value.yaml").read_text(encoding="utf-8"))
    out: dict = {"arms": {}, "runs_done": 0, "runs_planned": 0}
    for arm in cfg["arms"]:
        runs, seconds, rewards, groups, signal = [], [], [], 0, 0
        for draw in cfg["draws"]:
            for seed in cfg["seeds"]:
                out["runs_planned"] += 1
                name = f"{arm}-d{draw}-s{seed}"
                path = root / "data" / "checkpoints" / name / "train_log.json"
                if not path.is_file():
                    path = root / "results" / name / "train_log.json"
                if not path.is_file():
                    continue
                log = json.loads(path.read_text(encoding="utf-8"))
                runs.append(f"d{draw}-s{seed}")
                seconds.append(log["seconds"])
                rewards += [step["reward"] for step in log["log"] if "reward" in step]
                groups += log.get("groups", 0)
                signal += log.get("groups_with_signal", 0)
        out["runs_done"] += len(runs)
        out["arms"][arm] = {
            "runs": runs, "seconds_mean": sum(seconds) / len(seconds) if seconds else None,
            "train_reward_mean": sum(rewards) / len(rewards) if rewards else None,
            "groups": groups, "groups_with_signal": signal,
            "signal_share": signal / groups if groups else None, "signal_share_95": wilson(signal, groups),
        }
    return out


def markdown(p: dict) -> str:
    lines = [f"{p['runs_done']} of {p['runs_planned']} runs done.", "",
             "| arm | runs | s / run | train reward | groups with a signal [95 % Wilson] |", "|---|---|---|---|---|"]
    for arm, a in p["arms"].items():
        if not a["runs"]:
            lines.append(f"| {arm} | 0 | | | |")
            continue
        lo, hi = a["signal_share_95"]
        lines.append(f"| {arm} | {len(a['runs'])} ({', '.join(a['runs'])}) | {a['seconds_mean']:.0f} | "
                     f"{a['train_reward_mean']:.3f} | {a['groups_with_signal']}/{a['groups']} = "
                     f"{a['signal_share']:.2f} [{lo:.2f}, {hi:.2f}] |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    args = parser.parse_args()
    p = progress()
    print(json.dumps(p, indent=1) if args.json else markdown(p))


if __name__ == "__main__":
    main()
