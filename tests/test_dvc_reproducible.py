"""A fresh clone's ``dvc repro`` leaves ``git status`` clean: every file dvc.yaml declares (outs, metrics, plots) is
byte-identical run to run, so dvc.lock, which hashes them, does not change.

The tiny pipeline (tests/support/faultkit.py: fake engine, 27 synthetic problems, k=4) runs twice into two folders, plus
``passband drift``, ``passband reformulate-report`` and ``passband report``, and every path the project's dvc.yaml
declares is compared file by file. Timings live in ``data/logs/timings/`` (pipeline/io.py ``write_metrics``), which
DVC does not track; the DuckDB catalog is no DVC output (its header holds random bytes: the last test shows two builds differ).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import faultkit as fk
import pytest
import yaml

from pipeline.config import load_params
from pipeline.io import TIMING_KEYS, split_timings, write_metrics

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def declared_paths(params) -> list[str]:
    """Every path the project's dvc.yaml declares as an output, a metrics file or a plot (the models excepted:
    a converted checkpoint, not built here), with ``${paths.*}`` resolved from ``params``."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    paths = params.paths.model_dump()
    out = []
    for stage in stages.values():
        for entry in stage.get("outs", []) + stage.get("metrics", []) + stage.get("plots", []):
            raw = entry if isinstance(entry, str) else next(iter(entry))
            path = re.sub(r"\$\{paths\.(\w+)\}", lambda m: paths[m[1]], raw)
            if not path.startswith(paths["models"]):
                out.append(path)
    return out


def files_under(root: Path, rel: str) -> dict[str, str]:
    """relative path -> md5 of every file at or under ``root/rel``."""
    p = root / rel
    found = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
    return {str(f.relative_to(root)): hashlib.md5(f.read_bytes()).hexdigest() for f in found}


def differing(a: Path, b: Path, rels: list[str]) -> list[str]:
    """The files under ``rels`` whose bytes differ between roots ``a`` and ``b`` (or that only one holds)."""
    fa = {k: v for r in rels for k, v in files_under(a, r).items()}
    fb = {k: v for r in rels for k, v in files_under(b, r).items()}
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))


def _passband(root: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=root, env=env, check=True,
                   capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("repro")
    roots = [base / "a", base / "b"]
    with fk.StageHost() as host:
        for root in roots:
            fk.build(host, root)
    for root in roots:
        _passband(root, "drift")
        _passband(root, "reformulate-report")
        _passband(root, "report")
    return roots


def test_every_dvc_declared_file_is_byte_identical_run_to_run(two_runs):
    a, b = two_runs
    rels = declared_paths(load_params(a / "params.yaml"))
    compared = {k for r in rels for k in files_under(a, r)}
    # the check has something to compare: every stage's metrics file, the tables, the plots, the published card
    for must in ("data/metrics/ingest.json", "data/metrics/rollout.json", "data/metrics/verify.json",
                 "data/metrics/annotate.json", "data/metrics/reformulate.json", "data/metrics/drift.json",
                 "data/metrics/reformulation_report.json", "data/plots/pass_rate_hist.png",
                 "data/published/README.md", "data/report/index.html", "data/report/report.json"):
        assert must in compared, must
    assert any(k.startswith("data/difficulty/") for k in compared)
    assert differing(a, b, rels) == []


def test_timings_go_to_the_logs_not_the_metrics(two_runs):
    a, _ = two_runs
    for metrics in (a / "data/metrics").glob("*.json"):
        assert not _keys(json.loads(metrics.read_text())) & TIMING_KEYS, metrics.name
    rollout = json.loads((a / "data/logs/timings/rollout.json").read_text())
    assert rollout["seconds"] > 0 and rollout["tokens_per_s"] > 0
    assert json.loads((a / "data/logs/timings/verify.json").read_text())["seconds"] > 0
    assert "generate_s" in json.loads((a / "data/logs/timings/reformulate.json").read_text())["ladder"]


def _keys(obj) -> set[str]:
    return {k for k, v in obj.items() for k in (k, *(_keys(v) if isinstance(v, dict) else ()))}


def test_the_duckdb_catalog_differs_build_to_build_so_dvc_does_not_hash_it(two_runs):
    a, b = two_runs
    catalog = load_params(a / "params.yaml").paths.catalog
    assert differing(a, b, [catalog]) == [catalog]  # the comparison sees a difference where there is one
    assert catalog not in declared_paths(load_params(a / "params.yaml"))


def test_split_timings_keeps_nesting_and_leaves_config_values():
    counts, timings = split_timings({"samples": 3, "seconds": 1.5, "timeout_s": 2.0,
                                     "ladder": {"k": 4, "generate_s": 0.2}, "methods": {"fobar": {"kept": 1}}})
    assert counts == {"samples": 3, "timeout_s": 2.0, "ladder": {"k": 4}, "methods": {"fobar": {"kept": 1}}}
    assert timings == {"seconds": 1.5, "ladder": {"generate_s": 0.2}}


def test_write_metrics_writes_both_files(tmp_path):
    path = write_metrics(tmp_path / "data/metrics/x.json", {"n": 1, "wall_s": 0.5}, root=tmp_path)
    assert json.loads(path.read_text()) == {"n": 1}
    assert json.loads((tmp_path / "data/logs/timings/x.json").read_text()) == {"wall_s": 0.5}


METRICS = {"ingest": "ingest", "rollout": "rollout", "verify": "verify", "annotate": "annotate",
           "reformulate": "reformulate", "rollout_reformulated": "rollout-reformulated",
           "verify_reformulated": "verify-reformulated", "annotate_reformulated": "annotate-reformulated"}


def _dvc_yaml() -> dict:
    """tests/test_faults_dvc.py's tiny dvc.yaml with each stage's metrics file declared as the project's are, and
    the catalog without outs, as in the project's."""
    import copy

    from test_faults_dvc import DVC_YAML

    spec = copy.deepcopy(DVC_YAML)
    for stage, name in METRICS.items():
        spec["stages"][stage]["metrics"] = [{f"data/metrics/{name}.json": {"cache": False}}]
    del spec["stages"]["catalog"]["outs"]
    return spec


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root,
                          capture_output=True, text=True, timeout=120, check=True)


def test_a_fresh_clones_dvc_repro_leaves_git_status_clean(tmp_path):
    """The run's dvc.lock committed, a clone's `dvc repro` (every output missing: all stages run) rewrites it
    identical: the metrics hold no timings, and the published card names the last code commit and the digest of
    publish's upstream lock entries (pipeline/publish: git_state, dvc_lock_digest), which the commit moves neither."""
    from test_faults_dvc import _repo, _run

    dvc = str(Path(sys.executable).parent / "dvc")
    origin = _repo(tmp_path / "origin")  # git and dvc initialised
    (origin / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml(), sort_keys=False))
    (origin / ".gitignore").write_text((REPO / ".gitignore").read_text())  # data/*, .passband/ (the locks)
    res = _run([dvc, "repro", "-q"], origin)
    assert res.returncode == 0, res.stdout + res.stderr
    _git(origin, "add", "-A")
    _git(origin, "commit", "-q", "-m", "the pipeline and its dvc.lock")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    res = _run([dvc, "repro", "-q"], clone)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _git(clone, "status", "--short").stdout == "", _git(clone, "diff").stdout


def test_the_card_names_the_last_code_commit_not_head(tmp_path):
    from pipeline.publish import git_state

    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline/x.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "code")
    code = _git(tmp_path, "rev-parse", "HEAD").stdout.strip()
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    _git(tmp_path, "add", "dvc.lock")
    _git(tmp_path, "commit", "-q", "-m", "the run's dvc.lock")
    assert git_state(tmp_path) == (code, False)
    (tmp_path / "pipeline/x.py").write_text("x = 2\n")
    assert git_state(tmp_path) == (code, True)


def test_the_card_names_the_last_commit_of_publishs_own_code(tmp_path):
    """A commit to a module publish does not load (the docs generator, say) does not move the card's commit: DVC
    would not re-run publish for it, so a fresh clone's card must name the same commit."""
    from pipeline.publish import git_state

    for f in ("pipeline/publish/core.py", "pipeline/docs/__init__.py", "schemas/problems.yaml"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x = 1\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"publish": {
        "cmd": "passband publish", "deps": ["pipeline/publish", "schemas", "data/difficulty"]}}}))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "code")
    code = _git(tmp_path, "rev-parse", "HEAD").stdout.strip()
    (tmp_path / "pipeline/docs/__init__.py").write_text("x = 2\n")
    _git(tmp_path, "commit", "-q", "-am", "the docs generator")
    assert git_state(tmp_path) == (code, False)
    (tmp_path / "pipeline/publish/core.py").write_text("x = 2\n")
    assert git_state(tmp_path) == (code, True)
    _git(tmp_path, "commit", "-q", "-am", "publish's code")
    assert git_state(tmp_path) == (_git(tmp_path, "rev-parse", "HEAD").stdout.strip(), False)


def test_the_lock_digest_covers_publishs_upstream_only(tmp_path):
    from pipeline.publish import dvc_lock_digest

    (tmp_path / "params.yaml").write_text("paths: {difficulty: data/difficulty}\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "verify": {"cmd": "v", "outs": ["data/verdicts"]},
        "annotate": {"cmd": "a", "deps": ["data/verdicts"], "outs": ["${paths.difficulty}"]},
        "publish": {"cmd": "p", "deps": ["${paths.difficulty}"], "outs": ["data/published"]},
        "drift": {"cmd": "d", "deps": ["data/difficulty"], "metrics": ["data/metrics/drift.json"]}}}))

    def lock(verdicts: str, drift: str) -> str:
        def entry(deps, outs):
            return {"cmd": "x", "deps": [{"path": d, "md5": "1"} for d in deps],
                    "outs": [{"path": o, "md5": m} for o, m in outs]}
        return yaml.safe_dump({"schema": "2.0", "stages": {
            "verify": entry([], [("data/verdicts", verdicts)]),
            "annotate": entry(["data/verdicts"], [("data/difficulty", "d")]),
            "publish": entry(["data/difficulty"], [("data/published", "p")]),
            "drift": entry(["data/difficulty"], [("data/metrics/drift.json", drift)])}})

    (tmp_path / "dvc.lock").write_text(lock("v1", "x1"))
    digest = dvc_lock_digest(tmp_path)
    (tmp_path / "dvc.lock").write_text(lock("v1", "x2"))  # drift runs after publish: not counted
    assert dvc_lock_digest(tmp_path) == digest
    (tmp_path / "dvc.lock").write_text(lock("v2", "x1"))  # verify, upstream through annotate: counted
    assert dvc_lock_digest(tmp_path) != digest
