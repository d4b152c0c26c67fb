"""benchmarks/strong_policy_run.py writes a run a user can ingest as it is: the synthetic levels the embedded model
mostly solves, at a seed other than the main job's, and it never overwrites a run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipeline.config import load_params
from pipeline.ingest import run as ingest_run
from pipeline.io import read_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import strong_policy_run


def test_the_run_ingests_the_easy_levels_only(tmp_path: Path) -> None:
    assert strong_policy_run.main([str(tmp_path / "run"), "--n-per-level", "20", "--seed", "2"]) == 0
    params = load_params(tmp_path / "run" / "params.yaml")
    assert params.rollout.k == 8 and params.rollout.policies == ["smollm2-135m-3shot"]
    ingest_run(params, root=tmp_path / "run", progress=False)
    problems = read_table(tmp_path / "run" / params.paths.problems, name="problems").to_pylist()
    assert {p["level"] for p in problems} == {"L1", "L2", "L3"}
    assert 40 <= len(problems) <= 60  # 20 a level, repeats dropped (L1 has 81 distinct sums)
    with pytest.raises(SystemExit, match="exists"):
        strong_policy_run.main([str(tmp_path / "run")])
