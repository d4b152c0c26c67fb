"""The hostile-input suite (benchmarks/hostile.py) as a test: every case but the two big-input ones.

Each case runs as a user would (``passband <command>`` or a plain script with no main guard) in a
copy of a tiny repository, and must give its expected outcome (a one-line error, or a bounded,
recorded status), leave everything outside passband's own outputs byte-identical, and stay within
its CPU time and memory bounds. The time bound is on the child's CPU seconds, not the wall clock,
so other work on the machine does not count against it (the wall clock only kills a case that
hangs); the bounds are several times the measured figures in docs/faults.md, and what they catch is
the unbounded behaviour they replaced (20 s to minutes, gigabytes). The 200 MB line and 300k-row
cases run in the benchmark only (they take minutes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import hostile

pytestmark = [pytest.mark.slow, pytest.mark.timing]


@pytest.fixture(scope="module")
def results() -> dict[str, hostile.Result]:
    return {r.case: r for r in hostile.run_cases(quick=True, log=lambda _line: None)}


@pytest.mark.parametrize("name", [name for name, *_ in hostile.CASES if name not in hostile.BIG])
def test_hostile_case(results, name):
    r = results[name]
    assert r.untouched, f"{name}: touched what it must not: {r.outcome}"
    assert r.expected, f"{name}: unexpected outcome: {r.outcome}"
    assert r.cpu_s <= r.bound_s, f"{name}: {r.cpu_s:.1f} s of CPU over its {r.bound_s} s bound ({r.seconds:.1f} s wall)"
    assert r.peak_mib <= r.bound_mib, f"{name}: {r.peak_mib:.0f} MiB over its {r.bound_mib} MiB bound"
