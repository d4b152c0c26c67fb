"""Publish throughput: N problems measured by two policies (default 100k) through the publish stage, in a temp dir.

    python benchmarks/publish_scale.py [--problems 100000]

Prints the seconds of each step (reading, building the rows, writing the folder), rows/s and the
process's peak resident memory.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from publish_tables import OTHER_ID, PRIMARY_ID, difficulty_row, make_repo, problem_row

from pipeline.config import load_params
from pipeline.io import write_table
from pipeline.publish import read_inputs, run
from pipeline.schema import schema


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=100_000)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "repo")
        sources = ["synthetic", "gsm8k_train", "gsm8k_test", "math_train"]
        problems, diff = [], []
        for i in range(args.problems):
            pid = f"p_{i:016x}"
            src = sources[i % 4]
            problems.append(problem_row(pid, src, "test" if src == "gsm8k_test" else "train", f"What is {i} + {i % 97}?",
                                        str(i + i % 97)))
            diff.append(difficulty_row(pid, PRIMARY_ID, rng.randint(0, 8)))
            diff.append(difficulty_row(pid, OTHER_ID, rng.randint(0, 8)))
        write_table(schema("problems").from_rows(problems), root / "data/problems/part-0.parquet", name="problems")
        write_table(schema("difficulty").from_rows(diff), root / "data/difficulty/part-0.parquet", name="difficulty")
        params = load_params(root / "params.yaml")
        t0 = time.perf_counter()
        read_inputs(params, root=root)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = run(params, root=root)
        t_all = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in result.folder.rglob("*") if p.is_file())
        rows = result.dataset.rows("default")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"publish: {args.problems} problems x 2 policies -> {rows} default rows, {len(result.files)} files, "
              f"{size / 1e6:.1f} MB")
        print(f"  read {t_read:.1f} s; whole stage {t_all:.1f} s ({rows / t_all:,.0f} rows/s); peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
