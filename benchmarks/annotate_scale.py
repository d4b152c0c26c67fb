"""Annotate over N synthetic rollouts vs the equivalent raw DuckDB query: wall time and peak memory.

    .venv/bin/python benchmarks/annotate_scale.py --rows 10000000     # the figures in the README
    .venv/bin/python benchmarks/annotate_scale.py --rows 200000       # a quick look

Generates (once per row count, with DuckDB) N rollouts of N/k problems (k = 8) with verdicts of the
current verifier_id under benchmarks/out/annotate-<N>/, pass rates spread over every band, 2 %
truncated, 1 % hedged with two answers. Then, each in its own process (peak RSS = that process's
ru_maxrss): (a) the annotate stage (`pipeline.annotate.run`: flags + difficulty + metrics, no
plots), (b) the raw query: the same per-group aggregation (n, n_correct, n_no_answer, n_failed,
pass rate, token mean/std for correct and other) over the same Parquet, written to Parquet, under
the same DuckDB memory limit. Prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}}


def generate(out: Path, rows: int, k: int = 8) -> None:
    import duckdb
    import yaml

    from pipeline.config import parse_params
    from pipeline.verify import verifier_id

    if (out / "done").is_file():
        return
    vid = verifier_id(parse_params(PARAMS).verify)
    for d in ("problems", "rollouts", "verdicts"):
        (out / "data" / d).mkdir(parents=True, exist_ok=True)
    (out / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    con = duckdb.connect()
    con.execute("SET memory_limit = '2GB'; SET preserve_insertion_order = false")
    n_prob = rows // k
    con.execute(f"""COPY (SELECT 'p_' || lpad(i::VARCHAR, 12, '0') AS problem_id, 'synthetic' AS source, i::VARCHAR AS source_id,
        'train' AS split, 'What is ' || (i % 97) || ' + ' || (i % 89) || '?' AS question,
        ((i % 97) + (i % 89))::VARCHAR AS answer,
        (i % 97) || ' + ' || (i % 89) || ' = ' || ((i % 97) + (i % 89)) || '.' AS solution, NULL::VARCHAR AS subject,
        'L' || (i % 9) AS level, 0::BIGINT AS n_duplicates, NULL::VARCHAR AS parent_id, NULL::VARCHAR AS method,
        NULL::VARCHAR AS method_version, NULL::VARCHAR AS metadata FROM range({n_prob}) t(i))
        TO '{out}/data/problems/part-0.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    # sample j of problem i is correct when j < (i % (k + 1)): every pass rate 0/k..k/k occurs
    base = f"""SELECT i // {k} AS pi, i % {k} AS j, 'p_' || lpad((i // {k})::VARCHAR, 12, '0') AS problem_id,
        ((i // {k}) % 97) + ((i // {k}) % 89) AS gold, (i % {k}) < ((i // {k}) % {k + 1}) AS ok, hash(i) % 100 AS r
        FROM range({rows}) t(i)"""
    con.execute(f"""COPY (SELECT problem_id, 'pol_bench' AS policy_id, j::BIGINT AS sample_idx, j::BIGINT AS seed,
        CASE WHEN r < 2 THEN ' ' || (pi % 97) || ' + ' || (pi % 89) || ' = ' || (pi % 97) || ' + ' || (pi % 89) || ' = '
             WHEN r < 3 THEN ' The answer is ' || (gold + 1) || '. The answer is ' || gold || '.'
             ELSE ' ' || (pi % 97) || ' + ' || (pi % 89) || ' = ' || CASE WHEN ok THEN gold ELSE gold + 1 END
                  || '. The answer is ' || CASE WHEN ok THEN gold ELSE gold + 1 END || '.' END AS completion,
        (12 + r % 20)::BIGINT AS n_tokens, CASE WHEN r < 2 THEN 'length' ELSE 'stop' END AS finish_reason FROM ({base}))
        TO '{out}/data/rollouts/part-0.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)""")
    con.execute(f"""COPY (SELECT problem_id, 'pol_bench' AS policy_id, j::BIGINT AS sample_idx, '{vid}' AS verifier_id,
        CASE WHEN r < 2 THEN 'no_answer' WHEN ok THEN 'correct' ELSE 'incorrect' END AS status,
        CASE WHEN r < 2 THEN NULL WHEN ok THEN gold::VARCHAR ELSE (gold + 1)::VARCHAR END AS extracted,
        CASE WHEN r < 2 THEN NULL ELSE 'answer_is' END AS extractor, NULL::VARCHAR AS detail FROM ({base}))
        TO '{out}/data/verdicts/part-0.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)""")
    (out / "done").write_text("ok\n")


RAW = """COPY (
  SELECT v.problem_id, v.policy_id, count(*) AS n, count(*) FILTER (WHERE v.status = 'correct') AS n_correct,
         count(*) FILTER (WHERE v.status = 'no_answer') AS n_no_answer,
         count(*) FILTER (WHERE v.status IN ('timeout', 'error')) AS n_failed,
         count(*) FILTER (WHERE v.status = 'correct') / count(*) AS pass_rate,
         avg(r.n_tokens) FILTER (WHERE v.status = 'correct') AS mean_tokens_correct,
         stddev_samp(r.n_tokens) FILTER (WHERE v.status = 'correct') AS std_tokens_correct,
         avg(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS mean_tokens_incorrect,
         stddev_samp(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS std_tokens_incorrect
  FROM read_parquet('{d}/verdicts/*.parquet') v
  JOIN read_parquet('{d}/rollouts/*.parquet') r USING (problem_id, policy_id, sample_idx)
  WHERE v.verifier_id = '{vid}'
  GROUP BY ALL) TO '{out}' (FORMAT parquet, COMPRESSION zstd)"""


def phase(name: str, out: Path) -> dict:
    import tempfile

    import duckdb

    from pipeline.annotate import run
    from pipeline.config import load_params
    from pipeline.verify import verifier_id

    t = time.perf_counter()  # imports excluded from both timings
    if name == "stage":
        res = run(load_params(out / "params.yaml"), root=out, progress=False, plots=False)
        extra = {"groups": res.groups, "flags": res.flags, "bands": res.bands}
    else:
        p = load_params(out / "params.yaml")
        with tempfile.TemporaryDirectory() as tmp:
            con = duckdb.connect(config={"memory_limit": f"{p.annotate.memory_limit_mb}MB", "temp_directory": tmp,
                                         "preserve_insertion_order": False})
            con.execute(RAW.format(d=out / "data", vid=verifier_id(p.verify), out=out / "raw.parquet"))
            extra = {"groups": con.execute(f"SELECT count(*) FROM '{out}/raw.parquet'").fetchone()[0]}
    return {"seconds": time.perf_counter() - t, **extra}


def measure(name: str, out: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cmd = [sys.executable, __file__, "--phase", name, "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["peak_mib"] = peak_kib / 1024 if peak_kib > before else float("nan")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--phase", choices=["stage", "raw"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if a.phase:
        print(json.dumps(phase(a.phase, a.out)))
        return
    out = REPO / "benchmarks" / "out" / f"annotate-{a.rows}"
    t = time.perf_counter()
    generate(out, a.rows)
    print(f"data: {a.rows:,} rollouts under {out} ({time.perf_counter() - t:.1f} s to generate or reuse)", flush=True)
    # raw first, then the stage; peak RSS of each is its own process's (RUSAGE_CHILDREN is a running max, so raw
    # must be measured first: it is the smaller one)
    raws = [measure("raw", out) for _ in range(a.repeat)]
    stages = [measure("stage", out) for _ in range(a.repeat)]
    raw, stage = min(raws, key=lambda r: r["seconds"]), min(stages, key=lambda r: r["seconds"])
    print(f"{'':<28}{'raw DuckDB query':>18}{'annotate stage':>18}")
    print(f"{'wall seconds':<28}{raw['seconds']:>18.2f}{stage['seconds']:>18.2f}")
    print(f"{'peak RSS (MiB)':<28}{raw['peak_mib']:>18.0f}{stage['peak_mib']:>18.0f}")
    print(f"{'groups':<28}{raw['groups']:>18,}{stage['groups']:>18,}")
    print(f"stage / raw = {stage['seconds'] / raw['seconds']:.2f}x (target <= 1.5x); stage peak "
          f"{stage['peak_mib']:.0f} MiB (target < 1024); flags written: {stage['flags']:,}; bands: {stage['bands']}")


if __name__ == "__main__":
    main()
