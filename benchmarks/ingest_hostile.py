"""Ingest on hostile and careless input: time, peak memory and outcome of each case.

    python benchmarks/ingest_hostile.py [--before REF] [--rows 300000] [--line-mb 200] [--only CASE ...]

Each case is a fresh project folder running ``python -m pipeline ingest`` in a child process; its
peak resident memory is the child's own ``VmHWM`` read as it exits (``wait4``'s ``ru_maxrss`` would
count the benchmark's own memory at the fork), its outcome the exit status with the metrics' counts
or the last line it printed. ``--before REF`` also runs each case on the ingest code of
git revision REF (``git archive`` into a temp folder, nothing in the working tree changes), e.g.
the commit before the streaming ingest. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parent.parent
# the child: `python -m pipeline ingest`, writing its peak resident memory (kB) to $HWM_FILE as it exits
CHILD = """
import atexit, os, runpy, sys
def _hwm():
    hwm = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
    open(os.environ["HWM_FILE"], "w").write(hwm[0] if hwm else "0")
atexit.register(_hwm)
sys.argv = ["passband", "ingest", "--no-progress"]
runpy.run_module("pipeline", run_name="__main__")
"""


def _good(n: int = 3, start: int = 0) -> list[dict]:
    return [{"question": f"Problem {i}: Tom has {i} apples and buys {i % 97 + 1} more. How many apples now?",
             "answer": str(i + i % 97 + 1)} for i in range(start, start + n)]


def _lines(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def make_rows(d: Path, rows: int) -> dict:
    """``rows`` distinct GSM8K-like rows (question, answer, a 300-character solution), ~500 bytes each."""
    with (d / "rows.jsonl").open("wb") as fh:
        for start in range(0, rows, 10_000):
            batch = _good(min(10_000, rows - start), start)
            for r in batch:
                r["solution"] = f"He has {r['answer']} apples. " + "Counting step by step. " * 13
            fh.write(_lines(batch))
    return {"name": "rows", "kind": "jsonl", "path": str(d / "rows.jsonl")}


def make_line(d: Path, mb: int) -> dict:
    with (d / "line.jsonl").open("wb") as fh:
        fh.write(_lines(_good(2)))
        fh.write(b'{"question": "')
        chunk = b"x" * (1 << 20)
        for _ in range(mb):
            fh.write(chunk)
        fh.write(b'", "answer": "1"}\n')
        fh.write(_lines(_good(1, 2)))
    return {"name": "line", "kind": "jsonl", "path": str(d / "line.jsonl")}


def make_deep(d: Path) -> dict:
    deep = b'{"question": ' + b"[" * 3000 + b"]" * 3000 + b', "answer": "1"}\n'
    (d / "deep.jsonl").write_bytes(_lines(_good(2)) + deep + _lines(_good(1, 2)))
    return {"name": "deep", "kind": "jsonl", "path": str(d / "deep.jsonl")}


def make_bigint(d: Path) -> dict:
    line = b'{"question": "How big?", "answer": ' + b"7" * 5000 + b"}\n"
    (d / "bigint.jsonl").write_bytes(_lines(_good(2)) + line)
    return {"name": "bigint", "kind": "jsonl", "path": str(d / "bigint.jsonl")}


def _fields(d: Path, field: str) -> dict:
    rows = [{**r, "id": f"r{i}", "subject": "algebra", "level": "1"} for i, r in enumerate(_good(3))]
    rows[1][field] = "z" * 5_000_000
    pq.write_table(pa.Table.from_pylist(rows), d / f"{field}.parquet")
    return {"name": field, "kind": "parquet", "path": str(d / f"{field}.parquet")}


def make_truncated(d: Path) -> dict:
    pq.write_table(pa.Table.from_pylist(_good(5000)), d / "trunc.parquet")
    data = (d / "trunc.parquet").read_bytes()
    (d / "trunc.parquet").write_bytes(data[: len(data) // 2])
    return {"name": "trunc", "kind": "parquet", "path": str(d / "trunc.parquet")}


def make_utf16(d: Path) -> dict:
    (d / "utf16.jsonl").write_bytes(_lines(_good(3)).decode().encode("utf-16"))
    return {"name": "utf16", "kind": "jsonl", "path": str(d / "utf16.jsonl")}


def make_gzip(d: Path) -> dict:
    (d / "gz.jsonl").write_bytes(gzip.compress(_lines(_good(3))))
    return {"name": "gz", "kind": "jsonl", "path": str(d / "gz.jsonl")}


def make_empty(d: Path) -> dict:
    (d / "empty.jsonl").write_bytes(b"")
    return {"name": "empty", "kind": "jsonl", "path": str(d / "empty.jsonl")}


def cases(args) -> dict[str, tuple[str, Callable[[Path], dict]]]:
    return {
        "rows": (f"{args.rows:,} rows (JSONL, ~500 B each)", lambda d: make_rows(d, args.rows)),
        "line": (f"a {args.line_mb} MB line among 3 good rows", lambda d: make_line(d, args.line_mb)),
        "deep": ("a 6 KB line nested 3,000 deep", make_deep),
        "bigint": ("an answer of 5,000 digits", make_bigint),
        "id": ("a 5 MB id (Parquet)", lambda d: _fields(d, "id")),
        "subject": ("a 5 MB subject (Parquet)", lambda d: _fields(d, "subject")),
        "truncated": ("a Parquet source cut in half", make_truncated),
        "utf16": ("a UTF-16 JSONL file", make_utf16),
        "gzip": ("a gzip-compressed JSONL file", make_gzip),
        "empty": ("an empty JSONL file", make_empty),
    }


def _longest(out: Path) -> int:
    """The longest id, subject, level or metadata value stored in problems or rejects."""
    longest = 0
    for table in ("problems", "rejects"):
        for f in sorted((out / "data" / table).glob("*.parquet")):
            t = pq.read_table(f)
            for c in ("source_id", "subject", "level", "metadata"):
                if c in t.column_names:
                    longest = max(longest, max((len(v) for v in t.column(c).to_pylist() if v), default=0))
    return longest


def run_case(code: Path, work: Path, source: dict) -> dict:
    work.mkdir(parents=True)
    params = {"ingest": {"sources": [source]}, "policies": {"p": {}}, "rollout": {"policies": ["p"]}}
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(code), "HWM_FILE": str(work / "hwm.txt")}
    t0 = time.perf_counter()
    with (work / "out.txt").open("wb") as out:
        proc = subprocess.run([sys.executable, "-c", CHILD], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    text = (work / "out.txt").read_text(errors="replace")
    if proc.returncode == 0:
        m = json.loads((work / "data/metrics/ingest.json").read_text())
        shards = len(list((work / "data/problems").glob("*.parquet")))
        outcome = (f"{m['problems']:,} problems in {shards} shard(s), {m['rejects']} rejects "
                   f"{dict(sorted(m['reject_reasons'].items()))}; longest id/subject/metadata stored: "
                   f"{_longest(work):,} chars")
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        last = lines[-1] if lines else ""
        kind = f"traceback ({len(lines)} lines)" if "Traceback" in text else f"{len(lines)}-line error"
        outcome = f"exit {proc.returncode}, {kind}: {last[:110]}"
    return {"seconds": seconds, "peak_mib": int((work / "hwm.txt").read_text()) / 1024, "outcome": outcome}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="also run the ingest code of this git revision (e.g. the commit before)")
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--line-mb", type=int, default=200)
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    args = ap.parse_args()
    table = cases(args)
    names = args.only or list(table)
    with tempfile.TemporaryDirectory(prefix="ingest-hostile-") as tmp:
        tmp = Path(tmp)
        codes = [("after", REPO)]
        if args.before:
            old = tmp / "before"
            old.mkdir()
            archive = subprocess.run(["git", "archive", args.before, "pipeline", "schemas"], cwd=REPO,
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            codes.insert(0, (f"before ({args.before})", old))
        print("| case | code | seconds | peak RSS MiB | outcome |")
        print("|---|---|---|---|---|")
        for name in names:
            what, make = table[name]
            inputs = tmp / "inputs" / name
            inputs.mkdir(parents=True)
            source = make(inputs)
            for label, code in codes:
                r = run_case(code, tmp / "runs" / label.split()[0] / name, source)
                print(f"| {what} | {label} | {r['seconds']:.1f} | {r['peak_mib']:.0f} | {r['outcome']} |", flush=True)
            for f in inputs.iterdir():  # free the disk before the next case
                f.unlink()


if __name__ == "__main__":
    main()
