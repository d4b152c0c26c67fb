"""The grading worker's side: :func:`worker_main` runs in each process of the pool
(:class:`pipeline.verify.pool.GradePool`), grading batches and reporting the item it is on in a shared array.

A worker also bounds itself, so nothing keeps computing when the parent is gone (the OOM killer takes
the stage process alone, a ``kill -9``): before each item it moves its soft ``RLIMIT_CPU`` to that
item's CPU bound plus a second (the kernel then kills it with SIGXCPU, recorded as ``timeout``, should
the parent be stopped or starved); it asks the kernel for SIGKILL when the forkserver exits
(``PR_SET_PDEATHSIG``); and it closes its copy of the forkserver's "alive" pipe, which the forkserver
watches to exit once the stage process is gone (a worker holding it kept the forkserver, and so itself,
alive). The forkserver gets no parent-death signal of its own: it would fire when the *thread* that
started it ends, and threads share the pool.
"""


from __future__ import annotations

import contextlib
import math
import multiprocessing.connection as mpc
import os
import resource
import signal
import time
from collections.abc import Callable
from multiprocessing import forkserver

from pipeline.gold import parse_gold
from pipeline.lifetime import die_with_parent
from pipeline.verify.grader import Grade, GradeOptions, grade

GradeFn = Callable[..., Grade]


# the shared progress array of a worker: the item it is on (-1: none), when it started it, and its phase
ITEM, WALL, CPU, PHASE = 0, 1, 2, 3


PHASES = {0: "grading the answer", 1: "parsing the gold"}


# CPU seconds a worker may run past an item's bound before its own RLIMIT_CPU stops it: the parent's kill comes first
CPU_GRACE_S = 1.0


def _die_with(server_pid: int) -> None:
    """SIGKILL this worker when the forkserver that forked it exits, and let the forkserver exit with the stage.

    The forkserver exits when every holder of its "alive" pipe's write end is gone; each worker inherits one
    (so that it could start processes of its own, which it never does): closed here, the stage process is the
    last holder. Linux only (prctl); elsewhere the worker's RLIMIT_CPU and its pipe's EOF still end it."""
    alive = forkserver._forkserver._forkserver_alive_fd
    if alive is not None:
        with contextlib.suppress(OSError):
            os.close(alive)
        forkserver._forkserver._forkserver_alive_fd = None
    die_with_parent(server_pid)


def _cpu_limit(timeout_s: float) -> None:
    """Move the soft RLIMIT_CPU to this item's bound (from now) plus a grace; the hard limit stays as it was."""
    soft = time.process_time() + timeout_s + CPU_GRACE_S
    if not soft < 2**62:  # a bound of centuries (the config only asks for a finite one): nothing to enforce
        return
    soft = math.ceil(soft)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def worker_main(conn: mpc.Connection, progress, options: GradeOptions, memory_mb: int, fn: GradeFn, flush_s: float,
            timeout_s: float, server_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C and kills us
    try:
        _die_with(server_pid)
        # SIGXCPU's default action dumps core: never a core file in the user's folder
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        grade("1", "1", options=options)  # warm up imports and caches before the limit applies
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except Exception as exc:  # pragma: no cover - reported as the first item's error
        conn.send(("fatal", f"worker start-up failed: {exc!r}"))
        return
    conn.send(("ready", time.process_time()))
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        out, sent_at = [], time.monotonic()
        for idx, gold, answer in batch:
            # the item number last, so a reader that sees it twice around the times knows they belong to it
            progress[ITEM] = -1
            _cpu_limit(timeout_s)
            progress[WALL], progress[CPU] = time.monotonic(), time.process_time()
            progress[ITEM] = idx
            try:
                if fn is grade:  # the gold first, on its own, so a timeout can say which side was slow
                    progress[PHASE] = 1
                    parse_gold(gold)  # cached: grade() reads the same parse
                progress[PHASE] = 0
                g = fn(gold, answer, options=options)
                out.append((idx, g.status, g.detail))
            except MemoryError:
                out.append((idx, "error", f"memory limit of {memory_mb} MiB exceeded"))
            except RecursionError:
                out.append((idx, "error", "recursion limit exceeded"))
            except Exception as exc:
                out.append((idx, "error", f"{type(exc).__name__}: {str(exc)[:200]}"))
            if time.monotonic() - sent_at >= flush_s and len(out) < len(batch):
                conn.send(out)
                out, sent_at = [], time.monotonic()
        progress[ITEM] = -1
        conn.send(out)
