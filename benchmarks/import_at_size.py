"""Importing a dump at size: N constructed completions (default 1M) through the rollout stage's import, beside
pyarrow reading the same file, each in a child process of its own (its own peak resident memory).

    nice -n 10 .venv/bin/python benchmarks/import_at_size.py [--completions 1000000] [--per-problem 16]
        [--layout plain|qwen_harness] [--chars 600]

The dump is a ``plain`` (or ``qwen_harness``) JSON-lines file: N / per-problem problems, each a line with its
completions (about ``--chars`` characters each, a boxed answer at the end), and the problems table is written
directly (no ingest). Phases, side by side in one run:

- ``pyarrow``: ``pyarrow.json.read_json`` of the file (the rate the import is held to: within 2x), and
  ``pyarrow.json.open_json`` streaming it batch by batch (bounded memory: the fair comparison of a reader that does
  not hold the file);
- ``import``: the rollout stage on a params.yaml whose one policy imports the dump (parse, match, number, write
  the Parquet shards and the state), ``passband rollout --no-progress`` in a child process.

Prints per phase the seconds, completions a second, MB a second of the file and the child's peak memory (VmHWM),
then the ratio of the import's seconds to each pyarrow phase's. A second import run reads nothing (up to date):
its seconds are printed too.
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

import yaml

REPO = Path(__file__).resolve().parents[1]
PEAK = REPO / "benchmarks" / "peak.py"

PYARROW_READ = """
import sys, time
sys.path.insert(0, {bench!r})
from peak import own_peak_mib
import pyarrow.json as pj
t0 = time.perf_counter()
{body}
print(time.perf_counter() - t0, own_peak_mib())
"""
WHOLE = "t = pj.read_json({path!r}); n = t.num_rows"
STREAM = """r = pj.open_json({path!r}, read_options=pj.ReadOptions(block_size=16 << 20))
n = 0
for b in r:
    n += b.num_rows"""

IMPORT = """
import sys, time
sys.path.insert(0, {bench!r})
from peak import own_peak_mib
from click.testing import CliRunner
from pipeline.cli import cli
t0 = time.perf_counter()
res = CliRunner().invoke(cli, ["rollout", "--params", {params!r}, "--no-progress"], catch_exceptions=False)
assert res.exit_code == 0, res.output
print(time.perf_counter() - t0, own_peak_mib())
print(res.output, file=sys.stderr)
"""


def build(root: Path, completions: int, per_problem: int, layout: str, chars: int) -> tuple[Path, int]:
    """The dump and the problems table; returns the dump's path and its problems."""
    from pipeline.io import write_table
    from pipeline.keys import problem_id
    from pipeline.schema import schema

    rng = random.Random(0)
    n = -(-completions // per_problem)
    filler = "Let me work through this carefully, one step at a time, checking each product and sum. "
    rows = []
    dump = root / "dump.jsonl"
    with dump.open("w") as f:
        for i in range(n):
            q = f"Problem {i}: what is {i} + {i % 97}?"
            gold = i + i % 97
            rows.append({"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
                         "answer": str(gold), "n_duplicates": 0})
            k = min(per_problem, completions - i * per_problem)
            comps = [(filler * (chars // len(filler) + 1))[: chars - 20]
                     + f" \\boxed{{{gold + (rng.random() < 0.4)}}}" for _ in range(k)]
            line = ({"problem": q, "answer": str(gold), "completions": comps} if layout == "plain"
                    else {"idx": i, "question": q, "gt": str(gold), "code": comps, "score": [True] * k})
            f.write(json.dumps(line) + "\n")
    write_table(schema("problems").from_rows(rows), root / "data/problems/part-0.parquet", name="problems")
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
              "policies": {"big": {"model": "org/Model-7B", "revision": "r1", "prompt": "fewshot_arith",
                                   "sampling": {"temperature": 0.7, "max_tokens": 4096},
                                   "dump": {"path": "dump.jsonl", "layout": layout}}},
              "rollout": {"policies": ["big"], "k": per_problem}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return dump, n


def child(code: str) -> tuple[float, float, str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    seconds, peak = map(float, out.stdout.split()[:2])
    return seconds, peak, out.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--completions", type=int, default=1_000_000)
    ap.add_argument("--per-problem", type=int, default=16)
    ap.add_argument("--layout", choices=["plain", "qwen_harness"], default="plain")
    ap.add_argument("--chars", type=int, default=600, help="characters a completion")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="passband-import-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        dump, problems = build(root, args.completions, args.per_problem, args.layout, args.chars)
        mb = dump.stat().st_size / 1e6
        print(f"dump: {args.completions:,} completions of {problems:,} problems, {mb:,.0f} MB ({args.layout}); "
              f"built in {time.perf_counter() - t0:.0f} s")
        bench = str(PEAK.parent)
        phases = {
            "pyarrow read_json": child(PYARROW_READ.format(bench=bench, body=WHOLE.format(path=str(dump)))),
            "pyarrow open_json (streamed)": child(PYARROW_READ.format(bench=bench, body=STREAM.format(path=str(dump)))),
            "passband import": child(IMPORT.format(bench=bench, params=str(root / "params.yaml"))),
        }
        again = child(IMPORT.format(bench=bench, params=str(root / "params.yaml")))
        print(phases["passband import"][2].strip().splitlines()[-1])
        print(f"{'phase':<30} {'seconds':>8} {'completions/s':>14} {'MB/s':>7} {'peak MiB':>9}")
        for name, (s, peak, _) in phases.items():
            print(f"{name:<30} {s:>8.1f} {args.completions / s:>14,.0f} {mb / s:>7.1f} {peak:>9,.0f}")
        imp = phases["passband import"][0]
        for name in ("pyarrow read_json", "pyarrow open_json (streamed)"):
            print(f"import / {name}: {imp / phases[name][0]:.2f}x")
        print(f"second import (up to date): {again[0]:.1f} s, peak {again[1]:,.0f} MiB")


if __name__ == "__main__":
    main()
