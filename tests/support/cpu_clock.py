"""CPU seconds for the bounds the tests assert: a cost is CPU time, which a busy machine does not stretch.

The wall clock counts the time other programs hold the cores, so a wall-clock bound fails on a loaded
laptop or CI runner with nothing wrong. Work in the test's own process: ``time.process_time()``. Work in
processes the test starts (verify workers forked from passband's forkserver, a stage run in a child):
:func:`tree_cpu_s`, read before and after, as ``process_time`` is.

    >>> t = tree_cpu_s()
    >>> sum(range(10**6)) > 0 and tree_cpu_s() - t < 5.0
    True
"""

from __future__ import annotations

import contextlib
import gc
import time

import psutil


def _seconds(t) -> float:
    return t.user + t.system + t.children_user + t.children_system


def tree_cpu_s() -> float:
    """CPU seconds of this process and of every process under it, live or ended.

    Each process's own time plus its reaped children's (a worker killed and reaped by the forkserver moves
    into the forkserver's children times, so its seconds stay counted). A process that outlived its parent
    and was reaped by init is lost: the difference can only be too small, never a false failure.
    """
    me = psutil.Process()
    total = _seconds(me.cpu_times())
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += _seconds(child.cpu_times())
    return total


BOUNDED_S = 3.0
"""The CPU bound on one hostile input to a linear-time part (an extractor, a detector, a normaliser).

It proves "bounded", not speed: the quadratic and exponential versions these inputs caught took 10 s to minutes.
On this box each input takes 0.1-0.7 s; CI runners measured up to 4x that, so 1 s was a speed claim in disguise."""


@contextlib.contextmanager
def own_cpu():
    """This process's CPU seconds over the block, with the cyclic garbage collector paused.

    A collection that starts inside the block walks every object the test process holds (thousands of tests'
    worth under xdist), a cost of the process's history, not of the code measured.

        >>> with own_cpu() as spent:
        ...     _ = sum(range(10**5))
        >>> 0 <= spent() < 5.0
        True
    """
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    start = time.process_time()
    end: list[float] = []
    try:
        yield lambda: (end[0] if end else time.process_time()) - start
    finally:
        end.append(time.process_time())
        if enabled:
            gc.enable()
