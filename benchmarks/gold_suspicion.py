"""How well ``gold_suspicion`` finds wrong golds: inject them, re-verify, and count.

    python benchmarks/gold_suspicion.py --root /path/to/run      # a run's problems, rollouts and policies
    python benchmarks/gold_suspicion.py                           # the committed real completions (tests/data)

The run's tables (``paths.*`` of ROOT/params.yaml) are copied into a temp folder; the verify and annotate stages
measure them with their true golds. The items a policy solves at pass rate >= ``--min-pass-rate`` (0.5) with a
numeric gold are the eligible ones; every eligible item then gets a nearby wrong gold (the gold +1 or -1) and
is verified and annotated again. An item's score depends only on its own verdicts (pooled over policies), so one
run with every eligible item changed gives each item's score both ways, and ``--draws`` random draws of
``--rate`` (3 %) of the eligible items give precision and recall at the threshold (annotate's
``gold_suspicion_threshold``, or ``--threshold``): a drawn item is a hit when its changed-gold score reaches the
threshold, an undrawn eligible item a false alarm when its true-gold score does. Also printed: the false-alarm
rate on every unchanged item, by band (where the score cannot tell a wrong gold from a policy that is wrong the
same way every time).
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

from pipeline import annotate, verify  # noqa: E402
from pipeline.config import load_params  # noqa: E402
from pipeline.io import read_table, write_table  # noqa: E402
from pipeline.schema import schema  # noqa: E402

_INTEGER = re.compile(r"-?\d+")


def nearby_wrong(gold: str, rng: random.Random) -> str | None:
    """An integer gold moved by one, up or down; None for any other gold (not eligible)."""
    g = gold.strip()
    return str(int(g) + rng.choice((-1, 1))) if _INTEGER.fullmatch(g) else None


@dataclass
class Figures:
    policy: str
    eligible: int
    draws: int
    injected_per_draw: int
    tp: int
    fn: int
    fp: int
    recall_all_eligible: float  # share of eligible items whose changed-gold score reaches the threshold
    false_alarm_eligible: float  # share of eligible items whose true-gold score reaches it
    false_alarm_by_band: dict[str, tuple[int, int]]  # band -> (suspect, items) with the true golds

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def false_alarm_all(self) -> float:
        suspect = sum(s for s, _ in self.false_alarm_by_band.values())
        return suspect / max(1, sum(n for _, n in self.false_alarm_by_band.values()))


def _measure(root: Path, params) -> dict[tuple[str, str], dict]:
    verify.run(params, root=root, progress=False)
    annotate.run(params, root=root, progress=False, plots=False)
    rows = read_table(root / params.paths.difficulty, name="difficulty").to_pylist()
    return {(r["problem_id"], r["policy_id"]): r for r in rows}


def measure(problems: pa.Table, rollouts: pa.Table, policies: pa.Table, *, workdir: Path, threshold: float | None = None,
            rate: float = 0.03, draws: int = 2000, min_pass_rate: float = 0.5, seed: int = 0) -> list[Figures]:
    """Per policy, the figures of injecting wrong golds into the tables given (verified and annotated in ``workdir``)."""
    params_doc = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
                  "policies": {"p": {"model": "embedded"}}, "rollout": {"policies": ["p"]},
                  "verify": {"workers": 2, "timeout_s": 2.0}}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params_doc))
    params = load_params(workdir / "params.yaml")
    threshold = params.annotate.gold_suspicion_threshold if threshold is None else threshold
    for name, table in (("problems", problems), ("rollouts", rollouts), ("policies", policies)):
        write_table(schema(name).validate(table), workdir / getattr(params.paths, name) / "part-0.parquet", name=name)
    clean = _measure(workdir, params)

    rng = random.Random(seed)
    golds = {r["problem_id"]: r["answer"] for r in problems.to_pylist()}
    solved = {pid for (pid, _), d in clean.items() if d["pass_rate"] >= min_pass_rate}
    changed = {pid: w for pid in sorted(solved) if (w := nearby_wrong(golds[pid], rng)) is not None}
    injected = problems.set_column(problems.schema.get_field_index("answer"), "answer",
                                   pa.array([changed.get(p, golds[p]) for p in problems.column("problem_id").to_pylist()]))
    write_table(schema("problems").validate(injected), workdir / params.paths.problems / "part-0.parquet", name="problems")
    dirty = _measure(workdir, params)

    names = {p["policy_id"]: p["name"] for p in policies.to_pylist()}
    out = []
    for pol in sorted({pol for _, pol in clean}):
        mine = {pid: d for (pid, p), d in clean.items() if p == pol}
        eligible = sorted(pid for pid, d in mine.items() if d["pass_rate"] >= min_pass_rate and pid in changed)

        def suspect(d: dict) -> bool:
            return d["gold_suspicion"] is not None and d["gold_suspicion"] >= threshold

        hit = {pid: suspect(dirty[(pid, pol)]) for pid in eligible}
        alarm = {pid: suspect(mine[pid]) for pid in eligible}
        per_draw = max(1, math.ceil(rate * len(eligible))) if eligible else 0
        tp = fn = fp = 0
        for _ in range(draws if eligible else 0):
            drawn = set(rng.sample(eligible, per_draw))
            tp += sum(hit[p] for p in drawn)
            fn += sum(not hit[p] for p in drawn)
            fp += sum(alarm[p] for p in eligible if p not in drawn)
        by_band: dict[str, list[int]] = {}
        for d in mine.values():
            c = by_band.setdefault(d["band"], [0, 0])
            c[0] += suspect(d)
            c[1] += 1
        out.append(Figures(
            policy=names.get(pol, pol), eligible=len(eligible), draws=draws if eligible else 0,
            injected_per_draw=per_draw, tp=tp, fn=fn, fp=fp,
            recall_all_eligible=sum(hit.values()) / len(eligible) if eligible else float("nan"),
            false_alarm_eligible=sum(alarm.values()) / len(eligible) if eligible else float("nan"),
            false_alarm_by_band={b: (s, n) for b, (s, n) in sorted(by_band.items())}))
    return out


def _tables_of(root: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    params = load_params(root / "params.yaml")
    return tuple(read_table(root / getattr(params.paths, name), name=name)  # type: ignore[return-value]
                 for name in ("problems", "rollouts", "policies"))


def _embedded_tables(tmp: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    import embedded_set

    tmp.mkdir(parents=True)
    embedded_set.build(tmp)
    return _tables_of(tmp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, help="a run's folder (its params.yaml names the tables); default: the "
                                              "committed real completions of the embedded model")
    ap.add_argument("--threshold", type=float, help="default: annotate.gold_suspicion_threshold's default")
    ap.add_argument("--rate", type=float, default=0.03)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--min-pass-rate", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tables = _tables_of(args.root) if args.root else _embedded_tables(Path(tmp) / "embedded")
        work = Path(tmp) / "work"
        work.mkdir()
        figures = measure(*tables, workdir=work, threshold=args.threshold, rate=args.rate, draws=args.draws,
                          min_pass_rate=args.min_pass_rate, seed=args.seed)
    for f in figures:
        print(f"policy {f.policy}: {f.eligible} eligible items (pass rate >= {args.min_pass_rate}, integer gold); "
              f"{f.draws} draws of {f.injected_per_draw} wrong golds ({args.rate:.0%})")
        print(f"  precision {f.precision:.3f}  recall {f.recall:.3f}  (TP {f.tp}, FN {f.fn}, FP {f.fp})")
        print(f"  every eligible item changed: recall {f.recall_all_eligible:.3f}; unchanged eligible items "
              f"suspect: {f.false_alarm_eligible:.3f}")
        bands = ", ".join(f"{b} {s}/{n}" for b, (s, n) in f.false_alarm_by_band.items())
        print(f"  false alarms on the unchanged items: {f.false_alarm_all:.3f} ({bands})")


if __name__ == "__main__":
    main()
