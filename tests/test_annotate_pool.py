"""annotate's Python detectors over a process pool: the same flags, difficulty and counts as in one process, and the
workers end with the stage process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from annotate_job import job_tables

from pipeline.annotate import core
from pipeline.annotate import detector_pool as dp
from pipeline.annotate.core import annotate_tables
from pipeline.config import AnnotateConfig

VID = "v/0"


def tables(n_problems: int) -> tuple[pa.Table, pa.Table, pa.Table]:
    return job_tables(range(n_problems), VID)


def test_pooled_detectors_give_the_rows_of_one_process(monkeypatch):
    verdicts, rollouts, problems = tables(120)
    one = annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(workers=1), verifier_id=VID)
    monkeypatch.setattr(core, "POOL_MIN_ROWS", 0)
    started = []
    real = dp.ProcessPoolExecutor
    monkeypatch.setattr(dp, "ProcessPoolExecutor", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    two = annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(workers=2), verifier_id=VID)
    assert started == [2]  # the pool ran
    flags = one[1]
    assert flags.num_rows > 200 and len(set(flags.column("flag").to_pylist())) >= 5  # many detectors fired
    assert two[1].equals(flags)
    assert two[0].equals(one[0])


def test_small_jobs_stay_in_the_stage_process(monkeypatch):
    verdicts, rollouts, problems = tables(4)
    monkeypatch.setattr(dp, "ProcessPoolExecutor", lambda *a, **k: pytest.fail("a pool for a handful of rows"))
    annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(workers=2), verifier_id=VID)


def test_the_default_is_every_core():
    assert AnnotateConfig().workers == (os.cpu_count() or 1)


_HOLDER = """
import sys, time
import pyarrow as pa
from pipeline.annotate import detector_pool as dp
from pipeline.annotate.detectors import get_detectors
def slow(batches):
    yield from batches
    time.sleep(600)
batch = pa.RecordBatch.from_pylist([{"x": 1}])
it = dp.pooled_detectors(slow(iter([batch] * 2)), get_detectors(["truncated"]), workers=2)
print("started", flush=True)
next(it, None)
"""


def test_workers_die_with_the_stage(tmp_path):
    # the workers are the holder's children; a kill -9 of the holder must take them too
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        children: list[int] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(children) < 2:
            time.sleep(0.2)
            children = _children(proc.pid)
        assert len(children) >= 2, children
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(c) for c in children):
            time.sleep(0.1)
        assert not any(_alive(c) for c in children)
    finally:
        if proc.poll() is None:
            proc.kill()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
