"""The report's size and cost on a generated job: N problems x 2 policies x k rollouts, through ``passband report``.

    nice -n 10 .venv/bin/python benchmarks/report_size.py [--problems 5000 50000] [--k 8] [--publish]

Each size gets its own temp repository (tests/support/publish_tables.py's params, generated problems and difficulty rows,
and k rollouts per problem and policy with a ~500-character completion holding a thinking block, a verdict of the
difficulty's verifier each and a flag on every fifth); ``passband report`` runs in a child process. Prints the
report's bytes (all, without plotly.min.js, the overview page, the largest item file), its files, the rollouts
shown, the child's seconds and peak resident memory. ``--publish`` also runs ``passband publish`` on the same tables
(a child of its own) and prints the published ``rollouts`` config's rows, bytes, seconds and peak memory.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))

from publish_tables import OTHER_ID, PRIMARY_ID, VERIFIER, difficulty_row, make_repo, problem_row  # noqa: E402

from pipeline.io import write_table  # noqa: E402
from pipeline.schema import schema  # noqa: E402

THINK = "<think>" + "Let me add the numbers step by step, carrying where needed. " * 6 + "</think>"


def tables(root: Path, n: int, k: int) -> int:
    rng = random.Random(0)
    sources = ["synthetic", "gsm8k_train", "gsm8k_test", "math_train"]
    problems, diff = [], []
    r = {c: [] for c in schema("rollouts").names}
    v = {c: [] for c in schema("verdicts").names}
    f = {c: [] for c in schema("flags").names}
    for i in range(n):
        pid = f"p_{i:016x}"
        src = sources[i % 4]
        problems.append(problem_row(pid, src, "test" if src == "gsm8k_test" else "train",
                                    f"What is {i} + {i % 97}? Show the steps of the addition.", str(i + i % 97)))
        for pol in (PRIMARY_ID, OTHER_ID):
            c = rng.randint(0, k)
            diff.append(difficulty_row(pid, pol, c))
            for s in range(k):
                answer = str(i + i % 97 if s < c else i)
                for col, val in (("problem_id", pid), ("policy_id", pol), ("sample_idx", s), ("seed", s),
                                 ("completion", f"{THINK} {i} + {i % 97} = {answer}. The answer is \\boxed{{{answer}}}."),
                                 ("n_tokens", 120), ("finish_reason", "stop")):
                    r[col].append(val)
                for col, val in (("problem_id", pid), ("policy_id", pol), ("sample_idx", s), ("verifier_id", VERIFIER),
                                 ("status", "correct" if s < c else "incorrect"), ("extracted", answer),
                                 ("extractor", "boxed"), ("detail", None), ("gold_digest", None),
                                 ("thinking_chars", len(THINK)), ("thinking_closed", True)):
                    v[col].append(val)
                if s % 5 == 0:
                    for col, val in (("problem_id", pid), ("policy_id", pol), ("sample_idx", s),
                                     ("flag", "unsupported_answer"), ("score", None), ("evidence", f"'{answer}' unsupported")):
                        f[col].append(val)
    write_table(schema("problems").from_rows(problems), root / "data/problems/part-0.parquet", name="problems")
    write_table(schema("difficulty").from_rows(diff), root / "data/difficulty/part-0.parquet", name="difficulty")
    for name, cols in (("rollouts", r), ("verdicts", v), ("flags", f)):
        write_table(pa.table(cols, schema=schema(name).arrow), root / f"data/{name}/part-0.parquet", name=name)
    return len(r["problem_id"])


def child(root: Path, command: str) -> tuple[float, float, float]:
    """Run ``passband COMMAND`` in a child: its wall seconds, CPU seconds and peak RSS (MiB; a fresh grandchild
    keeps RUSAGE_CHILDREN's maximum to this command alone)."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run([sys.executable, '-m', 'pipeline', sys.argv[1], '--params', sys.argv[2]], check=True, "
            "stdout=subprocess.DEVNULL); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, command, str(root / "params.yaml")], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, nargs="+", default=[5000, 50000])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--publish", action="store_true", help="also measure publish's rollouts config")
    args = ap.parse_args()
    for n in args.problems:
        with tempfile.TemporaryDirectory() as tmp:
            root = make_repo(Path(tmp) / "repo")
            rollouts = tables(root, n, args.k)
            wall, cpu, peak = child(root, "report")
            folder = root / "data/report"
            info = json.loads((folder / "report.json").read_text())
            sizes = {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}
            items = {k: s for k, s in sizes.items() if k.startswith("items/")}
            index = sum(s for k, s in sizes.items() if k.startswith("index/"))
            print(f"report: {n} problems x 2 policies x k={args.k} ({rollouts} rollouts): {sum(sizes.values()) / 1e6:.1f} MB "
                  f"in {len(sizes)} files ({(sum(sizes.values()) - sizes['plotly.min.js']) / 1e6:.1f} MB without "
                  f"plotly.min.js); index.html {sizes['index.html'] / 1e3:.0f} kB, largest item file "
                  f"{max(items.values()) / 1e3:.0f} kB, index {index / 1e6:.1f} MB; "
                  f"{info['rollouts_shown']} rollouts shown; {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB")
            if args.publish:
                wall, cpu, peak = child(root, "publish")
                build = json.loads((root / "data/published/build.json").read_text())
                ro = build.get("rollouts") or {}
                files = list((root / "data/published/data/rollouts").glob("*.parquet"))
                print(f"  publish: rollouts config {sum(ro.get('rows', {}).values())} rows, {ro.get('generations')} "
                      f"generations, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB in {len(files)} shards; "
                      f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
