"""A small worker pool that bounds every check in time and memory.

Each worker is a process that runs :func:`pipeline.verify.grader.grade` in its main thread,
under ``RLIMIT_AS`` (``memory_mb``). The parent keeps every worker two batches deep. A worker
answers once per batch (or every ``flush_s`` on slow items), and before each item it writes
into a small shared array which item it is on and since when (wall clock and its own CPU
seconds), so the parent knows that without a message per item. An item that runs past
``timeout_s`` gets its worker SIGKILLed (C code holding the GIL cannot be interrupted any
other way) and is recorded as ``timeout``; the rest of that worker's batch, including items
it had finished but not yet sent, goes back to the queue for a fresh worker. A worker that
dies (the kernel's OOM killer, a segfault) costs only the item it was on (``error``). A
poisoned input therefore costs at most its time bound and never stalls the stage.

Why one message per batch: with a message per item, the parent woke for every check and, on
one core, took its time and its caches from the worker (about 10 % of the throughput of a
~3 ms check here). Why not pebble's ProcessPool (also on PyPI): its per-task timeout is right,
but a task per item pays that round trip, and a task per batch would lose a whole batch to
one poisoned item. Workers fork from a forkserver that has already imported math-verify and
sympy, so replacing a killed worker takes milliseconds, not seconds.

:func:`shared_pool` is the one persistent pool per set of bounds that :func:`pipeline.verify.judge.judge_many`
uses: started lazily on the first check that needs it, shared by threads (one ``map`` at a time), and left behind
(never closed: its workers belong to the parent) in a child forked from its process. The worker's side is
:mod:`pipeline.verify.worker`, the forkserver the workers fork from :mod:`pipeline.verify.forkserver`.

    >>> with GradePool(workers=2, timeout_s=5, memory_mb=1024) as pool:   # doctest: +SKIP
    ...     pool.map([("8", "8"), ("8", "\\\\frac{16}{2}"), ("8", "9")])
    [Grade(status='correct'), Grade(status='correct'), Grade(status='incorrect')]
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.errors import PassbandError
from pipeline.verify.forkserver import WorkerProcess, context, server, this_code_first
from pipeline.verify.grader import Grade, GradeOptions, grade
from pipeline.verify.worker import CPU, ITEM, PHASE, PHASES, WALL, GradeFn, worker_main

_START_TIMEOUT_S = 120.0


class VerifyError(PassbandError):
    """A verification failure that stops the stage (a worker that cannot start; raise_on_error)."""


# a worker that is runnable but gets too little of a core (a loaded machine) keeps its item up to this many
# times the CPU bound in wall time, against wall_factor times for one that sleeps
STARVED_FACTOR = 30.0


_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (None when the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _cpu_and_state(pid: int) -> tuple[float, bytes] | None:
    """User + system CPU seconds of a live process and its state letter, from one read (None when it is gone)."""
    fields = _stat(pid)
    return None if fields is None else ((int(fields[11]) + int(fields[12])) / _TICKS, fields[0])


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (None when it is gone)."""
    read = _cpu_and_state(pid)
    return None if read is None else read[0]


def _waiting_for_a_core(pid: int) -> bool:
    """The process is runnable (state R): it wants CPU and the machine has none to give it, unlike one that
    sleeps or waits on I/O."""
    read = _cpu_and_state(pid)
    return read is not None and read[1] == b"R"


@dataclass
class _Slot:
    proc: mp.process.BaseProcess
    conn: mpc.Connection
    progress: object  # the worker's shared array: ITEM, WALL, CPU
    inflight: collections.deque = field(default_factory=collections.deque)
    check_at: float = 0.0  # wall clock of the next deadline check

    def current(self) -> tuple[int, float, float] | None:
        """(item, wall start, CPU start) of the item the worker is on, or None between items."""
        for _ in range(100):
            item = int(self.progress[ITEM])
            wall, cpu = self.progress[WALL], self.progress[CPU]
            if item < 0:
                return None
            if int(self.progress[ITEM]) == item:
                return item, wall, cpu
        return None  # pragma: no cover - the worker moves on faster than we can read: not stuck


class GradePool:
    """``map`` a list of (gold, answer) pairs to :class:`Grade` s, in order, bounded per item."""

    def __init__(self, *, workers: int, timeout_s: float, memory_mb: int,
                 options: GradeOptions = GradeOptions(), batch_size: int = 16, wall_factor: float = 3.0,
                 flush_s: float = 0.25, fn: GradeFn = grade):
        """``fn`` (default :func:`~pipeline.verify.grader.grade`) must be a module-level function: workers import it."""
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers, self.timeout_s, self.memory_mb = workers, timeout_s, memory_mb
        self.options, self.batch_size, self.wall_factor, self.flush_s = options, batch_size, wall_factor, flush_s
        self.fn = fn
        self.restarts = 0
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()  # one map at a time: threads queue up
        self._pid = os.getpid()

    def __enter__(self) -> GradePool:
        self._slots = [self._spawn() for _ in range(self.workers)]
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _spawn(self) -> _Slot:
        ctx = context()
        parent, child = ctx.Pipe(duplex=True)
        progress = ctx.RawArray("d", 4)
        progress[ITEM] = -1
        fs = server()
        with this_code_first():  # started here (or again, if it died) importing this process's pipeline
            fs.ensure_running()
        proc = WorkerProcess(target=worker_main, args=(child, progress, self.options, self.memory_mb, self.fn,
                                                       self.flush_s, self.timeout_s, fs._forkserver_pid),
                             daemon=True, name="passband-verify")
        proc.start()
        child.close()
        # wait until it is warm, so start-up never counts against an item's time bound
        try:
            msg = parent.recv() if parent.poll(_START_TIMEOUT_S) else ("fatal", f"no sign of life in {_START_TIMEOUT_S} s")
        except (EOFError, OSError):
            msg = ("fatal", f"it exited during start-up (exit code {proc.exitcode})")
        if msg[0] != "ready":
            proc.kill()
            raise VerifyError(f"verify worker failed to start: {msg[1]}")
        return _Slot(proc, parent, progress)

    def _kill(self, slot: _Slot) -> None:
        if slot.proc.is_alive():
            os.kill(slot.proc.pid, signal.SIGKILL)
        slot.proc.join(5)
        slot.conn.close()

    def _over_time(self, slot: _Slot, now: float) -> int | None:
        """The item the worker is on when it is past the bound in the worker's own CPU seconds (so a loaded
        machine does not cause false timeouts), or past ``wall_factor`` times the bound in wall time (a worker
        that sleeps), or ``STARVED_FACTOR`` times when it is runnable but starved of a core. Else None, with the
        next check scheduled for when the CPU bound could be reached at the earliest."""
        cur = slot.current()
        if cur is None:  # between items or batches: look again soon
            slot.check_at = now + min(self.timeout_s, 0.05)
            return None
        item, wall0, cpu0 = cur
        hard = wall0 + self.wall_factor * self.timeout_s
        read = _cpu_and_state(slot.proc.pid)
        if read is None or read[0] - cpu0 > self.timeout_s:
            return item if slot.current() == cur else None  # it may have finished while we read /proc
        cpu, state = read
        if now >= hard:
            # A runnable worker is starved, not stuck: a loaded machine gives it a small share of a core, so it
            # gets up to STARVED_FACTOR times the bound in wall time to spend its CPU bound. One that sleeps or
            # waits on I/O is stuck.
            if now < wall0 + STARVED_FACTOR * self.timeout_s and state == b"R":
                slot.check_at = now + min(self.timeout_s, 0.25)
                return None
            return item
        slot.check_at = min(hard, now + max(0.05, self.timeout_s - (cpu - cpu0)))
        return None

    def close(self) -> None:
        for s in self._slots:
            with contextlib.suppress(OSError):
                s.conn.send(None)
        for s in self._slots:
            s.proc.join(1)
            if s.proc.is_alive():
                self._kill(s)
            else:
                s.conn.close()
        self._slots = []

    def map(self, pairs: Sequence[tuple[str, str]], *, on_done: Callable[[int], None] | None = None,
            workers: int | None = None, deadline: float | None = None) -> list[Grade]:
        """Grades in input order; ``on_done(i)`` is called as item ``i`` finishes. Thread-safe: one map at a time.

        ``workers`` (a :func:`shared_pool`): start workers lazily, as many as this batch needs, at most that many
        (and at most the pool's own ``workers``); without it, the pool must be inside its with-block.
        ``deadline`` (``time.monotonic()``): past it no item is sent to a worker; those in flight finish (each within
        the pool's bounds), and an item never sent has ``None`` for its grade."""
        with self._lock:
            if os.getpid() != self._pid:  # forked from the process that owns the workers: theirs, not ours
                self._slots, self._pid = [], os.getpid()
            if workers is not None:
                want = min(self.workers, workers, -(-len(pairs) // self.batch_size))
                while len(self._slots) < want:
                    self._slots.append(self._spawn())
            if not self._slots:
                if workers is None:
                    raise RuntimeError("GradePool.map outside its with-block")
                return []
            return self._map(pairs, on_done, deadline)

    def _map(self, pairs: Sequence[tuple[str, str]], on_done: Callable[[int], None] | None,
             deadline: float | None = None) -> list[Grade]:
        results: list[Grade | None] = [None] * len(pairs)
        queue = collections.deque(range(len(pairs)))
        remaining = len(pairs)

        def finish(i: int, g: Grade) -> None:
            nonlocal remaining
            results[i] = g
            remaining -= 1
            if on_done:
                on_done(i)

        def replace(k: int, culprit: int | None, verdict: Grade) -> None:
            """Kill worker k; ``culprit`` (default: the oldest item it holds) gets ``verdict``, the rest is redone."""
            slot = self._slots[k]
            self._kill(slot)
            culprit = slot.inflight[0] if culprit is None or culprit not in slot.inflight else culprit
            slot.inflight.remove(culprit)
            finish(culprit, verdict)
            queue.extendleft(reversed(slot.inflight))
            self._slots[k] = self._spawn()
            self.restarts += 1

        while remaining:
            now = time.monotonic()
            if deadline is not None and now >= deadline and queue:  # past it: nothing more is sent
                remaining -= len(queue)
                queue.clear()
                if not remaining:
                    break
            for k in range(len(self._slots)):  # keep every worker two batches deep
                s = self._slots[k]
                while queue and len(s.inflight) < 2 * self.batch_size:
                    batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
                    try:
                        s.conn.send([(i, *pairs[i]) for i in batch])
                    except OSError:  # it died while idle: nothing of ours was running; start another
                        queue.extendleft(reversed(batch))
                        self._kill(s)
                        s = self._slots[k] = self._spawn()
                        self.restarts += 1
                        continue
                    if not s.inflight:
                        s.check_at = now + self.timeout_s
                    s.inflight.extend(batch)
            busy = [s for s in self._slots if s.inflight]
            wait = min(60.0, max(0.0, min(s.check_at for s in busy) - now))  # poll() takes at most 2^31 ms
            ready = set(mpc.wait([s.conn for s in busy], timeout=wait))
            now = time.monotonic()
            for k, s in enumerate(self._slots):
                if s.conn in ready:
                    try:
                        while s.inflight and s.conn.poll():
                            for idx, status, detail in s.conn.recv():
                                assert idx == s.inflight[0], (idx, s.inflight[0])
                                s.inflight.popleft()
                                finish(idx, Grade(status, detail))
                    except (EOFError, OSError) as exc:
                        s.proc.join(1)
                        code = s.proc.exitcode
                        cur = s.current()
                        if code == -signal.SIGXCPU:  # its own CPU limit: the bound, enforced by the kernel
                            phase = PHASES.get(int(s.progress[PHASE]), "grading the answer")
                            replace(k, cur and cur[0], Grade("timeout", f"no result within {self.timeout_s:g} s of "
                                                                        f"CPU time ({phase}); worker's CPU limit hit"))
                            continue
                        why = str(exc) or f"exit code {code}" + (" (killed: out of memory?)" if code == -9 else "")
                        replace(k, cur and cur[0], Grade("error", f"worker died: {why}"))
                        continue
                if s.inflight and now >= s.check_at and (item := self._over_time(s, now)) is not None:
                    phase = PHASES.get(int(s.progress[PHASE]), "grading the answer")
                    replace(k, item, Grade("timeout", f"no result within {self.timeout_s:g} s of CPU time "
                                                      f"({phase}); worker killed"))
        return results  # type: ignore[return-value]


_SHARED: dict[tuple, GradePool] = {}


_SHARED_LOCK = threading.Lock()


_SHARED_MAX = 4  # sets of bounds kept warm at once; the oldest is closed past it


def shared_pool(*, workers: int, timeout_s: float, memory_mb: int, options: GradeOptions = GradeOptions(),
                fn: GradeFn = grade) -> GradePool:
    """The persistent pool for these bounds and ``fn`` (created on first use, its workers started by
    ``map(..., workers=n)``). ``workers`` raises the pool's ceiling when a caller asks for more; it never lowers it."""
    key = (timeout_s, memory_mb, options.model_dump_json(), fn.__module__, fn.__qualname__)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None or pool._pid != os.getpid():
            if pool is not None:  # a forked child's copy: the workers are the parent's; forget them, kill nothing
                pool._slots = []
            pool = _SHARED[key] = GradePool(workers=workers, timeout_s=timeout_s, memory_mb=memory_mb, options=options,
                                            fn=fn)
            while len(_SHARED) > _SHARED_MAX:
                old = _SHARED.pop(next(iter(_SHARED)))
                with old._lock:
                    old.close()
        pool.workers = max(pool.workers, workers)
        return pool


@atexit.register
def _close_shared() -> None:
    for pool in list(_SHARED.values()):
        if pool._pid == os.getpid():
            pool.close()
    _SHARED.clear()
