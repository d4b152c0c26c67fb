"""The job a `vllm serve` fleet would run, end to end at a small size: ingest -> rollout (the real ``openai``
engine against the real replay server, benchmarks/replay_server.py) -> verify -> annotate, through the CLI.

The replay server draws each completion from (gold, seed), so the grades are known by construction: a
completion that ends in a box, not cut, is correct exactly when the box holds the gold. benchmarks/scale.py
runs the same path at 10k to 240k rollouts (docs/scale.md).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.io import read_table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from replay_server import Config, ReplayServer, completion  # noqa: E402

pytestmark = pytest.mark.slow

K = 4
MAX_TOKENS = 1024  # the corpus's median is set to 300 tokens here: a long tail past it is cut ("length")
BOXED_END = re.compile(r"\\boxed\{([^{}]*)\}\$?\.?$")


def _params(root: Path, url: str) -> Path:
    params = {
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "split": "train",
                                "options": {"n_per_level": 2, "seed": 0}}]},
        "policies": {"served": {"model": "replay", "revision": "r1", "engine": "openai", "prompt": "zeroshot_boxed",
                                "thinking": "auto", "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": MAX_TOKENS}}},
        "rollout": {"policies": ["served"], "k": K, "shard_size": 4,
                    "engine_options": {"openai": {"base_url": url, "concurrency": 8, "startup_timeout_s": 10}}},
        "verify": {"workers": 1},
    }
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


def test_replay_job_end_to_end(tmp_path):
    root = tmp_path / "job"
    root.mkdir()
    params = _params(root, "http://127.0.0.1:9/v1")  # ingest first: the server's golds come from its problems
    _run("ingest", "--params", str(params), "--no-progress")
    problems = read_table(root / "data/problems", name="problems")
    golds = dict(zip(problems.column("question").to_pylist(), problems.column("answer").to_pylist(), strict=True))
    n = problems.num_rows

    with ReplayServer(Config(model="replay", golds=golds, median_tokens=300)) as srv:
        params = _params(root, srv.url)
        _run("rollout", "--params", str(params), "--no-progress")
        assert srv.replay.completions == n * K  # one request per sample (n=1, its own seed)
        _run("rollout", "--params", str(params), "--no-progress")  # a rerun asks for nothing
        assert srv.replay.completions == n * K
    _run("verify", "--params", str(params), "--no-progress")
    _run("annotate", "--params", str(params), "--no-progress", "--no-plots")

    rollouts = read_table(root / "data/rollouts", name="rollouts")
    verdicts = read_table(root / "data/verdicts", name="verdicts")
    difficulty = read_table(root / "data/difficulty", name="difficulty")
    flags = read_table(root / "data/flags", name="flags")
    assert rollouts.num_rows == verdicts.num_rows == n * K and difficulty.num_rows == n

    # each text is the corpus's own for its (question, seed), cut at max_tokens
    qs = dict(zip(problems.column("problem_id").to_pylist(), problems.column("question").to_pylist(), strict=True))
    rows = rollouts.to_pylist()
    for r in rows[:40]:
        text, _, _ = completion(golds[qs[r["problem_id"]]], seed=r["seed"], key=qs[r["problem_id"]], median_tokens=300)
        assert text.startswith(r["completion"]) and (r["finish_reason"] == "length") == (len(text) > len(r["completion"]))
    assert {r["finish_reason"] for r in rows} == {"stop", "length"}

    # boxed endings are graded by what the box holds; cut completions have no answer
    status = {(v["problem_id"], v["sample_idx"]): v["status"] for v in verdicts.to_pylist()}
    boxed = 0
    for r in rows:
        got = status[(r["problem_id"], r["sample_idx"])]
        if r["finish_reason"] == "length":
            assert got == "no_answer", r["completion"][-200:]
        elif m := BOXED_END.search(r["completion"]):
            boxed += 1
            assert got == ("correct" if m.group(1) == golds[qs[r["problem_id"]]] else "incorrect"), r["completion"][-200:]
    assert boxed > n * K // 2
    statuses = set(verdicts.column("status").to_pylist())
    assert {"correct", "incorrect", "no_answer"} <= statuses
    assert len(set(difficulty.column("band").to_pylist())) >= 3  # the corpus spreads pass rates over the bands
    fired = set(flags.column("flag").to_pylist())
    assert "truncated" in fired
    truncated = pc.sum(pc.equal(rollouts.column("finish_reason"), "length")).as_py()
    assert pc.sum(pc.equal(flags.column("flag"), "truncated")).as_py() == truncated
