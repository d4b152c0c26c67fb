"""An engine that dies mid-run: the OpenAI server returning 500s, hanging or stopping (scripted server on
loopback), and the vLLM engine's worker process killed (real engine, marked ``engine``). Each ends in
bounded retries and a one-line failure with the finished shards kept; a re-run completes the table,
equal to an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from test_rollout_openai import Server

from pipeline.cli import cli
from pipeline.io import read_table, shard_paths, write_table
from pipeline.keys import problem_id
from pipeline.schema import schema

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

REPO = Path(__file__).resolve().parent.parent
SORT = [("problem_id", "ascending"), ("policy_id", "ascending"), ("sample_idx", "ascending")]
N, K, SHARD = 8, 2, 2  # 4 shards of 4 samples
# the vLLM kill: 6 shards of 8 samples, the worker killed once the first is written (polled every 0.2 s; a shard
# takes seconds), so the killed run keeps fewer than 6 and the re-run generates the rest
N_KILL = 12


def _repo(root: Path, url: str, **options) -> Path:
    qs = [f"What is {i} + {i % 5 + 1}?" for i in range(N)]
    write_table(schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q, "answer": "0",
         "n_duplicates": 0} for i, q in enumerate(qs)]), root / "data/problems/part-0.parquet", name="problems")
    opts = {"base_url": url, "concurrency": 1, "backoff_s": 0.01, "max_backoff_s": 0.05, "max_retries": 2,
            "startup_timeout_s": 2, **options}
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
              "policies": {"served": {"model": "m", "revision": "r", "engine": "openai",
                                      "sampling": {"temperature": 0.7, "max_tokens": 8}}},
              "rollout": {"policies": ["served"], "k": K, "shard_size": SHARD, "engine_options": {"openai": opts}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


def _rollout(params: Path):
    return CliRunner().invoke(cli, ["rollout", "--params", str(params), "--no-progress"])


def _table(root: Path) -> pa.Table:
    return read_table(root / "data/rollouts", name="rollouts").sort_by(SORT)


@pytest.fixture
def reference(tmp_path) -> pa.Table:
    with Server() as srv:
        assert _rollout(_repo(tmp_path / "ref", srv.url)).exit_code == 0
    return _table(tmp_path / "ref")


def _check_failed_then_resume(res, root: Path, reference: pa.Table, posts_bound: int, srv_posts: int) -> None:
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert res.output.startswith("Error: ") and "failed after 3 attempts" in res.output
    assert srv_posts <= posts_bound  # bounded retries: max_retries + 1 attempts for the failing sample
    kept = _table(root)
    assert kept.num_rows % (SHARD * K) == 0 and kept.num_rows < N * K  # whole shards only
    assert not list((root / "data/rollouts").glob(".*.tmp"))
    params = root / "params.yaml"
    with Server() as healthy:
        raw = yaml.safe_load(params.read_text())
        raw["rollout"]["engine_options"]["openai"]["base_url"] = healthy.url
        # the default client timeout: a hang's 0.3 s one would retry an answer a busy machine was slow to give,
        # and the count of posts below would be off by the retry
        raw["rollout"]["engine_options"]["openai"].pop("timeout_s", None)
        params.write_text(yaml.safe_dump(raw))
        before = {q: q.stat().st_mtime_ns for q in shard_paths(root / "data/rollouts")}
        assert _rollout(params).exit_code == 0
        assert healthy.posts == N * K - kept.num_rows  # only the missing samples
    assert all(q.stat().st_mtime_ns == t for q, t in before.items())
    assert _table(root).equals(reference)


def test_server_returning_500s_mid_run(tmp_path, reference):
    script = {i: 500 for i in range(6, 100)}  # 6 good samples (one shard and a half), then 500s
    with Server(script=script) as srv:
        res = _rollout(_repo(tmp_path / "w", srv.url))
        posts = srv.posts
    _check_failed_then_resume(res, tmp_path / "w", reference, posts_bound=6 + 3, srv_posts=posts)


# A hang waits without using the CPU, so no CPU bound can see it: the kill switch is the wall clock, set far
# past the run (3 attempts x 0.3 s plus back-off, seconds on a quiet machine), and the bound itself is the
# attempt count _check_failed_then_resume asserts.
@pytest.mark.timeout(300)
def test_server_hanging_mid_run(tmp_path, reference):
    script = {i: -1 for i in range(5, 100)}  # each request past the 5th hangs past the client's timeout
    with Server(script=script) as srv:
        res = _rollout(_repo(tmp_path / "w", srv.url, timeout_s=0.3))
        posts = srv.posts
    _check_failed_then_resume(res, tmp_path / "w", reference, posts_bound=5 + 3, srv_posts=posts)


def test_server_stopping_mid_run(tmp_path, reference):
    srv = Server(delay_s=0.05)
    srv.__enter__()
    params = _repo(tmp_path / "w", srv.url)
    import threading

    def stop_after(n: int) -> None:
        while srv.posts < n:
            time.sleep(0.005)
        srv.__exit__(None, None, None)

    stopper = threading.Thread(target=stop_after, args=(7,))
    stopper.start()
    res = _rollout(params)
    stopper.join()
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    kept = _table(tmp_path / "w")
    assert kept.num_rows % (SHARD * K) == 0 and kept.num_rows < N * K
    with Server() as healthy:
        raw = yaml.safe_load(params.read_text())
        raw["rollout"]["engine_options"]["openai"]["base_url"] = healthy.url
        params.write_text(yaml.safe_dump(raw))
        assert _rollout(params).exit_code == 0
    assert _table(tmp_path / "w").equals(reference)


# --- the real vLLM engine: its worker process killed mid-run ------------------------------------

@pytest.mark.timeout(120)  # the kill switch: without the watchdog the wait below blocks forever
def test_watchdog_turns_a_dead_worker_into_an_error_even_in_a_blocking_wait():
    import queue
    import threading

    from pipeline.engine_support.watchdog import EngineDied, dies_with

    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    threading.Timer(0.3, worker.kill).start()
    with pytest.raises(EngineDied, match=rf"engine worker process {worker.pid} died"), \
            dies_with({worker.pid}, engine="test", poll_s=0.1):
        queue.Queue().get()  # blocks forever, as vLLM waits on a dead worker
    worker.wait()
    with dies_with({os.getpid()}, engine="test", poll_s=0.05):  # a live worker: no error
        time.sleep(0.3)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.mark.engine
@pytest.mark.slow
def test_vllm_worker_killed_mid_run_fails_cleanly_and_a_rerun_completes(embedded_model_dir, tmp_path):
    qs = [f"What is {i} + {i % 7 + 2}?" for i in range(N_KILL)]
    root = tmp_path
    write_table(schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q, "answer": "0",
         "n_duplicates": 0} for i, q in enumerate(qs)]), root / "data/problems/part-0.parquet", name="problems")
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
              "paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]},
              "policies": {"p": {"model": "embedded", "engine": "vllm", "dtype": "float32", "prompt": "fewshot_arith",
                                 "sampling": {"temperature": 0.8, "max_tokens": 24, "stop": ["\nQ:", "\n\n"]}}},
              "rollout": {"policies": ["p"], "k": 4, "shard_size": 2,
                          "engine_options": {"vllm": {"max_num_seqs": 8, "max_model_len": 512, "kv_cache_gib": 1,
                                                      "in_process": False,  # a worker process to kill
                                                      "cache_root": str(REPO / "data/cache/vllm")}}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    cmd = [sys.executable, "-m", "pipeline.cli", "rollout", "--params", str(root / "params.yaml"), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 400
    while not shard_paths(root / "data/rollouts"):  # the engine is up and the first shard is written
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    workers = _children(proc.pid)
    assert workers, "vLLM started no worker process"
    for w in workers:
        os.kill(w, signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=120)  # bounded: the dead engine is noticed, not waited on forever
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("rollout hung after its engine process was killed")
    assert proc.returncode != 0
    kept = read_table(root / "data/rollouts", name="rollouts")
    assert kept.num_rows % 8 == 0 and kept.num_rows < N_KILL * 4
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert read_table(root / "data/rollouts", name="rollouts").num_rows == N_KILL * 4
    print(f"\nafter the kill, stderr's last line: {err.strip().splitlines()[-1] if err.strip() else '(none)'}")
