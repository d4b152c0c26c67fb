"""Rollout stage shell and CLI on the fake engine: outputs, metrics, re-runs, table sets, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import load_params
from pipeline.engines import create_engine
from pipeline.io import read_table, shard_paths, write_table
from pipeline.keys import problem_id
from pipeline.rollout import run
from pipeline.schema import schema

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

REPO = Path(__file__).resolve().parent.parent
SORT = [("problem_id", "ascending"), ("policy_id", "ascending"), ("sample_idx", "ascending")]


def _problems(n: int, *, source: str = "synthetic", start: int = 0) -> pa.Table:
    qs = [f"What is {i} + {i % 7 + 1}?" for i in range(start, start + n)]
    return schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": source, "source_id": f"{source}:{i}", "question": q, "answer": "0",
         "n_duplicates": 0} for i, q in enumerate(qs)])


def _repo(tmp_path: Path, *, n: int = 10, k: int = 3, shard_size: int = 4, policies=None, fake: dict | None = None,
          sources=("synthetic",)) -> Path:
    """A tiny repository: problems written directly, fake-engine policies, params.yaml."""
    write_table(_problems(n), tmp_path / "data/problems/part-0.parquet", name="problems")
    policies = policies or {"small": {"model": "test/m", "revision": "r1", "engine": "fake",
                                      "sampling": {"temperature": 0.8, "max_tokens": 16}}}
    params = {
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
        "policies": policies,
        "rollout": {"policies": list(policies), "k": k, "shard_size": shard_size, "sources": list(sources),
                    "engine_options": {"fake": fake or {}}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path / "params.yaml"


def _rollouts(root: Path, set_dir: str = "data/rollouts") -> pa.Table:
    return read_table(root / set_dir, name="rollouts").sort_by(SORT)


class CountingFactory:
    """Wraps create_engine: how many engines were started, and every sample they were asked for."""

    def __init__(self):
        self.engines = []

    def __call__(self, *args, **kwargs):
        e = create_engine(*args, **kwargs)
        self.engines.append(e)
        return e

    @property
    def requested(self):
        return [x for e in self.engines for call in e.calls for x in call]


def test_run_writes_rollouts_policies_and_metrics(tmp_path):
    params_path = _repo(tmp_path, n=10, k=3, shard_size=4)
    res = run(load_params(params_path), root=tmp_path, progress=False)
    t = _rollouts(tmp_path)
    assert t.num_rows == 30 and res.samples == 30 and res.shards == 3 and res.samples_existing == 0
    assert len(shard_paths(tmp_path / "data/rollouts")) == 3
    pols = read_table(tmp_path / "data/policies", name="policies")
    assert pols.column("policy_id").to_pylist() == [res.policies[0].policy_id]
    assert set(t.column("policy_id").to_pylist()) == {res.policies[0].policy_id}
    m = json.loads((tmp_path / "data/metrics/rollout.json").read_text())
    assert m["prompts"] == 10 and m["samples"] == 30 and m["tokens"] == sum(t.column("n_tokens").to_pylist())
    assert m["set"] == "main" and "seconds" not in m  # timings live outside the DVC metrics file
    s = json.loads((tmp_path / "data/logs/timings/rollout.json").read_text())
    assert s["tokens_per_s"] > 0 and s["engine_startup_s"] >= 0 and s["seconds"] > 0
    assert m["policies"]["small"]["samples"] == 30


def test_rerun_does_not_start_an_engine_and_keeps_the_files(tmp_path):
    params = load_params(_repo(tmp_path))
    run(params, root=tmp_path, progress=False)
    before = {p: p.stat().st_mtime_ns for p in shard_paths(tmp_path / "data/rollouts")}
    factory = CountingFactory()
    res = run(params, root=tmp_path, progress=False, engine_factory=factory)
    assert factory.engines == [] and res.samples == 0 and res.samples_existing == 30
    assert {p: p.stat().st_mtime_ns for p in shard_paths(tmp_path / "data/rollouts")} == before
    assert json.loads((tmp_path / "data/metrics/rollout.json").read_text())["samples"] == 0


def test_raising_k_and_adding_problems_and_a_policy_generate_only_missing_keys(tmp_path):
    p = _repo(tmp_path, n=6, k=2)
    run(load_params(p), root=tmp_path, progress=False)
    first = _rollouts(tmp_path)
    # more problems, higher k, a second policy (shares the engine: one start-up)
    write_table(_problems(3, start=100), tmp_path / "data/problems/part-1.parquet", name="problems")
    raw = yaml.safe_load(p.read_text())
    raw["rollout"]["k"] = 4
    raw["policies"]["hot"] = {**raw["policies"]["small"], "sampling": {"temperature": 1.2, "max_tokens": 16}}
    raw["rollout"]["policies"].append("hot")
    p.write_text(yaml.safe_dump(raw))
    factory = CountingFactory()
    res = run(load_params(p), root=tmp_path, progress=False, engine_factory=factory)
    assert len(factory.engines) == 1
    expected_new = (9 * 4 - 6 * 2) + 9 * 4  # policy small: new problems and new indices; policy hot: everything
    assert len(factory.requested) == expected_new == res.samples
    after = _rollouts(tmp_path)
    assert after.num_rows == 2 * 9 * 4
    small = res.policies[0].policy_id
    old = after.filter(pc.is_in(after.column("problem_id"), first.column("problem_id")))
    old = old.filter(pc.equal(old.column("policy_id"), small))
    old = old.filter(pc.less(old.column("sample_idx"), 2))
    assert old.equals(first)  # what existed is untouched
    assert read_table(tmp_path / "data/policies", name="policies").num_rows == 2


def test_sources_filter_and_reformulated_set(tmp_path):
    p = _repo(tmp_path, n=4, k=2)
    write_table(_problems(2, source="other", start=50), tmp_path / "data/problems/part-1.parquet", name="problems")
    res = run(load_params(p), root=tmp_path, progress=False)
    assert res.samples == 8  # the 'other' source is not selected
    refo = _problems(3, source="fobar", start=200)
    write_table(refo, tmp_path / "data/reformulated/problems/part-0.parquet", name="problems")
    res = run(load_params(p), root=tmp_path, progress=False, set_name="reformulated")
    assert res.samples == 6  # every reformulated problem, whatever its source
    assert _rollouts(tmp_path, "data/reformulated/rollouts").num_rows == 6
    assert read_table(tmp_path / "data/reformulated/policies", name="policies").num_rows == 1
    assert json.loads((tmp_path / "data/metrics/rollout-reformulated.json").read_text())["samples"] == 6
    assert _rollouts(tmp_path).num_rows == 8  # main set untouched


def test_cli_rollout_and_bad_configs(tmp_path):
    p = _repo(tmp_path, n=3, k=2)
    runner = CliRunner()
    res = runner.invoke(cli, ["rollout", "--params", str(p), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "6 samples generated (0 already there)" in res.output and "small: pol_" in res.output
    res = runner.invoke(cli, ["rollout", "--params", str(p), "--no-progress", "--set", "nope"])
    assert res.exit_code == 2 and "nope" in res.output
    raw = yaml.safe_load(p.read_text())
    raw["policies"]["small"]["revision"] = None
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(cli, ["rollout", "--params", str(p), "--no-progress"])
    assert res.exit_code == 1 and "needs a revision" in res.output
    raw["policies"]["small"] = {"model": "embedded", "engine": "fake"}
    p.write_text(yaml.safe_dump(raw))
    res = runner.invoke(cli, ["rollout", "--params", str(p), "--no-progress"])
    assert res.exit_code == 1 and "passband prepare-model" in res.output


def test_engine_failure_keeps_finished_shards_and_resume_completes(tmp_path):
    p = _repo(tmp_path, n=10, k=3, shard_size=2, fake={"fail_after": 14})
    with pytest.raises(Exception, match="failing as asked"):
        run(load_params(p), root=tmp_path, progress=False)
    assert _rollouts(tmp_path).num_rows == 12  # two shards of 2 problems x 3 samples
    raw = yaml.safe_load(p.read_text())
    raw["rollout"]["engine_options"]["fake"] = {}
    p.write_text(yaml.safe_dump(raw))
    res = run(load_params(p), root=tmp_path, progress=False)
    assert res.samples == 18 and _rollouts(tmp_path).num_rows == 30


def test_a_second_writer_on_the_same_set_is_refused(tmp_path):
    import fcntl

    p = _repo(tmp_path, n=2, k=1)
    out = tmp_path / "data/rollouts"
    out.mkdir(parents=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Exception, match="another rollout is writing"):
            run(load_params(p), root=tmp_path, progress=False)
    finally:
        os.close(fd)


# --- crash safety: SIGKILL the CLI mid-run, resume, compare ------------------------------------


def _log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _cli(params: Path) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "rollout", "--params", str(params), "--no-progress"]


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [3, 13, 31, 47])
def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path, kill_after):
    n, k, shard_size = 12, 4, 2  # 6 shards of 8 samples; kill_after samples were generated when killed
    ref_root, crash_root = tmp_path / "ref", tmp_path / "crash"
    ref_root.mkdir(), crash_root.mkdir()
    run(load_params(_repo(ref_root, n=n, k=k, shard_size=shard_size)), root=ref_root, progress=False)
    reference = _rollouts(ref_root)

    params = _repo(crash_root, n=n, k=k, shard_size=shard_size, fake={"delay_s": 0.05, "log_path": "gen.log"})
    log = crash_root / "gen.log"
    proc = subprocess.Popen(_cli(params), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while len(_log_lines(log)) < kill_after:
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    generated_before = len(_log_lines(log))
    on_disk = _rollouts(crash_root)
    keys_on_disk = set(zip(on_disk.column("problem_id").to_pylist(), on_disk.column("sample_idx").to_pylist(),
                           strict=True))
    # whole shards only, and at most the shard in progress was lost
    assert on_disk.num_rows % (shard_size * k) == 0
    assert generated_before - on_disk.num_rows < shard_size * k + 2
    files_before = {q: q.stat().st_mtime_ns for q in shard_paths(crash_root / "data/rollouts")}

    log.unlink()
    res = subprocess.run(_cli(params), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    resumed = [line.split("\t") for line in _log_lines(log)]
    assert len(resumed) == n * k - on_disk.num_rows  # exactly the missing keys were generated
    pid_of = {r["seed"]: (r["problem_id"], r["sample_idx"]) for r in reference.to_pylist()}
    assert not {pid_of[int(seed)] for _, _, seed in resumed} & keys_on_disk
    assert {q: q.stat().st_mtime_ns for q in files_before} == files_before  # finished shards untouched
    assert _rollouts(crash_root).equals(reference)
    assert not list((crash_root / "data/rollouts").glob(".*.tmp"))
