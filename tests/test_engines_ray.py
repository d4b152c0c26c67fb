"""The `ray` engine: a pool of engine replicas on a real Ray (a local one, and a head + worker cluster on 127.0.0.1).

Every test here starts Ray; run them under the shared lock:
    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python -m pytest tests/test_engines_ray.py -x -q
The last test also starts two vLLM replicas (marked `engine`).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from pipeline.config import load_params
from pipeline.engines import EngineError, ModelSpec, Prompt, Request, create_engine
from pipeline.engines.ray_engine import cpu_bind
from pipeline.errors import PassbandError
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.rollout import run
from pipeline.rollout.core import rollout
from pipeline.schema import schema

ray = pytest.importorskip("ray")

from ray_cluster import LocalCluster  # noqa: E402 - after the skip

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # slow: not in the inner loop (README: Tests)

SPEC = ModelSpec("test/m", "test/m", "r1", "float32")
KEY = ["problem_id", "sample_idx"]


def _requests(n: int = 7, k: int = 3) -> list[Request]:
    from pipeline.config import SamplingConfig

    s = SamplingConfig(temperature=0.8, max_tokens=16)
    return [Request(f"r{i}", Prompt(text=f"Q: What is {i} + 3?\nA:"), tuple(100 * i + j for j in range(k)), s)
            for i in range(n)]




def test_options_are_checked_and_cores_are_split():
    with pytest.raises(PassbandError, match="replicaz"):
        create_engine("ray", SPEC, {"replicaz": 2})
    assert cpu_bind(0, 1, [0, 1]) == [0] and cpu_bind(1, 1, [0, 1]) == [1] and cpu_bind(2, 1, [0, 1]) == [0]
    assert cpu_bind(1, 2, [0, 1, 2, 3]) == [2, 3] and cpu_bind(0, 8, [4, 5]) == [4, 5]


def test_fake_replicas_match_the_in_process_engine():
    reqs = _requests()
    want = create_engine("fake", SPEC).generate(reqs)
    eng = create_engine("ray", SPEC, {"replicas": 2, "local_num_cpus": 2, "batch_size": 4, "replica_engine": "fake"})
    with eng:
        got = eng.generate(reqs)
        assert len(set(eng.replica_nodes)) == 1 and eng.startup_s > 0
    assert got == want  # same texts, seeds, indices and order, whichever replica made each batch
    assert not ray.is_initialized()  # the local Ray it started is shut down on close


ECHO = '''\
"""An engine that answers its seed: a throwaway plugin."""
from pipeline.engines import ENGINES, Engine, Sample


@ENGINES.register
class SeedEcho(Engine):
    name = "seed_echo"

    def _stream(self, requests):
        for r in requests:
            for i, seed in enumerate(r.seeds):
                yield Sample(r.id, i, seed, f" The answer is {seed}.", 5, "stop")
'''


def test_a_plugin_engine_reaches_the_replicas_from_its_text_not_its_file(tmp_path):
    """Each replica is a fresh Ray worker (on a node that may not hold params.yaml's folder): the plugin's text
    travels with it, so the file removed after the driver loaded it still makes every sample there."""
    from pipeline.engines import ENGINES
    from pipeline.plugins import load_plugins

    (tmp_path / "seed_echo.py").write_text(ECHO)
    load_plugins(["seed_echo.py"], root=tmp_path)
    try:
        reqs = _requests(n=3, k=2)
        want = create_engine("seed_echo", SPEC).generate(reqs)
        (tmp_path / "seed_echo.py").unlink()
        with create_engine("ray", SPEC, {"replicas": 1, "local_num_cpus": 1, "batch_size": 2,
                                         "replica_engine": "seed_echo"}) as eng:
            got = eng.generate(reqs)
        assert got == want and {s.text for s in got} == {f" The answer is {s.seed}." for s in want}
    finally:
        ENGINES.remove("seed_echo")


def test_a_replica_engine_error_stops_the_run_naming_the_request():
    eng = create_engine("ray", SPEC, {"replicas": 1, "local_num_cpus": 1, "batch_size": 2, "replica_engine": "fake",
                                      "replica_options": {"fail_after": 3}})
    with eng, pytest.raises(EngineError, match=r"failing as asked.*request"):
        eng.generate(_requests())


class Alarm(Exception):
    """What a signal handler raises: a time limit, a watchdog."""


def test_what_a_signal_handler_raises_in_a_blocking_wait_comes_out_as_itself():
    """Ray runs Python signal handlers inside its blocking calls and passes on only KeyboardInterrupt and SystemExit:
    anything else came out as ``SystemError: <cyfunction CoreWorker.wait ...> returned a result with an exception
    set`` (how pytest-timeout's alarm read when a loaded machine stretched a test past its limit)."""
    def ring(signum, frame):
        raise Alarm("time is up")

    eng = create_engine("ray", SPEC, {"replicas": 1, "local_num_cpus": 1, "batch_size": 1, "replica_engine": "fake",
                                      "replica_options": {"delay_s": 1.0}})
    previous = signal.signal(signal.SIGUSR2, ring)
    try:
        with eng:
            # 8 samples of 1 s each: the driver waits in ray.wait nearly all the time when the signal lands
            threading.Timer(2.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR2)).start()
            with pytest.raises(Alarm, match="time is up"):
                eng.generate(_requests(n=4, k=2))
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_replicas_that_cannot_be_placed_fail_at_start_naming_the_resources():
    eng = create_engine("ray", SPEC, {"replicas": 1, "local_num_cpus": 1, "replica_engine": "fake",
                                      "resources": {"nowhere": 1}, "start_timeout_s": 3})
    with pytest.raises(EngineError, match=r"not ready after 3s.*nowhere"):
        eng.start()
    assert not ray.is_initialized()


# --- the rollout stage on a head + worker cluster --------------------------------------------------


def _problems(n: int) -> pa.Table:
    qs = [f"What is {i} + {i % 7 + 1}?" for i in range(n)]
    return schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": "t", "source_id": str(i), "question": q, "answer": "0", "n_duplicates": 0}
        for i, q in enumerate(qs)])


def _params(root: Path, ray_options: dict, *, n: int, k: int, policy: dict, shard_size: int = 2, **extra) -> Path:
    write_table(_problems(n), root / "data/problems/p.parquet", name="problems")
    params = {
        **extra,
        "ingest": {"sources": [{"name": "t", "kind": "synthetic"}]},
        "policies": {"p": {**policy, "engine": "ray"}},
        "rollout": {"policies": ["p"], "k": k, "shard_size": shard_size, "sources": ["t"],
                    "engine_options": {"ray": ray_options}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


def _kill_when(cluster: LocalCluster, ready, timeout_s: float = 900) -> threading.Thread:
    """Kill the worker node once ``ready()`` (the run is under way), or after ``timeout_s``: a kill switch only, far
    past the time a busy machine takes to get there, since a kill before the replicas are up tests something else."""
    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not ready():
            time.sleep(0.05)
        cluster.kill_worker()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _keys(t: pa.Table) -> list[tuple[str, int]]:
    return list(zip(t.column("problem_id").to_pylist(), t.column("sample_idx").to_pylist(), strict=True))


@pytest.mark.timeout(900)  # a kill switch, with room for a busy machine
def test_worker_killed_fails_cleanly_and_a_rerun_generates_only_the_missing_keys(tmp_path):
    fake = {"model": "test/m", "revision": "r1", "sampling": {"temperature": 0.8, "max_tokens": 16}}
    with LocalCluster() as cluster:
        opts = {"address": cluster.address, "replicas": 1, "batch_size": 2, "resources": {"worker": 1},
                "replica_engine": "fake", "replica_options": {"delay_s": 0.3, "log_path": "gen1.log"}}
        params = _params(tmp_path, opts, n=10, k=3, policy=fake)
        log1 = tmp_path / "gen1.log"
        killer = _kill_when(cluster, lambda: log1.exists() and len(log1.read_text().splitlines()) >= 10)
        with pytest.raises(EngineError, match=r"every replica was lost.*re-run"):
            run(load_params(params), root=tmp_path, progress=False)
        killer.join()
        first = read_table(tmp_path / "data/rollouts", name="rollouts")
        assert 0 < first.num_rows < 30 and len(set(_keys(first))) == first.num_rows

        # the re-run, on the head node this time: only the missing keys are generated
        opts.update(resources={"head": 1}, replica_options={"log_path": "gen2.log"})
        _params(tmp_path, opts, n=10, k=3, policy=fake)
        res = run(load_params(params), root=tmp_path, progress=False)
        assert res.samples == 30 - first.num_rows and res.samples_existing == first.num_rows
    seeds2 = sorted(int(line.split("\t")[2]) for line in (tmp_path / "gen2.log").read_text().splitlines())
    full = read_table(tmp_path / "data/rollouts", name="rollouts").sort_by([(c, "ascending") for c in KEY])
    assert full.num_rows == 30 and len(set(_keys(full))) == 30  # nothing lost, nothing twice
    assert seeds2 == sorted(set(full.column("seed").to_pylist()) - set(first.column("seed").to_pylist()))
    # and the texts are those of the in-process engine for the same keys
    want = pa.concat_tables([t for _, t in rollout(_problems(10), policy=res.policies[0], k=3, existing=set(),
                                                   engine=create_engine("fake", SPEC))])
    want = want.sort_by([(c, "ascending") for c in KEY])
    assert full.select([*KEY, "seed", "completion"]).equals(want.select([*KEY, "seed", "completion"]))


@pytest.mark.engine
@pytest.mark.timeout(1200)  # a kill switch: 187 s on a quiet 2-core box, room for one at a quarter of its CPU
def test_vllm_replicas_on_two_nodes_survive_a_worker_kill_with_identical_completions(vllm_engine, embedded_model_dir,
                                                                                       tmp_path):
    sampling = {"temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 24, "stop": ["\nQ:", "\n\n"]}
    vllm_opts = {"max_num_seqs": 8, "max_model_len": 512, "kv_cache_gib": 1}
    # each replica binds both cores, as the in-process engine does: the same OpenMP thread count, so the
    # same floating-point reductions (a different thread count may change a sampled token)
    with LocalCluster(head_cpus=2, worker_cpus=2) as cluster:
        opts = {"address": cluster.address, "replicas": 2, "num_cpus": 2, "batch_size": 4, "replica_options": vllm_opts}
        params = _params(tmp_path, opts, n=8, k=4, policy={"model": "embedded", "sampling": sampling},
                         paths={"models": str(embedded_model_dir.parent), "allow_outside": ["models"]})
        out = tmp_path / "data/rollouts"
        killer = _kill_when(cluster, lambda: any(out.glob("*.parquet")))
        res = run(load_params(params), root=tmp_path, progress=False)  # completes on the head's replica
        killer.join()
        assert cluster.procs["worker"].poll() is not None and res.samples == 32
        again = run(load_params(params), root=tmp_path, progress=False)
        assert again.samples == 0 and again.samples_existing == 32  # nothing missing, no engine started
    full = read_table(out, name="rollouts").sort_by([(c, "ascending") for c in KEY])
    assert full.num_rows == 32 and len(set(_keys(full))) == 32
    want = pa.concat_tables([t for _, t in rollout(_problems(8), policy=res.policies[0], k=4, existing=set(),
                                                   engine=vllm_engine)]).sort_by([(c, "ascending") for c in KEY])
    cols = [*KEY, "seed", "completion", "n_tokens", "finish_reason"]
    assert full.select(cols).equals(want.select(cols))  # identical to the in-process engine, key by key
