"""The verify golden table (tests/data/verify_golden.jsonl): gold, completion, expected status.

Grown from real completions of the embedded model (tests/data/embedded_completions.jsonl, made
by tests/data/make_completions.py): ``real`` rows quote a completion with its problem's gold,
``real-regold`` rows give a real completion the gold a careful reader sees in it (to exercise the
correct path of each rule), ``pitfall`` rows pin the decided policy for each known math-verify
pitfall. The whole table runs through the stage's core, worker pool included.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline.config import VerifyConfig
from pipeline.schema import schema
from pipeline.verify import verify

CASES = [json.loads(line) for line in (Path(__file__).parent / "data/verify_golden.jsonl").read_text().splitlines()]


def test_table_shape():
    assert len(CASES) >= 60
    origins = Counter(c["origin"] for c in CASES)
    assert origins["real"] >= 40
    assert {c["expected"] for c in CASES} >= {"correct", "incorrect", "no_answer", "timeout"}


@pytest.fixture(scope="module")
def verdicts():
    probs = schema("problems").from_rows([
        {"problem_id": f"g{i}", "source": "golden", "source_id": c["id"], "question": f"golden case {c['id']}",
         "answer": c["gold"], "n_duplicates": 0} for i, c in enumerate(CASES)])
    rows = schema("rollouts").from_rows([
        {"problem_id": f"g{i}", "policy_id": "pol", "sample_idx": 0, "seed": 0, "completion": c["completion"],
         "n_tokens": 1, "finish_reason": "stop"} for i, c in enumerate(CASES)])
    res = verify(rows, probs, config=VerifyConfig(workers=2, timeout_s=1.0))
    return {v["problem_id"]: v for v in res.verdicts.to_pylist()}


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c["id"] for c in CASES])
def test_golden(verdicts, i):
    case, got = CASES[i], verdicts[f"g{i}"]
    assert got["status"] == case["expected"], (case["note"], case["completion"][-120:], got)
    assert got["extracted"] == case["extracted"]
