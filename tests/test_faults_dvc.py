"""The issue's case end to end with real DVC: a truncated rollout shard stops `passband verify` with one line
naming it; `passband doctor --repair` moves it aside; `dvc repro` regenerates exactly its keys and every
table equals the undamaged run's. The tiny repository runs on the fake engine, with a dvc.yaml shaped like
the project's (persistent, keyed rollouts and verdicts; the other outputs rewritten whole).
"""

from __future__ import annotations

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
