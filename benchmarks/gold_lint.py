"""The gold lint on the real sets: GSM8K (train, test) and MATH (train) from ../shared/data through the ingest stage.

    python benchmarks/gold_lint.py [--data ../shared/data] [--examples 5]

Runs the ingest stage (into a temp folder) on the three files as params.yaml names them, then prints, per source,
the rows read, the problems kept, each gold lint defect's count (pipeline/ingest/gold_lint.py; an unusable defect
counts the rows rejected as garbled_gold) and the unparseable_gold rejects, and a few examples of each defect.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow.compute as pc

from pipeline.config import parse_params
from pipeline.ingest import run
from pipeline.io import read_table

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--examples", type=int, default=5)
    args = ap.parse_args()
    data = args.data.resolve()
    sources = [{"name": "gsm8k_train", "kind": "gsm8k", "path": str(data / "gsm8k/train.jsonl"), "split": "train"},
               {"name": "gsm8k_test", "kind": "gsm8k", "path": str(data / "gsm8k/test.jsonl"), "split": "test"},
               {"name": "math_train", "kind": "math", "path": str(data / "math/train.jsonl"), "split": "train"}]
    params = parse_params({"ingest": {"sources": sources}, "policies": {"p": {}}, "rollout": {"policies": ["p"]}})
    with tempfile.TemporaryDirectory() as tmp:
        summary = run(params, root=Path(tmp), progress=False)
        problems = read_table(Path(tmp) / params.paths.problems, name="problems")
        rejects = read_table(Path(tmp) / params.paths.rejects, name="rejects")
    print(f"{'source':<12} {'read':>6} {'problems':>8} {'unparseable_gold':>16}  gold issues (problems; garbled_gold rejects)")
    for name, counts in summary.per_source.items():
        unparseable = pc.sum(pc.and_(pc.equal(rejects["source"], name),
                                     pc.equal(rejects["reason"], "unparseable_gold"))).as_py() or 0
        issues = ", ".join(f"{k} {v}" for k, v in summary.gold_issues.get(name, {}).items()) or "none"
        print(f"{name:<12} {counts['read']:>6} {counts['problems']:>8} {unparseable:>16}  {issues}")
    print()
    for row in problems.filter(pc.greater(pc.list_value_length(problems["gold_issues"]), 0)).to_pylist()[:50]:
        print(f"  {row['source']:<12} {','.join(row['gold_issues']):<28} gold {row['answer'][:40]!r:<44} "
              f"question ...{row['question'][-90:]!r}")
    for row in rejects.filter(pc.is_in(rejects["reason"], pc.cast(["garbled_gold", "unparseable_gold"], "string")))\
            .to_pylist()[:args.examples]:
        print(f"  {row['source']:<12} {row['reason']:<28} {row['detail'][:100]}")


if __name__ == "__main__":
    main()
