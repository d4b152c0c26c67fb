"""Annotate on long chains of thought (reasoning models): N completions of ~16k tokens, peak RSS and time vs a raw scan.

    .venv/bin/python benchmarks/annotate_longcot.py --rows 20000    # the issue's size (1.3 GB of text)
    .venv/bin/python benchmarks/annotate_longcot.py --rows 1000     # a quick look, with the estimate for 20,000
    .venv/bin/python benchmarks/annotate_longcot.py --rows 4000 --workers 1 2   # one run per worker count: the speed-up

Generates (once per row count) N rollouts of N/8 problems (k = 8) under benchmarks/out/annotate-longcot-<N>/ (never
in the repository), each ~64 KB (~16k tokens at 4 characters a token): a reasoning-model-like completion built
deterministically from real solutions in ../shared/data (GSM8K train and MATH train), ``<think>`` working that
re-derives the problem's own solution and its neighbours' with varied numbers, "Wait, let me double-check" turns,
answer flip-flops, then ``</think>`` and a final answer. Mixed in, by row: 10 % repetition loops (one paragraph
written over and over), 5 % truncated (the thinking never closes, finish_reason length), 40 % correct.

Two phases, each in its own process (imports not timed; peak RSS = that process's VmHWM (benchmarks/peak.py), DuckDB included):

* **stage**: ``pipeline.annotate.run`` without plots (every detector: the Python ones read every long completion
  they are candidates for), under the stage's DuckDB memory limit (``annotate.memory_limit_mb``);
* **raw scan**: DuckDB ``SELECT count(*), sum(length(completion))`` over the same rollouts Parquet: the floor of
  reading the text once.

Prints both, the stage's per-row cost and, for N < 20,000, the time the stage would take on 20,000 rows at that rate.
Memory is bounded, not constant: DuckDB holds the candidate rows up to ``annotate.memory_limit_mb`` (512 MB by
default; it spills past it) and Python one batch of ``BATCH_TEXT_BYTES`` of text (32 MiB); measured peak RSS
627 MiB at 1,000 rows, 987 MiB at 4,000, 1,187 MiB at 20,000 (965 s, 48 ms a rollout, on 2 shared cores;
the raw scan 0.55 s). Every stage run is from scratch (``annotate.incremental`` off).

28 Nov 2026, quiet 2-core box, 4,000 rows, ``--workers 1`` then ``--workers 2`` (two invocations back to back):
438.1 s with one detector worker, 241.4 s with two: **1.81x**; CPU 108.8 and 117.3 ms a rollout (the workers'
start-up and the batches' transfer); the stage's own peak 943 and 934 MiB (the workers' not counted).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from peak import own_peak_mib  # noqa: E402

DATA = REPO.parent / "shared" / "data"
PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}}
TARGET_CHARS = 64_000  # ~16k tokens
K = 8
TURNS = ("Wait, let me double-check that.", "Hmm, let me re-read the problem.", "Let me verify this step by step.",
         "Alternatively, I could approach it differently.", "Actually, I should be careful with the units here.",
         "So far so good. Let me continue.")


def _solutions() -> list[tuple[str, str, str]]:
    """(question, solution, gold) from GSM8K train and MATH train."""
    out = []
    for line in (DATA / "gsm8k" / "train.jsonl").read_text().splitlines():
        r = json.loads(line)
        sol, gold = r["answer"].rsplit("####", 1)
        out.append((r["question"], re.sub(r"<<[^>]*>>", "", sol).strip(), gold.strip().replace(",", "")))
    for line in (DATA / "math" / "train.jsonl").read_text().splitlines():
        r = json.loads(line)
        m = r["solution"].rsplit("\\boxed{", 1)
        gold = m[1].split("}", 1)[0] if len(m) == 2 else "0"
        out.append((r["problem"], r["solution"], gold))
    return out


def _vary(text: str, rng: random.Random) -> str:
    """The solution with some of its numbers changed (a re-derivation that drifts)."""
    return re.sub(r"\d+", lambda m: str(int(m.group()) + rng.choice((0, 0, 0, 1, -1, 10))) if len(m.group()) < 9
                  else m.group(), text)


def completion(i: int, pool: list[tuple[str, str, str]], own: tuple[str, str, str]) -> tuple[str, str]:
    """One ~64 KB long-CoT completion (deterministic in ``i``) and its finish_reason: two thirds of its pieces
    re-derive the problem's ``own`` (question, solution, gold), the rest wander to other solutions."""
    gold = own[2]
    rng = random.Random(i)
    kind = i % 20  # 0, 1: loops; 2: truncated; the rest ordinary
    parts = ["<think>\n"]
    size = 0
    loop_paragraph = None
    while size < TARGET_CHARS:
        if kind in (0, 1) and loop_paragraph is not None and size > TARGET_CHARS // 4:
            piece = loop_paragraph
        else:
            _, sol, g = own if rng.random() < 2 / 3 else pool[rng.randrange(len(pool))]
            piece = f"{_vary(sol, rng)}\n{rng.choice(TURNS)} "
            if rng.random() < 0.15:
                piece += f"So the answer is {g}. Hmm, but maybe it is {_vary(g, rng)}.\n"
            loop_paragraph = loop_paragraph or piece
        parts.append(piece)
        size += len(piece)
    if kind == 2:
        return "".join(parts), "length"
    # the thinking ends on its answer: the gold, or (1 row in 10) another one the final section then overrides
    parts.append(f"\nSo the answer is {gold if i % 10 else _vary(gold, rng) + '1'}.\n</think>\n\n"
                 f"The final answer is $\\boxed{{{gold}}}$.")
    return "".join(parts), "stop"


def generate(out: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    from pipeline.config import parse_params
    from pipeline.schema import schema
    from pipeline.verify import verifier_id

    vid = verifier_id(parse_params(PARAMS).verify)
    if (out / "done").is_file() and (out / "done").read_text().strip() == vid:
        return  # generated for the current verifier (its id hashes the verify code: a change regenerates)
    for d in ("problems", "rollouts", "verdicts"):
        (out / "data" / d).mkdir(parents=True, exist_ok=True)
    (out / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    pool = _solutions()
    n_prob = max(1, rows // K)
    probs = [pool[(p * 7919) % len(pool)] for p in range(n_prob)]
    pids = [f"p_{p:09d}" for p in range(n_prob)]
    pq.write_table(schema("problems").from_rows([
        {"problem_id": pids[p], "source": "t", "source_id": str(p), "question": q, "answer": g, "solution": s,
         "n_duplicates": 0} for p, (q, s, g) in enumerate(probs)]), out / "data/problems/part-0.parquet",
        compression="zstd")
    rsch, vsch = schema("rollouts").arrow, schema("verdicts").arrow
    with pq.ParquetWriter(out / "data/rollouts/part-0.parquet", rsch, compression="zstd") as rw, \
            pq.ParquetWriter(out / "data/verdicts/part-0.parquet", vsch, compression="zstd") as vw:
        for start in range(0, rows, 256):  # streamed: never all the text in memory
            rr, vv = [], []
            for i in range(start, min(rows, start + 256)):
                p, j = i // K % n_prob, i % K
                gold = probs[p][2]
                text, finish = completion(i, pool, probs[p])
                correct = finish == "stop" and (i * 2654435761) % 10 < 4
                rr.append({"problem_id": pids[p], "policy_id": "pol_longcot", "sample_idx": j, "seed": j,
                           "completion": text, "n_tokens": len(text) // 4, "finish_reason": finish})
                vv.append({"problem_id": pids[p], "policy_id": "pol_longcot", "sample_idx": j, "verifier_id": vid,
                           "status": "correct" if correct else ("no_answer" if finish == "length" else "incorrect"),
                           "extracted": None if finish == "length" else (gold if correct else gold + "1"),
                           "extractor": None if finish == "length" else "boxed"})
            rw.write_table(pa.Table.from_pylist(rr, schema=rsch))
            vw.write_table(pa.Table.from_pylist(vv, schema=vsch))
    (out / "done").write_text(vid + "\n")


def phase(name: str, out: Path, workers: int | None = None) -> dict:
    import resource

    import duckdb

    from pipeline.annotate import run
    from pipeline.config import load_params

    params = load_params(out / "params.yaml")
    # from scratch every run: incremental annotate would keep the previous run's flags (its fingerprints match)
    knobs = {"incremental": False} | ({} if workers is None else {"workers": workers})
    params = params.model_copy(update={"annotate": params.annotate.model_copy(update=knobs)})
    t = time.perf_counter()
    if name == "stage":
        res = run(params, root=out, progress=False, plots=False)
        cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                  for f in ("ru_utime", "ru_stime"))  # the stage and its detector workers (reaped with the pool)
        return {"seconds": time.perf_counter() - t, "cpu_s": cpu, "workers": params.annotate.workers,
                "rollouts": res.samples, "flags": res.flags,
                "detector_errors": res.detector_errors,
                "flag_rates": {k: v for k, v in res.flag_rates.items() if v}}
    con = duckdb.connect(config={"memory_limit": f"{params.annotate.memory_limit_mb}MB"})
    n, chars = con.execute(f"SELECT count(*), sum(length(completion)) FROM read_parquet('{out}/data/rollouts/*.parquet')"
                           ).fetchall()[0]
    return {"seconds": time.perf_counter() - t, "rollouts": n, "chars": chars}


def measure(name: str, out: Path, workers: int | None = None) -> dict:
    extra = [] if workers is None else ["--workers", str(workers)]
    proc = subprocess.run([sys.executable, __file__, "--phase", name, "--out", str(out), *extra], capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"phase {name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--phase", choices=["stage", "raw"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--workers", type=int, nargs="+", default=None,
                    help="annotate.workers for the stage, one run each (default: params, one per core)")
    a = ap.parse_args()
    if a.phase:
        res = phase(a.phase, a.out, a.workers[0] if a.workers else None)
        res["peak_mib"] = own_peak_mib()
        print(json.dumps(res))
        return
    out = REPO / "benchmarks" / "out" / f"annotate-longcot-{a.rows}"
    t = time.perf_counter()
    generate(out, a.rows)
    size = sum(f.stat().st_size for f in (out / "data" / "rollouts").glob("*.parquet"))
    print(f"data: {a.rows:,} rollouts under {out} ({time.perf_counter() - t:.1f} s to generate or reuse; "
          f"rollouts Parquet {size / 2**20:.0f} MiB)", flush=True)
    raw = measure("raw", out)
    print(f"raw scan: {raw['rollouts']:,} rows, {raw['chars'] / 1e6:,.0f} M characters "
          f"({raw['chars'] / raw['rollouts'] / 4:,.0f} tokens a row at 4 chars/token) in {raw['seconds']:.2f} s, "
          f"peak {raw['peak_mib']:.0f} MiB", flush=True)
    walls = {}
    for w in a.workers or [None]:
        stage = measure("stage", out, w)
        if stage["rollouts"] != raw["rollouts"]:
            raise SystemExit(f"the stage annotated {stage['rollouts']} of {raw['rollouts']} rollouts")
        per_row = stage["seconds"] / stage["rollouts"]
        walls[stage["workers"]] = stage["seconds"]
        print(f"stage ({stage['workers']} detector workers): {stage['seconds']:.1f} s ({per_row * 1000:.1f} ms a rollout, "
              f"{stage['seconds'] / raw['seconds']:.0f}x the raw scan), CPU {1000 * stage['cpu_s'] / stage['rollouts']:.1f} "
              f"ms a rollout, peak RSS {stage['peak_mib']:.0f} MiB (the stage's process; goal < 2048), "
              f"{stage['flags']:,} flags, detector errors {stage['detector_errors'] or 'none'}", flush=True)
    if len(walls) > 1:
        one = walls.get(1)
        print("speed-up over 1 worker: " + ", ".join(f"{w} workers {one / s:.2f}x" for w, s in walls.items()
                                                     if one and w != 1))
    print(f"flag rates: {json.dumps({k: round(v, 3) for k, v in stage['flag_rates'].items()})}")
    if a.rows < 20_000:
        print(f"estimate for 20,000 rollouts at this rate: {per_row * 20_000 / 60:.0f} min on this machine (memory: "
              f"DuckDB's annotate.memory_limit_mb, spilling past it, plus one batch of BATCH_TEXT_BYTES in Python)")


if __name__ == "__main__":
    main()
