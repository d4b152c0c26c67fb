"""Ingest of a DAPO-Math-17k-sized source through its preset: time, peak memory and counts, per source kind.

Writes N rows in DAPO-Math-17k's layout (tests/support/make_preset_fixtures.py's types; every problem repeated
``--copies`` times as on the Hub, 1.79M rows for 17.9k problems) to one Parquet file, then runs
``passband ingest`` in a child per kind (``hf``: through 🤗 datasets' Arrow cache in a temp folder;
``parquet``: pyarrow batches) and prints rows/s and the child's peak RSS.

    python benchmarks/ingest_presets.py [--problems 2000 --copies 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))

from faultkit import PARAMS  # noqa: E402
from make_preset_fixtures import FIXTURES, _dapo  # noqa: E402


def write_source(path: Path, problems: int, copies: int) -> int:
    sch = FIXTURES["dapo-math-17k"][1]
    writer = pq.ParquetWriter(path, sch)
    rows = [_dapo(f"Let $n = {i}$. Find the remainder when $n^2 + {i % 97}$ is divided by $1000$.",
                  str((i * i + i % 97) % 1000), f"id-{i}") for i in range(problems)]
    for _ in range(copies):
        writer.write_table(pa.Table.from_pylist(rows, schema=sch))
    writer.close()
    return problems * copies


def run(root: Path, kind: str, source: Path) -> dict:
    params = {**PARAMS, "ingest": {"sources": [{"name": "dapo", "kind": kind, "preset": "dapo-math-17k",
                                                "path": str(source)}]},
              "rollout": {**PARAMS["rollout"], "sources": ["dapo"]}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "pipeline", "ingest", "--params",
                          str(root / "params.yaml"), "--no-progress"], cwd=REPO, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    metrics = json.loads((root / "data/metrics/ingest.json").read_text())
    return {"seconds": seconds, "peak_mib": int(out.stdout.split()[-1]) / 1024, **metrics}


# a wrapper per run, so each run's peak RSS is its own (RUSAGE_CHILDREN is the max over every child waited for)
_MEASURED = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=2000)
    ap.add_argument("--copies", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="passband-bench-presets-") as tmp:
        source = Path(tmp) / "train-00000-of-00001.parquet"
        n = write_source(source, args.problems, args.copies)
        print(f"{n:,} rows in DAPO-Math-17k's layout ({args.problems:,} problems x {args.copies}), "
              f"{source.stat().st_size / 2**20:.1f} MiB")
        for kind in ("parquet", "hf"):
            root = Path(tmp) / kind
            root.mkdir()
            r = run(root, kind, source)
            print(f"kind {kind:8s} {r['seconds']:6.1f} s  {r['rows_read'] / r['seconds']:8,.0f} rows/s  "
                  f"peak RSS {r['peak_mib']:6.0f} MiB  -> {r['problems']:,} problems, "
                  f"{r['duplicates']:,} duplicates, {r['rejects']} rejects")


if __name__ == "__main__":
    main()
