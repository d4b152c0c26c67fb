"""The verify core as Ray tasks: the same verdicts as the local pool, on a local Ray and on a head + worker cluster.

Every test here starts Ray; run them under the shared lock:
    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python -m pytest tests/test_verify_ray.py -x -q
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.config import VerifyConfig
from pipeline.keys import problem_id
from pipeline.verify.core import verify

ray = pytest.importorskip("ray")

from ray_cluster import LocalCluster  # noqa: E402 - after the skip

from pipeline.verify.on_ray import verify_on_ray  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # slow: not in the inner loop (README: Tests)

CONFIG = VerifyConfig(workers=1, timeout_s=5.0)


def _tables(n: int = 24) -> tuple[pa.Table, pa.Table]:
    qs = [f"What is {i} + 1?" for i in range(n)]
    problems = pa.table({"problem_id": [problem_id(q) for q in qs], "answer": [str(i + 1) for i in range(n)]})
    texts = [f"{i} + 1 = {i + 1 + (i % 3 == 1)}. The answer is {i + 1 + (i % 3 == 1)}." if i % 3 != 2 else "I am not sure."
             for i in range(n)]
    rollouts = pa.table({"problem_id": problems.column("problem_id"), "policy_id": ["pol"] * n,
                         "sample_idx": pa.array([0] * n, pa.int32()), "completion": texts})
    return rollouts, problems


def test_ray_tasks_give_the_local_verdicts():
    rollouts, problems = _tables()
    local = verify(rollouts, problems, config=CONFIG)
    got = verify_on_ray(rollouts, problems, config=CONFIG, chunk_rows=5)
    assert not ray.is_initialized()  # the local Ray it started is shut down
    assert got.verdicts.equals(local.verdicts) and got.verifier_id == local.verifier_id
    assert got.statuses == local.statuses == {"correct": 8, "incorrect": 8, "no_answer": 8}


@pytest.mark.timeout(300)
def test_a_worker_node_killed_mid_run_loses_no_verdict_and_doubles_none():
    rollouts, problems = _tables(40)
    local = verify(rollouts, problems, config=CONFIG)
    with LocalCluster() as cluster:
        seen: list[int] = []

        def on_done(n: int) -> None:
            if not seen:  # the first chunk is back: the worker node goes down with what it runs
                cluster.kill_worker()
            seen.append(n)

        got = verify_on_ray(rollouts, problems, config=CONFIG, chunk_rows=4, address=cluster.address, on_done=on_done)
        assert cluster.procs["worker"].poll() is not None
    assert sum(seen) == 40 and len(seen) == 10
    assert got.verdicts.equals(local.verdicts)  # every rollout once, in order, with the local verdict


FIRST_NUMBER = '''\
"""An extractor that reads the first number of the completion: a throwaway plugin."""
import re

from pipeline.verify.extract import Extractor, register


@register
class FirstNumber(Extractor):
    """The first number in the completion."""

    name = "first_number"

    def read(self, completion):
        m = re.search(r"\\d+", completion)
        return m.group() if m else None
'''


def test_a_plugin_extractor_reaches_the_tasks_from_its_text_not_its_file(tmp_path):
    """A Ray worker is a fresh process (on a node that may not hold params.yaml's folder): the plugin file's text
    travels with each task, so the file removed after the driver loaded it still decides every verdict there."""
    from pipeline.plugins import load_plugins
    from pipeline.verify.extract import EXTRACTORS

    (tmp_path / "first_number.py").write_text(FIRST_NUMBER)
    load_plugins(["first_number.py"], root=tmp_path)
    try:
        config = VerifyConfig(workers=1, timeout_s=5.0, extractors=["first_number"])
        rollouts, problems = _tables()
        local = verify(rollouts, problems, config=config)
        assert local.statuses == {"incorrect": 16, "no_answer": 8}  # "i + 1 = ...": the plugin reads i, not the sum
        assert set(local.verdicts.column("extractor").to_pylist()) == {"first_number", None}
        (tmp_path / "first_number.py").unlink()
        got = verify_on_ray(rollouts, problems, config=config, chunk_rows=8)
        assert got.verdicts.equals(local.verdicts) and got.verifier_id == local.verifier_id
    finally:
        EXTRACTORS.remove("first_number")
