"""The issue's case end to end with real DVC: a truncated rollout shard stops `passband verify` with one line
naming it; `passband doctor --repair` moves it aside; `dvc repro` regenerates exactly its keys and every
table equals the undamaged run's. The tiny repository runs on the fake engine, with a dvc.yaml shaped like
the project's (persistent, keyed rollouts and verdicts; the other outputs rewritten whole).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import faultcases as fc
import faultkit as fk
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

R = "data/reformulated"
DVC_YAML = {"stages": {
    "ingest": {"cmd": "passband ingest --no-progress", "params": ["ingest"],
               "outs": ["data/problems", "data/rejects"]},
    "rollout": {"cmd": "passband rollout --set main --no-progress", "deps": ["data/problems"],
                "params": ["rollout", "policies"],
                "outs": [{"data/rollouts": {"persist": True}}, {"data/policies": {"persist": True}}]},
    "verify": {"cmd": "passband verify --set main --no-progress", "deps": ["data/problems", "data/rollouts"],
               "params": ["verify"], "outs": [{"data/verdicts": {"persist": True}}]},
    "annotate": {"cmd": "passband annotate --set main --no-progress",
                 "deps": ["data/problems", "data/rollouts", "data/verdicts"], "params": ["annotate"],
                 "outs": ["data/flags", "data/difficulty", {"data/plots": {"cache": False}}]},
    "reformulate": {"cmd": "passband reformulate --no-progress", "deps": ["data/problems", "data/difficulty"],
                    "params": ["reformulate"], "outs": [f"{R}/problems", f"{R}/rejects"]},
    "rollout_reformulated": {"cmd": "passband rollout --set reformulated --no-progress", "deps": [f"{R}/problems"],
                             "params": ["rollout", "policies"],
                             "outs": [{f"{R}/rollouts": {"persist": True}}, {f"{R}/policies": {"persist": True}}]},
    "verify_reformulated": {"cmd": "passband verify --set reformulated --no-progress",
                            "deps": [f"{R}/problems", f"{R}/rollouts"], "params": ["verify"],
                            "outs": [{f"{R}/verdicts": {"persist": True}}]},
    "annotate_reformulated": {"cmd": "passband annotate --set reformulated --no-plots --no-progress",
                              "deps": [f"{R}/problems", f"{R}/rollouts", f"{R}/verdicts"], "params": ["annotate"],
                              "outs": [f"{R}/flags", f"{R}/difficulty"]},
    "catalog": {"cmd": "passband catalog",
                "deps": ["data/problems", "data/rollouts", "data/verdicts", "data/difficulty", f"{R}/difficulty"],
                "outs": [{"data/passband.duckdb": {"cache": False}}]},
    "publish": {"cmd": "passband publish", "deps": ["data/problems", "data/difficulty", f"{R}/difficulty"],
                "params": ["publish"], "outs": ["data/published"]},
}}


def _run(cmd: list[str], root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _repo(root: Path) -> Path:
    fk.make_repo(root)
    raw = yaml.safe_load((root / "params.yaml").read_text())
    for section in ("annotate",):
        raw.setdefault(section, {})
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (root / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML, sort_keys=False))
    for cmd in (["git", "init", "-q"], [shutil.which("dvc") or str(Path(sys.executable).parent / "dvc"), "init", "-q"]):
        assert _run(cmd, root).returncode == 0
    return root


def _tables(root: Path, stages: list[str]) -> dict[str, dict]:
    """Every stage's outputs; the card and build.json name the repository's git and dvc.lock state, so not those."""
    snaps = {st: fk.snapshot(root, st) for st in stages}
    snaps["publish"] = {k: v for k, v in snaps["publish"].items() if not k.endswith(("README.md", "build.json"))}
    return snaps


def test_truncated_shard_doctor_repair_dvc_repro_equals_an_undamaged_run(tmp_path):
    dvc = str(Path(sys.executable).parent / "dvc")
    work = _repo(tmp_path / "work")
    res = _run([dvc, "repro", "-q"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    stages = [*fk.FAULT_STAGES, "rollout_reformulated", "verify_reformulated", "annotate_reformulated"]
    reference = _tables(work, stages)  # the undamaged run
    assert len(reference["rollout"]["main/rollouts"]) == 27 * 4

    shard = fc.damage_shard(work, "main", "rollouts", "truncated")
    res = _run(["passband", "verify", "--no-progress"], work)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert shard.name in lines[0] and "passband doctor --repair" in lines[0]

    res = _run(["passband", "doctor", "--repair"], work)
    assert res.returncode == 0 and "moved 1 path" in res.stdout, res.stdout + res.stderr
    res = _run([dvc, "repro", "-q"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _tables(work, stages) == reference
    assert _run(["passband", "doctor"], work).returncode == 0
    assert (work / ".passband/quarantine").exists() and list((work / ".passband/quarantine").rglob(shard.name))


def _edit_params(root: Path, edit) -> None:
    raw = yaml.safe_load((root / "params.yaml").read_text())
    edit(raw)
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _current_verdicts(root: Path):
    """The main set's verdicts from the verifier params.yaml names now, and the rollout keys of current problems."""
    import pyarrow.compute as pc

    from pipeline.io import read_table
    from pipeline.verify.core import verifier_id

    params = fk._params(root)
    vid = verifier_id(params.verify)
    verdicts = read_table(root / "data/verdicts", name="verdicts")
    mine = verdicts.filter(pc.equal(verdicts["verifier_id"], vid))
    problems = set(read_table(root / "data/problems", name="problems")["problem_id"].to_pylist())
    rollouts = read_table(root / "data/rollouts", name="rollouts")
    in_scope = {(p, pol, i) for p, pol, i in zip(*(rollouts[c].to_pylist() for c in ("problem_id", "policy_id",
                                                                                         "sample_idx")), strict=True)
                if p in problems}
    keys = set(zip(*(mine[c].to_pylist() for c in ("problem_id", "policy_id", "sample_idx")), strict=True))
    return vid, keys, in_scope, rollouts.num_rows


def test_narrowed_source_then_changed_setting_and_quarantined_verdicts_recover_with_dvc_repro(tmp_path):
    """Rollouts are a cache kept across problem selections: after a source is narrowed, its dropped problems' rollouts
    stay; a new verifier setting (every rollout pending again) and a verdict shard moved aside by `doctor --repair`
    (its keys pending again) must both end in a `dvc repro` that succeeds, verifying exactly the current problems'
    rollouts, and a doctor that has nothing to repair."""
    dvc = str(Path(sys.executable).parent / "dvc")
    work = _repo(tmp_path / "work")
    res = _run([dvc, "repro", "-q"], work)
    assert res.returncode == 0, res.stdout + res.stderr

    def narrow_and_retime(raw):
        raw["ingest"]["sources"][0]["options"]["n_per_level"] = 2
        raw["verify"]["timeout_s"] = 4.0
    _edit_params(work, narrow_and_retime)
    res = _run([dvc, "repro", "-q"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    vid, keys, in_scope, n_rollouts = _current_verdicts(work)
    assert len(in_scope) == 18 * 4 and n_rollouts == 27 * 4  # the 9 dropped problems' rollouts are kept
    assert keys == in_scope  # every current rollout verified by the new verifier, nothing else
    metrics = json.loads((work / "data/metrics/verify.json").read_text())
    assert metrics["skipped_not_in_problems"] == 9 * 4
    doctor = _run(["passband", "doctor"], work)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "9 problems with rollouts but no longer in problems" in doctor.stdout
    after_narrowing = {st: fk.snapshot(work, st) for st in ("verify", "annotate")}

    shard = next(p for p in sorted((work / "data/verdicts").glob("*.parquet")) if p.name.startswith(vid.split("/")[-1]))
    shard.write_bytes(shard.read_bytes()[:100])
    res = _run(["passband", "doctor", "--repair"], work)
    assert res.returncode == 0 and "moved 1 path" in res.stdout, res.stdout + res.stderr
    res = _run([dvc, "repro", "-q"], work)
    assert res.returncode == 0, res.stdout + res.stderr
    assert {st: fk.snapshot(work, st) for st in ("verify", "annotate")} == after_narrowing
    assert _run(["passband", "doctor"], work).returncode == 0
