"""The suite's lanes hold (tests/conftest.py, pyproject.toml's addopts): under pytest-xdist each test carries its
group, and a file runs whole on one worker, so its module fixtures are built once.

pytest 9.2 broke this silently (github.com/pytest-dev/pytest-xdist/issues/1386: xdist writes the group into the
legacy ``_nodeid``, which 9.2 no longer reads): nothing failed, every test was scheduled alone, and the
differential corpus (90 s) was built twice. This test runs two small files on two workers and fails if that happens again.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("tests/test_numbers.py", "tests/test_run_metrics.py")


def test_each_file_runs_whole_on_one_worker_under_its_group():
    res = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *FILES], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+)", res.stdout, flags=re.M)
    assert len(ran) >= 10, res.stdout[-2000:]
    workers = collections.defaultdict(set)
    for worker, nodeid in ran:
        path, _, rest = nodeid.partition("::")
        assert rest.endswith("@" + Path(path).stem), f"{nodeid}: no group in its node id (xdist ignored the lanes)"
        workers[path].add(worker)
    assert set(workers) == set(FILES) and all(len(w) == 1 for w in workers.values()), dict(workers)


def test_groups_are_priced_by_measured_seconds_where_known():
    """A file whose time is one module fixture (a handful of slow tests) outranks a file of many fast ones, and every
    file the price list names exists (a renamed file would fall back to its markers unnoticed)."""
    import types

    import pytest
    from conftest import MEASURED_S, group_costs

    def item(module: str, name: str, *marks: str):
        mods = {m: getattr(pytest.mark, m) for m in marks}
        return types.SimpleNamespace(module=types.SimpleNamespace(__name__=module), nodeid=f"tests/{module}.py::{name}",
                                     get_closest_marker=lambda m, mods=mods: mods.get(m))

    n_fast = int(MEASURED_S["test_verify_differential"] / 0.2 / 2)  # half its measured cost in fast tests' weights
    items = ([item("test_verify_differential", f"t{i}", "slow") for i in range(4)]
             + [item("test_many_fast", f"t{i}") for i in range(n_fast)]
             + [item("test_reformulate_engine", "t", "engine"), item("test_rollout_adaptive", "t", "slow")])
    group = {it.nodeid: "lane" if "engine" in it.nodeid or "adaptive" in it.nodeid else it.module.__name__
             for it in items}
    cost = group_costs(items, group)
    assert cost["lane"] == MEASURED_S["test_reformulate_engine"] + MEASURED_S["test_rollout_adaptive"]
    assert cost["test_verify_differential"] == MEASURED_S["test_verify_differential"]
    assert cost["test_many_fast"] == pytest.approx(n_fast * 0.2) and cost["test_many_fast"] < cost["test_verify_differential"]
    assert [name for name in MEASURED_S if not (REPO / "tests" / f"{name}.py").is_file()] == []
