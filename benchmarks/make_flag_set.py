"""Make the completions of the labelled flag set (pipeline/annotate/flag_labels.jsonl), before labelling.

    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python benchmarks/make_flag_set.py

Runs the pipeline's own stages with benchmarks/flag_set.params.yaml: ingest (the synthetic set, 12
items a level, and the first 25 items of GSM8K test) and rollout (the main policy's 3-shot prompt and
sampling with max_tokens 256, k = 4; resumable: a killed run goes on at the first missing shard); then
the same with benchmarks/flag_set_multistep.params.yaml (samples 4..11 of the two- and three-step levels
L7 and L8, where the lucky successes are; its samples 0..3 repeat the first set's, same seeds, and are
checked to be identical, not exported). Writes benchmarks/out/flag_set/unlabelled.jsonl: one row per
completion with the labelled set's fields (pipeline.annotate.quality.FIELDS), the labels empty. A person
fills the labels by reading each completion (docs/flags.md, "Labelling guide"): pipeline/annotate/flag_labels.jsonl.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETS = [  # (params, output folder, first sample exported)
    (REPO / "benchmarks" / "flag_set.params.yaml", REPO / "benchmarks" / "out" / "flag_set", 0),
    (REPO / "benchmarks" / "flag_set_multistep.params.yaml", REPO / "benchmarks" / "out" / "flag_set_multistep", 4),
]
OUT = SETS[0][1]
GSM8K_TEST = REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def main() -> None:
    import argparse

    import duckdb

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--export-only", action="store_true", help="only write unlabelled.jsonl from the rollouts there")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from pipeline.annotate.quality import FIELDS, LABELS

    OUT.mkdir(parents=True, exist_ok=True)
    head = GSM8K_TEST.read_text().splitlines(keepends=True)[:25]
    (OUT / "gsm8k_test_head25.jsonl").write_text("".join(head))
    for params, _, _ in SETS:
        for stage in () if args.export_only else ("prepare-model", "ingest", "rollout"):
            subprocess.run([sys.executable, "-m", "pipeline.cli", stage, "--params", str(params)], check=True, cwd=REPO)
    rows = []
    for _, out, first in SETS:
        rows += duckdb.sql(f"""
            SELECT p.source, r.problem_id, r.sample_idx, p.question, p.answer AS gold, p.solution, r.completion,
                   r.n_tokens, r.finish_reason
            FROM '{out}/rollouts/*.parquet' r JOIN '{out}/problems/*.parquet' p USING (problem_id)
            WHERE r.sample_idx >= {first}
            ORDER BY p.source DESC, p.problem_id, r.sample_idx""").fetchall()
    same = duckdb.sql(f"""SELECT count(*), count(*) FILTER (WHERE a.completion = b.completion)
        FROM '{SETS[1][1]}/rollouts/*.parquet' b JOIN '{SETS[0][1]}/rollouts/*.parquet' a
        USING (problem_id, policy_id, sample_idx)""").fetchall()[0]
    print(f"samples in both sets: {same[0]}, identical text: {same[1]}")
    cols = ("source", "problem_id", "sample_idx", "question", "gold", "solution", "completion", "n_tokens", "finish_reason")
    with open(OUT / "unlabelled.jsonl", "w") as fh:
        for values in rows:
            r = dict(zip(cols, values, strict=True))
            row = {"id": f"{r['problem_id'][:12]}:{r['sample_idx']}", **{k: r[k] for k in cols if k in FIELDS},
                   "final_answer": None, **{k: None for k in LABELS}, "note": ""}
            fh.write(json.dumps({k: row[k] for k in FIELDS}) + "\n")
    print(f"{len(rows)} completions -> {OUT / 'unlabelled.jsonl'}")


if __name__ == "__main__":
    main()
