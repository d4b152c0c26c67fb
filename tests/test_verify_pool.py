"""The bounded worker pool: poisoned inputs cost at most their bound, the rest come back right.

These start worker processes (a forkserver that imports sympy once: a few seconds).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from cpu_clock import tree_cpu_s

from pipeline.config import VerifyConfig
from pipeline.schema import schema
from pipeline.verify.core import VerifyError, verify
from pipeline.verify.grader import Grade, GradeOptions, grade
from pipeline.verify.pool import GradePool

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

POISON = ["\\boxed{7^{7^{11}}}", "9^{9^{9}}", "(" * 3000 + "1" + ")" * 3000]


def hog(gold: str, answer: str, *, options: GradeOptions) -> Grade:
    """A check that allocates 2 GiB when asked to: the worker's RLIMIT_AS turns it into a MemoryError."""
    if answer == "hog":
        bytearray(2 << 30)
    return grade(gold, answer, options=options)


def boom(gold: str, answer: str, *, options: GradeOptions) -> Grade:
    if answer == "boom":
        raise ValueError("math-verify blew up")
    return grade(gold, answer, options=options)


def crash(gold: str, answer: str, *, options: GradeOptions) -> Grade:
    """A check that takes its worker down the way a segfault in C code would."""
    if answer == "crash":
        import os
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    return grade(gold, answer, options=options)


@pytest.mark.timing
def test_poisoned_batch_finishes_within_the_bound():
    timeout = 1.0
    good = [(str(i), str(i)) for i in range(20)] + [("\\frac{1}{2}", "0.5"), ("8", "9")]
    pairs = [*good[:7], ("7", POISON[0]), *good[7:14], ("3", POISON[1]), ("3", POISON[2]), *good[14:]]
    with GradePool(workers=2, timeout_s=timeout, memory_mb=1024) as pool:
        t = tree_cpu_s()
        out = pool.map(pairs)
        cpu = tree_cpu_s() - t
        restarts = pool.restarts
    by_pair = dict(zip(pairs, out, strict=True))
    for p in good[:-1]:
        assert by_pair[p].status == "correct", (p, by_pair[p])
    assert by_pair[("8", "9")].status == "incorrect"
    poisoned = [by_pair[("7", POISON[0])], by_pair[("3", POISON[1])], by_pair[("3", POISON[2])]]
    assert [g.status for g in poisoned] == ["timeout"] * 3
    assert "worker killed" in poisoned[0].detail
    assert restarts == 3
    # each poisoned item costs at most its CPU bound plus a worker restart (the workers' and this process's seconds)
    assert cpu < 3 * (timeout + 1) + 5


def test_memory_limit_is_an_error_not_a_crash():
    with GradePool(workers=1, timeout_s=10, memory_mb=768, fn=hog) as pool:
        out = pool.map([("1", "1"), ("1", "hog"), ("2", "2")])
    assert out[0].status == "correct" and out[2].status == "correct"
    assert out[1].status == "error" and "memory limit of 768 MiB" in out[1].detail


def test_a_worker_that_crashes_mid_batch_costs_only_that_item():
    # one batch holds items finished before the crash (answered once per batch, so not yet sent) and items after it
    pairs = [(str(i), str(i)) for i in range(5)] + [("1", "crash")] + [(str(i), str(i + 1)) for i in range(5)]
    done: list[int] = []
    with GradePool(workers=1, timeout_s=10, memory_mb=1024, batch_size=16, fn=crash) as pool:
        out = pool.map(pairs, on_done=done.append)
        assert pool.restarts == 1
    assert [g.status for g in out] == ["correct"] * 5 + ["error"] + ["incorrect"] * 5
    assert "worker died" in out[5].detail
    assert sorted(done) == list(range(len(pairs)))  # every item reported once


def test_a_raising_check_is_an_error():
    with GradePool(workers=1, timeout_s=10, memory_mb=1024, fn=boom) as pool:
        out = pool.map([("1", "boom"), ("1", "1")])
    assert out == [Grade("error", "ValueError: math-verify blew up"), Grade("correct")]


def _tables(completions: list[str], gold: str = "8"):
    probs = schema("problems").from_rows([{"problem_id": "p1", "source": "t", "source_id": "1",
                                           "question": "What is 3 + 5?", "answer": gold, "n_duplicates": 0}])
    rows = schema("rollouts").from_rows([
        {"problem_id": "p1", "policy_id": "pol", "sample_idx": i, "seed": i, "completion": c, "n_tokens": 9,
         "finish_reason": "stop"} for i, c in enumerate(completions)])
    return rows, probs


def test_raise_on_error_both_ways():
    # a gold that is not parseable reaches the grader only if ingest was bypassed: it is an `error` verdict
    rows, probs = _tables(["The answer is 8.", "The answer is 9."], gold="\\\\")
    res = verify(rows, probs, config=VerifyConfig(workers=1))
    assert [v["status"] for v in res.verdicts.to_pylist()] == ["error", "error"]
    assert "does not parse" in res.verdicts.column("detail")[0].as_py()
    with pytest.raises(VerifyError, match=r"rollout \('p1', 'pol', 0\)"):
        verify(rows, probs, config=VerifyConfig(workers=1, raise_on_error=True))


def test_identical_answers_are_checked_once_and_poison_costs_once():
    rows, probs = _tables(["The answer is 8."] * 4 + ["\\boxed{7^{7^{11}}}"] * 3 + ["blah"])
    res = verify(rows, probs, config=VerifyConfig(workers=2, timeout_s=1.0))
    assert res.checks == 2 and res.restarts == 1
    assert [v["status"] for v in res.verdicts.to_pylist()] == ["correct"] * 4 + ["timeout"] * 3 + ["no_answer"]


def test_answer_cap():
    rows, probs = _tables(["The answer is " + "1" * 50 + "."])
    res = verify(rows, probs, config=VerifyConfig(workers=1, max_answer_chars=20))
    v = res.verdicts.to_pylist()[0]
    assert v["status"] == "no_answer" and len(v["extracted"]) == 20 and "cap 20" in v["detail"]


def test_a_worker_that_died_while_idle_is_replaced():
    import os
    import signal

    with GradePool(workers=1, timeout_s=10, memory_mb=1024) as pool:
        assert pool.map([("1", "1")]) == [Grade("correct")]
        victim = pool._slots[0].proc
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(5)
        assert pool.map([("2", "2"), ("2", "3")]) == [Grade("correct"), Grade("incorrect")]
        assert pool.restarts == 1


# a stage process of its own: a pool, one poisoned item; it prints its pid, its forkserver's and its worker's
_STAGE = """
import os, sys
from pipeline.verify.forkserver import server
from pipeline.verify.pool import GradePool
pool = GradePool(workers=1, timeout_s=float(sys.argv[1]), memory_mb=1024, wall_factor=1000).__enter__()
print(os.getpid(), server()._forkserver_pid, pool._slots[0].proc.pid, flush=True)
print(pool.map([("3", "9^{9^{9}}"), ("1", "1")]), flush=True)
"""


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cpu(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return t.user + t.system


def _stage(timeout_s: float, busy_s: float = 1.0):
    """The stage process, its forkserver and worker pids, once the worker has spent ``busy_s`` CPU seconds on the
    item (less than the item's bound, so that the stage has not yet killed it: a loaded machine narrows that window)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-c", _STAGE, str(timeout_s)], stdout=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": repo})
    stage, server, worker = map(int, proc.stdout.readline().split())
    for _ in range(3000):  # until the poisoned item has cost busy_s CPU seconds (a poll count, not a wall-clock bound)
        if _cpu(worker) >= busy_s:
            break
        time.sleep(0.01)
    assert _alive(worker) and _cpu(worker) >= busy_s
    return proc, stage, server, worker


def _reap(*pids: int) -> None:
    """SIGKILL what a failed test left running (these processes only)."""
    import contextlib
    import os
    import signal

    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_workers_die_with_the_stage_process():
    import os
    import signal

    proc, stage, server, worker = _stage(timeout_s=60)
    try:
        os.kill(stage, signal.SIGKILL)  # what the OOM killer does: the stage process alone
        proc.wait()
        cpu_at_kill = _cpu(worker)
        polls = 0
        while (_alive(server) or _alive(worker)) and polls < 200:
            polls += 1
            time.sleep(0.02)
        assert not _alive(server) and not _alive(worker), f"still alive after {polls} polls"
        assert _cpu(worker) - cpu_at_kill < 1.0  # it stopped computing at once, not at its CPU limit
    finally:
        _reap(stage, server, worker)


def test_a_worker_bounds_its_own_cpu_when_its_parent_cannot():
    import os
    import signal

    from pipeline.verify.worker import CPU_GRACE_S as _CPU_GRACE_S

    timeout = 1.0
    proc, stage, server, worker = _stage(timeout_s=timeout, busy_s=0.4)  # stopped well before the stage's own kill
    os.kill(stage, signal.SIGSTOP)  # a parent stopped (or starved) never kills the worker
    try:
        polls, cpu = 0, 0.0
        while _alive(worker) and polls < 3000:
            cpu = max(cpu, _cpu(worker))
            polls += 1
            time.sleep(0.01)
        assert not _alive(worker), f"worker alive after {cpu:.1f} CPU seconds"
        # the kernel's RLIMIT_CPU: the bound plus the grace, rounded up to a whole second (plus the warm-up)
        assert cpu <= timeout + _CPU_GRACE_S + 2
    finally:
        os.kill(stage, signal.SIGCONT)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        _reap(stage, server, worker)
    assert proc.returncode == 0
    assert "status='timeout'" in out and "CPU limit" in out and "status='correct'" in out


def test_a_runnable_worker_is_starved_and_a_sleeping_one_is_not():
    """Past its wall bound, a worker that is runnable (a loaded machine starves it) keeps its item; one that sleeps
    is stuck. The state is read from /proc: a busy loop is runnable, a sleep is not."""
    from pipeline.verify.pool import _waiting_for_a_core

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    asleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(1.0)
        assert _waiting_for_a_core(busy.pid) and not _waiting_for_a_core(asleep.pid)
    finally:
        for p in (busy, asleep):
            p.kill()
            p.wait()
    assert not _waiting_for_a_core(busy.pid)  # gone


def test_the_workers_run_this_pipeline_from_a_folder_holding_another(tmp_path):
    """Run from a folder that holds another ``pipeline`` package (a user's project; the band-value runner's checkout
    beside its pinned copy), the forkserver, a ``python -c`` whose path starts with that folder, imported it and
    every worker ran its code: here a ``worker_main`` that exits at once. The pool starts it on this process's code."""
    foreign = tmp_path / "project" / "pipeline" / "verify"
    foreign.mkdir(parents=True)
    for f in ("__init__.py", "verify/__init__.py", "verify/_preload.py"):
        (tmp_path / "project" / "pipeline" / f).write_text("")
    (foreign / "worker.py").write_text("import sys\n\n\ndef worker_main(*args, **kwargs):\n    sys.exit(3)\n")
    script = tmp_path / "stage.py"  # a script's own folder, not the current one, starts its path: it imports ours
    script.write_text("from pipeline.verify.pool import GradePool\n"
                      "with GradePool(workers=1, timeout_s=10, memory_mb=1024) as pool:\n"
                      "    print(pool.map([('2', '2'), ('2', '3')]))\n")
    from pipeline.verify import forkserver as ours

    env = {**__import__("os").environ, "PYTHONPATH": ours.IMPORT_ROOT}
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path / "project", env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == str([Grade("correct"), Grade("incorrect")])
