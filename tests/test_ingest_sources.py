"""Each registered source on real or realistic input, and the real GSM8K / MATH files through `dvc repro`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from shared_data import shared_path

from pipeline.config import ConfigError, SourceConfig
from pipeline.ingest import ingest
from pipeline.ingest.sources import SOURCES, read_source
from pipeline.ingest.synthetic import LEVELS, SyntheticOptions, generate

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

REPO = Path(__file__).resolve().parent.parent


def test_registry_has_every_documented_source():
    assert {"gsm8k", "math", "jsonl", "parquet", "hf", "synthetic"} <= set(SOURCES)


def test_synthetic_is_seeded_graded_and_verifiable():
    opts = SyntheticOptions(n_per_level=5, seed=3)
    a, b = list(generate(opts)), list(generate(opts))
    assert a == b and len(a) == 5 * len(LEVELS)
    assert list(generate(SyntheticOptions(n_per_level=5, seed=4))) != a
    for item in a:  # the gold is what the reference solution computes
        assert item.solution.endswith(f"\\boxed{{{item.answer}}}.")
        for step in item.solution.split(". ")[:-1]:
            lhs, rhs = step.rstrip(".").split(" = ")
            assert eval(lhs) == int(rhs)
    steps = {it.level: it.solution.count(" = ") for it in a}
    assert steps["L1"] == 1 and steps["L7"] == 2 and steps["L8"] == 3


def test_synthetic_rejects_unknown_level():
    with pytest.raises(ValueError, match="unknown levels"):
        SyntheticOptions(levels=["L99"])


def test_parquet_source_with_mapping(tmp_path):
    pq.write_table(pa.table({"prompt": ["What is 3 + 4?", "What is 5 + 5?"], "gold": [7, 10], "uid": ["a", "b"],
                             "extra": ["x", "y"]}), tmp_path / "p.parquet")
    cfg = SourceConfig(name="pq", kind="parquet", path="p.parquet", mapping={"question": "prompt", "answer": "gold", "id": "uid"})
    res = ingest(read_source(cfg, root=tmp_path))
    rows = res.problems.to_pylist()
    assert [(r["source_id"], r["answer"]) for r in rows] == [("a", "7"), ("b", "10")]
    assert json.loads(rows[0]["metadata"]) == {"extra": "x"}


def test_parquet_source_missing_column_is_a_config_error(tmp_path):
    pq.write_table(pa.table({"prompt": ["q"]}), tmp_path / "p.parquet")
    cfg = SourceConfig(name="pq", kind="parquet", path="p.parquet", mapping={"question": "prompt"})
    with pytest.raises(ConfigError, match=r"columns \['answer'\] not found"):
        list(read_source(cfg, root=tmp_path))


def test_hf_source_loads_a_local_dataset_folder(tmp_path):
    """The real `datasets.load_dataset` code path, on a local folder (the Hub is unreachable here)."""
    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    rows = [{"problem": "Find $x$ if $2x = 4$.", "solution": "So $x = \\boxed{2}$.", "level": "Level 1"},
            {"problem": "Find $y$ if $y + 1 = 0$.", "solution": "$y = \\boxed{-1}$", "level": "Level 2"}]
    (folder / "data" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = SourceConfig(name="hub", kind="hf", path="ds", mapping={"question": "problem"},
                       options={"gold_from": "boxed", "hf_split": "train"})
    res = ingest(read_source(cfg, root=tmp_path))
    assert [(r["answer"], r["level"]) for r in res.problems.to_pylist()] == [("2", "Level 1"), ("-1", "Level 2")]


def test_missing_file_is_a_clear_error(tmp_path):
    cfg = SourceConfig(name="g", kind="gsm8k", path="nope.jsonl")
    with pytest.raises(ConfigError, match=r"file not found: .*nope\.jsonl"):
        list(read_source(cfg, root=tmp_path))


def test_real_gsm8k_and_math_through_dvc_repro(tmp_path):
    """Ingest of ../shared/data through `dvc repro` on a copy of the repository; a second repro does nothing."""
    SHARED = shared_path()
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, work / f)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["ingest"]["sources"] = [  # same order as params.yaml: dvc.yaml's deps index them
        {"name": "synthetic", "kind": "synthetic", "options": {"n_per_level": 2}},
        {"name": "gsm8k_train", "kind": "gsm8k", "path": str(SHARED / "gsm8k/train.jsonl"), "split": "train"},
        {"name": "gsm8k_test", "kind": "gsm8k", "path": str(SHARED / "gsm8k/test.jsonl"), "split": "test"},
        {"name": "math_train", "kind": "math", "path": str(SHARED / "math/train.jsonl"), "split": "train"},
    ]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (work / "dvc.lock").unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    run = lambda *a: subprocess.run(["dvc", *a], cwd=work, env=env, capture_output=True, text=True)  # noqa: E731
    first = run("repro", "ingest")
    assert first.returncode == 0, first.stdout + first.stderr
    metrics = json.loads((work / "data/metrics/ingest.json").read_text())
    n_lines = sum(1 for f in ("gsm8k/train.jsonl", "gsm8k/test.jsonl", "math/train.jsonl")
                  for line in (SHARED / f).read_bytes().splitlines() if line.strip())
    assert metrics["rows_read"] == n_lines + 2 * len(LEVELS)
    assert metrics["rows_read"] == metrics["problems"] + metrics["rejects"] + metrics["duplicates"]
    rejects = pq.read_table(work / "data/rejects").to_pylist()
    assert all(r["reason"] and r["detail"] for r in rejects)
    problems = pq.read_table(work / "data/problems", columns=["source", "level", "subject"])
    assert set(problems.column("source").to_pylist()) == {"gsm8k_train", "gsm8k_test", "math_train", "synthetic"}
    second = run("repro", "ingest")
    assert second.returncode == 0 and "didn't change, skipping" in second.stdout, second.stdout
