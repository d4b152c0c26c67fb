"""Synthetic verified jobs for annotate's tests: problems whose completions fire most detectors (loops, flips,
unsupported answers, truncations, rare successes), as Arrow tables or written as a table set under a root."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import yaml

from pipeline.config import load_params
from pipeline.io import write_table
from pipeline.schema import schema
from pipeline.verify import verifier_id

PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}}


def job_tables(problems: range, vid: str) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(verdicts, rollouts, problems) for the problem numbers in ``problems``; 4 to 8 samples each."""
    probs, rolls, verds = [], [], []
    for i in problems:
        a, b = 10 + i, 3 + i % 7
        gold = str(a + b)
        texts = [(f" {a} + {b} = {a + b}. The answer is {a + b}.", "correct", "stop"),
                 (f" The answer is {a + b + 1}. The answer is {a + b}.", "correct", "stop"),
                 (f" {a} + {b} = {a + b + 2}. The answer is {a + b + 2}.", "incorrect", "stop"),
                 (f" The answer is {a + b}.", "correct" if i % 3 else "incorrect", "stop"),
                 (" " + f"{a} + {b} = " * 40, "no_answer", "length"),
                 (f" Let me think. {a} plus {b}. So {a + b}. Wait, {a + b + 1}. The answer is {a + b + 1}.", "incorrect",
                  "stop"),
                 (f" 7 * 9 = 63. The answer is {a + b}.", "correct", "stop"),
                 (f" {a} + {b} = {a + b}. {a + b} = {a + b}. The answer is \\boxed{{{a + b}}}.", "correct", "stop")]
        pid = f"p{i:04d}"
        probs.append({"problem_id": pid, "source": "t", "source_id": str(i), "question": f"What is {a} + {b}?",
                      "answer": gold, "solution": None if i % 2 else f"{a} + {b} = {gold}.", "n_duplicates": 0})
        for j, (text, status, finish) in enumerate(texts[: 4 + i % 5]):
            rolls.append({"problem_id": pid, "policy_id": "pol", "sample_idx": j, "seed": j, "completion": text,
                          "n_tokens": 10 + 3 * j, "finish_reason": finish})
            ext = text.rstrip(".").rsplit("answer is ", 1)[-1] if "answer is" in text else None
            verds.append({"problem_id": pid, "policy_id": "pol", "sample_idx": j, "verifier_id": vid, "status": status,
                          "extracted": ext, "extractor": "answer_is"})
    return (schema("verdicts").from_rows(verds), schema("rollouts").from_rows(rolls), schema("problems").from_rows(probs))


def write_params(root: Path, extra: dict | None = None) -> str:
    """params.yaml under ``root`` (PARAMS plus ``extra`` sections); returns its verifier_id."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump({**PARAMS, **(extra or {})}))
    return verifier_id(load_params(root / "params.yaml").verify)


def write_job(root: Path, problems: range, vid: str, *, shard: int = 0) -> None:
    """The job's three input tables, as shard ``part-<shard>`` of each (a later shard adds problems)."""
    for name, table in zip(("verdicts", "rollouts", "problems"), job_tables(problems, vid), strict=True):
        write_table(table, root / "data" / name / f"part-{shard}.parquet", name=name)
