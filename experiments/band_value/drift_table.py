"""Feature drift from the base policy to each arm's checkpoints, one table (the probe_drift_table stage).

Each ``probe_drift`` stage wrote ``data/probe_drift/<arm>-d<draw>-s<seed>/report.json`` with
``passband probe report --checkpoint``: the base model's T-SAE encodes the same tokens through the base
and through the checkpoint. This reads those reports and writes ``data/probe_drift_table.md`` and
``.json``. There is one row per checkpoint and one per arm, the arm's runs averaged, with their
[min, max]. The rows compare the base's rollouts (``main``) and the checkpoint's own recorded GRPO
samples, each through the two models.

The noise reference is the spread between the two item draws of one arm: two checkpoints trained the
same way on different items. A difference between arms means little unless it is larger than that spread.

    .venv/bin/python experiments/band_value/drift_table.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
MEASURES = ("relative_abs_delta_mean", "mean_abs_delta_rate", "cosine_mean_codes", "top_feature_changed")
SETS = ("main", "checkpoint_records")


def collect(root: Path = HERE) -> dict:
    cfg = yaml.safe_load((root / "band_value.yaml").read_text(encoding="utf-8"))
    runs: dict[str, dict] = {}
    for folder in sorted((root / "data" / "probe_drift").glob("*-d*-s*")):
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        drift = report["drift"]
        runs[folder.name] = {s: {m: drift[s][m] for m in MEASURES} | {"tokens": drift[s]["tokens"]}
                             for s in SETS if s in drift}
        runs[folder.name]["top"] = [{k: f[k] for k in ("feature", "mean_base", "mean_trained", "spans_trained")}
                                    for f in drift.get("top", [])[:3]]
    arms = {}
    for arm in cfg["arms"]:
        mine = {name: r for name, r in runs.items() if name.startswith(f"{arm}-d")}
        if not mine:
            continue
        arms[arm] = {"runs": sorted(mine)}
        for s in SETS:
            for m in MEASURES:
                values = [r[s][m] for r in mine.values() if s in r]
                if values:
                    arms[arm][f"{s}.{m}"] = {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    return {"runs": runs, "arms": arms}


def markdown(t: dict) -> str:
    out = ["# Feature drift, base -> each checkpoint (T-SAE high-level codes, same tokens through both models)", "",
           "Per arm: the mean over its checkpoints [min, max] (the two item draws: the noise reference).", ""]
    for s, title in (("main", "the base policy's rollouts"), ("checkpoint_records", "each checkpoint's own GRPO samples")):
        out += [f"## Tokens of {title}", "",
                "| arm | runs | relative mean abs Δ of activation | mean abs Δ firing rate | cosine of mean codes "
                "| strongest feature changed |", "|---|---|---|---|---|---|"]
        for arm, a in t["arms"].items():
            cells = []
            for m in MEASURES:
                v = a.get(f"{s}.{m}")
                pct = m in ("relative_abs_delta_mean", "top_feature_changed")
                fmt = (lambda x: f"{100 * x:.1f} %") if pct else (lambda x: f"{x:.4f}")
                cells.append(f"{fmt(v['mean'])} [{fmt(v['min'])}, {fmt(v['max'])}]" if v else "")
            out.append(f"| {arm} | {', '.join(a['runs'])} | " + " | ".join(cells) + " |")
        out.append("")
    out += ["## Features that moved most, per checkpoint", "", "| checkpoint | feature: mean base -> trained (fires on) |",
            "|---|---|"]
    for name, r in t["runs"].items():
        tops = "; ".join(f"{f['feature']}: {f['mean_base']:.3f} -> {f['mean_trained']:.3f} "
                         f"(`{f['spans_trained'][0] if f['spans_trained'] else ''}`)" for f in r["top"])
        escaped = tops.replace("|", "\\|").replace("\n", " ")
        out.append(f"| {name} | {escaped} |")
    return "\n".join(out) + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main() -> None:
    t = collect()
    write_atomic(HERE / "data" / "probe_drift_table.json", json.dumps(t, indent=1, sort_keys=True))
    write_atomic(HERE / "data" / "probe_drift_table.md", markdown(t))
    print(markdown(t))


if __name__ == "__main__":
    main()
