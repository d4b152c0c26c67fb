"""Publish at several item counts: N problems measured by two policies (with question, solution and difficulty rows
of a realistic size) through `passband publish`, in a fresh process per size, in a temp dir.

    python benchmarks/publish_scale.py [--problems 20000 100000 300000]

Per size it prints the stage's wall time, rows/s, the publish process's peak resident memory (its own high-water
mark: the tables are written by this parent, which is not counted) and that peak's growth per 1,000 items over the
smallest size. Publish streams the problems in problem order through DuckDB and writes each config's rows a row
group at a time, so the peak should not grow with N (a million-item source must fit a laptop).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from publish_tables import OTHER_ID, PRIMARY_ID, difficulty_row, make_repo, problem_row

from pipeline.io import write_table
from pipeline.schema import schema

CHILD = """
import json, resource, sys, time
from pathlib import Path
from pipeline.config import load_params
from pipeline.publish import run
root = Path(sys.argv[1])
t0 = time.perf_counter()
result = run(load_params(root / "params.yaml"), root=root)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "rows": result.dataset.rows("default"), "files": len(result.files),
                  "bytes": sum(p.stat().st_size for p in result.folder.rglob("*") if p.is_file()),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
SHARD_ROWS = 50_000  # rows per table shard the parent writes (the stage reads them as a user's tables)


def make_tables(root: Path, n: int) -> None:
    rng = random.Random(n)
    sources = ["synthetic", "gsm8k_train", "gsm8k_test", "math_train"]
    for start in range(0, n, SHARD_ROWS):
        problems, diff = [], []
        for i in range(start, min(n, start + SHARD_ROWS)):
            pid = f"p_{rng.getrandbits(64):016x}"
            src = sources[i % 4]
            question = f"A shop sells {i % 97} pens at {i % 13} dollars each and {i} pencils. " * 4 + "How many in all?"
            row = problem_row(pid, src, "test" if src == "gsm8k_test" else "train", question, str(i + i % 97))
            row["solution"] = "Step: add them up. " * 30 + f"\\boxed{{{i + i % 97}}}"
            problems.append(row)
            diff.append(difficulty_row(pid, PRIMARY_ID, rng.randint(0, 8)))
            diff.append(difficulty_row(pid, OTHER_ID, rng.randint(0, 8)))
        write_table(schema("problems").from_rows(problems), root / f"data/problems/part-{start // SHARD_ROWS}.parquet",
                    name="problems")
        write_table(schema("difficulty").from_rows(diff), root / f"data/difficulty/part-{start // SHARD_ROWS}.parquet",
                    name="difficulty")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, nargs="+", default=[20_000, 100_000, 300_000])
    args = ap.parse_args()
    results = []
    for n in sorted(args.problems):
        with tempfile.TemporaryDirectory() as tmp:
            root = make_repo(Path(tmp) / "repo")
            for table in ("problems", "difficulty"):  # the fixture's own tiny tables: replaced by N rows
                for p in (root / "data" / table).glob("*.parquet"):
                    p.unlink()
            t0 = time.perf_counter()
            make_tables(root, n)
            made = time.perf_counter() - t0
            out = subprocess.run([sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise SystemExit(f"publish failed at {n} problems:\n{out.stderr[-3000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append((n, r))
            print(f"{n:>9,} problems x 2 policies -> {r['rows']:,} default rows, {r['files']} files, "
                  f"{r['bytes'] / 1e6:.1f} MB (tables made in {made:.0f} s)", flush=True)
    n0, r0 = results[0]
    print("| problems | publish wall s | rows/s | peak RSS MiB | growth per 1,000 items over the smallest |")
    print("|---:|---:|---:|---:|---:|")
    for n, r in results:
        growth = "" if n == n0 else f"{(r['peak_mib'] - r0['peak_mib']) / ((n - n0) / 1000):.2f} MiB"
        print(f"| {n:,} | {r['wall_s']:.1f} | {r['rows'] / r['wall_s']:,.0f} | {r['peak_mib']:.0f} | {growth} |")


if __name__ == "__main__":
    main()
