"""What proving ownership costs before a destructive operation: prints the figures.

    .venv/bin/python benchmarks/ownership_cost.py [--shards 1000]

- adopting a table folder of an earlier version (no marker): every shard's footer is read once;
- a marked folder: one small file read;
- replace_dir's stale-shard removal: one footer read per stale shard.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.io import claim_table_dir, replace_dir, write_table
from pipeline.ownership import TABLE_MARKER
from pipeline.schema import schema


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=1000)
    n = ap.parse_args().shards
    rows = [{"stage": "ingest", "source": "s", "source_id": str(i), "reason": "r", "detail": None, "excerpt": None}
            for i in range(100)]
    table = schema("rejects").from_rows(rows)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rejects"
        for i in range(n):
            write_table(table, folder / f"part-{i:05d}.parquet", name="rejects")
        t0 = time.perf_counter()
        claim_table_dir(folder, name="rejects")
        adopt = time.perf_counter() - t0
        assert (folder / TABLE_MARKER).is_file()
        t0 = time.perf_counter()
        for _ in range(100):
            claim_table_dir(folder, name="rejects")
        marked = (time.perf_counter() - t0) / 100
        t0 = time.perf_counter()
        replace_dir(folder, [("part-00000", table)], name="rejects")  # n - 1 stale shards, each proven, removed
        replace = time.perf_counter() - t0
        left = sorted(p.name for p in folder.iterdir())
    print(f"legacy folder of {n} shards adopted (every footer read): {adopt * 1000:.1f} ms "
          f"({adopt / n * 1e6:.0f} us a shard)")
    print(f"marked folder proven (marker read): {marked * 1e6:.0f} us")
    print(f"replace_dir to 1 shard, {n - 1} stale shards proven and removed: {replace * 1000:.1f} ms; left: {left}")


if __name__ == "__main__":
    main()
