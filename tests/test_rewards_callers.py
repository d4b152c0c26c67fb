"""The verifier and the rewards from every kind of caller: real scripts run as subprocesses.

A plain script with no ``if __name__ == "__main__":`` guard, ``python -c``, notebook-style code
exec'd into a ``__main__`` that has no file, 8 threads at once, a process forked after the pool
started, a process that imported torch first, a Ray task and a Ray actor. Each prints the verdicts
and rewards as JSON and the test checks them: some are decided in-process (two plain numbers), some
in the worker pool (``\\sqrt{1/4}`` needs sympy), so both paths run in each caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# (gold, completion, status): the first two are decided in-process, the last two by the worker pool
CASES = [("42", "The answer is 42.", "correct"), ("42", "#### 41", "incorrect"),
         ("\\frac{1}{2}", "so $\\boxed{\\sqrt{1/4}}$", "correct"), ("3", "The answer is $\\sqrt{10}$.", "incorrect")]
WANT = {"judge": [s for *_, s in CASES],
        "accuracy_reward": [1.0 if s == "correct" else 0.0 for *_, s in CASES],
        "compute_score": [1.0 if s == "correct" else 0.0 for *_, s in CASES]}

# the body every caller runs: no main guard, work at import time, one JSON line out
BODY = f"""
import json
from pipeline.verify import judge
from pipeline.rewards import accuracy_reward, compute_score
CASES = {CASES!r}
out = {{"judge": [judge(g, c).status for g, c, _ in CASES],
       "accuracy_reward": [accuracy_reward([c], answer=[g])[0] for g, c, _ in CASES],
       "compute_score": [compute_score("gsm8k", c, g) for g, c, _ in CASES]}}
print("RESULT " + json.dumps(out), flush=True)
"""


def run(args: list[str], *, cwd: Path, stdin: str | None = None, timeout: float = 180) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, (proc.stdout[-2000:], proc.stderr[-2000:])  # the body ran once: no worker re-ran it
    return json.loads(lines[0].removeprefix("RESULT "))


def test_a_plain_script_without_a_main_guard(tmp_path):
    script = tmp_path / "reward_script.py"
    script.write_text(BODY)
    assert run([str(script)], cwd=tmp_path) == WANT


def test_a_script_run_as_a_module_without_a_main_guard(tmp_path):
    (tmp_path / "reward_mod.py").write_text(BODY)
    env_path = f"{tmp_path}"
    out = run(["-c", f"import sys; sys.path.insert(0, {env_path!r}); import runpy; "
                     "runpy.run_module('reward_mod', run_name='__main__', alter_sys=True)"], cwd=tmp_path)
    assert out == WANT


def test_python_dash_c(tmp_path):
    assert run(["-c", BODY], cwd=tmp_path) == WANT


def test_notebook_style_exec_in_a_main_without_a_file(tmp_path):
    # what a notebook kernel does: a fresh __main__ module with no __file__, each cell exec'd into it
    runner = textwrap.dedent("""
        import sys, types
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        cell = sys.stdin.read()
        exec(compile(cell, "<cell 1>", "exec"), main.__dict__)
    """)
    assert run(["-c", runner], cwd=tmp_path, stdin=BODY) == WANT


def test_eight_threads_at_once(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent(f"""
        import json, threading
        from pipeline.verify import judge
        from pipeline.rewards import compute_score
        CASES = {CASES!r}
        barrier = threading.Barrier(8)
        out = [None] * 8
        def work(k):
            barrier.wait()  # all 8 start together, before any pool exists
            out[k] = [[judge(g, c).status for g, c, _ in CASES], [compute_score("x", c, g) for g, c, _ in CASES]]
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("RESULT " + json.dumps(out), flush=True)
    """))
    out = run([str(script)], cwd=tmp_path)
    assert out == [[WANT["judge"], WANT["compute_score"]]] * 8


def test_a_forked_child_grades_with_its_own_workers(tmp_path):
    script = tmp_path / "forked.py"
    script.write_text(textwrap.dedent(f"""
        import json, os
        from pipeline.verify import judge
        CASES = {CASES!r}
        parent = [judge(g, c).status for g, c, _ in CASES]  # the pool is started here
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, json.dumps([judge(g, c).status for g, c, _ in CASES]).encode())
            os._exit(0)
        os.close(w)
        child = json.loads(os.read(r, 65536))
        os.waitpid(pid, 0)
        again = [judge(g, c).status for g, c, _ in CASES]  # the parent's workers still answer
        print("RESULT " + json.dumps([parent, child, again]), flush=True)
    """))
    assert run([str(script)], cwd=tmp_path) == [WANT["judge"]] * 3


def test_after_torch_is_imported(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "with_torch.py"
    script.write_text("import torch\n" + BODY)
    assert run([str(script)], cwd=tmp_path) == WANT


@pytest.mark.slow
@pytest.mark.ray
def test_a_ray_task_and_a_ray_actor(tmp_path):
    pytest.importorskip("ray")
    script = tmp_path / "on_ray.py"
    script.write_text(textwrap.dedent(f"""
        import json, os
        os.environ["RAY_AUTH_MODE"] = "disabled"
        import ray
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        CASES = {CASES!r}

        @ray.remote
        def task(cases):
            from pipeline.verify import judge
            from pipeline.rewards import compute_score
            return [[judge(g, c).status for g, c, _ in cases], [compute_score("x", c, g) for g, c, _ in cases]]

        @ray.remote
        class Rewarder:
            def score(self, cases):
                from pipeline.rewards import accuracy_reward
                return accuracy_reward([c for _, c, _ in cases], answer=[g for g, _, _ in cases])

        actor = Rewarder.remote()
        out = {{"task": ray.get(task.remote(CASES)), "actor": [ray.get(actor.score.remote(CASES)) for _ in range(2)]}}
        ray.shutdown()
        print("RESULT " + json.dumps(out), flush=True)
    """))
    out = run([str(script)], cwd=tmp_path, timeout=300)
    assert out == {"task": [WANT["judge"], WANT["compute_score"]], "actor": [WANT["accuracy_reward"]] * 2}
