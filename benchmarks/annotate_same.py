"""Do two checkouts verify and annotate the 708 labelled real completions alike? Prints what differs.

    git archive <base-commit> pipeline schemas tests/data/flag_labels.jsonl | tar -x -C /tmp/base
    .venv/bin/python benchmarks/annotate_same.py /tmp/base .

Each checkout runs in its own process (its ``pipeline`` first on the path) the real verify core and annotate core
on ``tests/data/flag_labels.jsonl`` and writes verdicts, difficulty and flags to a temp folder; then the tables are
compared row by row and the columns that differ are named (``verifier_id`` differs whenever the code of a
verdict module changed: it is a digest of that code, not of the verdicts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

RUN = """
import sys
from pathlib import Path
import pyarrow.parquet as pq
from pipeline.annotate.core import annotate_tables
from pipeline.annotate.quality import load_labels, tables, verify_rows
from pipeline.config import AnnotateConfig
out, labels = Path(sys.argv[1]), Path(sys.argv[2])
rows = load_labels(labels)
rollouts, problems = tables(rows)
res = verify_rows(rows)
difficulty, flags = annotate_tables(res.verdicts, rollouts, problems, config=AnnotateConfig(), verifier_id=res.verifier_id)
for name, table in (("verdicts", res.verdicts), ("difficulty", difficulty), ("flags", flags)):
    pq.write_table(table, out / f"{name}.parquet")
"""


def main() -> None:
    roots = [Path(a).resolve() for a in sys.argv[1:3]]
    if len(roots) != 2:
        sys.exit("usage: annotate_same.py CHECKOUT_A CHECKOUT_B")
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for i, root in enumerate(roots):
            out = Path(tmp) / str(i)
            out.mkdir()
            subprocess.run([sys.executable, "-c", RUN, str(out), str(root / "tests/data/flag_labels.jsonl")],
                           cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=True)
            outs.append(out)
        for name in ("verdicts", "difficulty", "flags"):
            a, b = (pq.read_table(o / f"{name}.parquet").to_pylist() for o in outs)
            cols = sorted({k for x, y in zip(a, b, strict=False) for k in x if x[k] != y.get(k)})
            print(f"{name}: {len(a)} rows vs {len(b)}; columns that differ: {cols or 'none'}")


if __name__ == "__main__":
    main()
