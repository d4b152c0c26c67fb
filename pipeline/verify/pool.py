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

A worker also bounds itself, so nothing keeps computing when the parent is gone (the OOM killer takes
the stage process alone, a ``kill -9``): before each item it moves its soft ``RLIMIT_CPU`` to that
item's CPU bound plus a second (the kernel then kills it with SIGXCPU, recorded as ``timeout``, should
the parent be stopped or starved); it asks the kernel for SIGKILL when the forkserver exits
(``PR_SET_PDEATHSIG``); and it closes its copy of the forkserver's "alive" pipe, which the forkserver
watches to exit once the stage process is gone (a worker holding it kept the forkserver, and so itself,
alive). The forkserver gets no parent-death signal of its own: it would fire when the *thread* that
started it ends, and threads share the pool.

Why one message per batch: with a message per item, the parent woke for every check and, on
one core, took its time and its caches from the worker (about 10 % of the throughput of a
~3 ms check here). Why not pebble's ProcessPool (also on PyPI): its per-task timeout is right,
but a task per item pays that round trip, and a task per batch would lose a whole batch to
one poisoned item. Workers fork from a forkserver that has already imported math-verify and
sympy, so replacing a killed worker takes milliseconds, not seconds.

Workers never import the caller's ``__main__``: multiprocessing would re-run a script that has no
``if __name__ == "__main__":`` guard in every worker (which then fails to start); :class:`_Popen`
sends the workers everything of the caller's set-up except its main module, so a plain script,
``python -c``, a notebook, a thread or a Ray task can all grade. :func:`shared_pool` is the one
persistent pool per set of bounds that :func:`pipeline.verify.judge.judge_many` uses: started lazily
on the first check that needs it, shared by threads (one ``map`` at a time), and left behind (never
closed: its workers belong to the parent) in a child forked from its process.

    >>> with GradePool(workers=2, timeout_s=5, memory_mb=1024) as pool:   # doctest: +SKIP
    ...     pool.map([("8", "8"), ("8", "\\\\frac{16}{2}"), ("8", "9")])
    [Grade(status='correct'), Grade(status='correct'), Grade(status='incorrect')]
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import io
import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.context import set_spawning_popen

from pipeline.errors import PassbandError
from pipeline.gold import parse_gold
from pipeline.lifetime import die_with_parent
from pipeline.verify.grader import Grade, GradeOptions, grade

_CTX: mp.context.BaseContext | None = None
_START_TIMEOUT_S = 120.0


class VerifyError(PassbandError):
    """A verification failure that stops the stage (a worker that cannot start; raise_on_error)."""


# what multiprocessing's preparation data uses to re-import the parent's main module in the child
_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


class _Popen(popen_forkserver.Popen):
    """The forkserver's ``Popen`` without the caller's main module: ``_launch`` as in CPython 3.11-3.13, with
    ``init_main_from_path``/``init_main_from_name`` left out of the preparation data, so the child never runs
    ``spawn._fixup_main_from_path`` (which imports the caller's script as ``__mp_main__``: a script without a
    main guard would run again in the worker and call ``judge`` there). The worker needs nothing from the
    caller's main: its target and arguments live in :mod:`pipeline.verify`."""

    def _launch(self, process_obj):
        prep_data = {k: v for k, v in spawn.get_preparation_data(process_obj._name).items() if k not in _MAIN_KEYS}
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = _server().connect_to_new_process(self._fds)  # running: GradePool._spawn started it
        _parent_w = os.dup(w)  # the child's sentinel of its parent, as in CPython
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _Process(mp.context.ForkServerProcess):
    _start_method = "forkserver"

    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


_SERVER: tuple[int, forkserver.ForkServer] | None = None
_SERVER_LOCK = threading.Lock()


def _server() -> forkserver.ForkServer:
    """passband's own forkserver (not multiprocessing's global one: another library's preload or a fork of this
    process cannot break it): it imports math-verify and sympy once; a process forked from this one gets its own."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or _SERVER[0] != os.getpid():
            server = forkserver.ForkServer()
            server.set_forkserver_preload(["pipeline.verify._preload"])
            _SERVER = (os.getpid(), server)
        return _SERVER[1]


_IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds this pipeline/


@contextlib.contextmanager
def _this_code_first():
    """The environment the forkserver starts in, so that it imports this process's ``pipeline``.

    The forkserver is ``python -c ...``, whose path starts with the current folder, and CPython (3.11-3.13) does not
    give it the parent's ``sys.path``: run from a folder that holds another ``pipeline`` package (a user's project
    has one; a checkout of another commit beside a pinned copy, as the band-value runner is), it imported that one
    and every worker ran foreign code (``TypeError: _worker() missing 2 required positional arguments``). Started
    with ``PYTHONSAFEPATH`` (no current folder on its path) and, where this ``pipeline`` is not in site-packages,
    its folder first on ``PYTHONPATH``, it imports this code. The variables are restored at once (the workers it
    forks later inherit the forkserver's, and start no Python of their own)."""
    import site

    saved = {k: os.environ.get(k) for k in ("PYTHONSAFEPATH", "PYTHONPATH")}
    os.environ["PYTHONSAFEPATH"] = "1"
    site_dirs = {os.path.abspath(d) for d in [*site.getsitepackages(), site.getusersitepackages()]}
    if _IMPORT_ROOT not in site_dirs:  # a checkout, an editable install or a copy: its folder first
        os.environ["PYTHONPATH"] = os.pathsep.join([_IMPORT_ROOT, *filter(None, [saved["PYTHONPATH"]])])
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _context() -> mp.context.BaseContext:
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
    return _CTX


GradeFn = Callable[..., Grade]


# the shared progress array of a worker: the item it is on (-1: none), when it started it, and its phase
_ITEM, _WALL, _CPU, _PHASE = 0, 1, 2, 3
_PHASES = {0: "grading the answer", 1: "parsing the gold"}


# CPU seconds a worker may run past an item's bound before its own RLIMIT_CPU stops it: the parent's kill comes first
_CPU_GRACE_S = 1.0
# a worker that is runnable but gets too little of a core (a loaded machine) keeps its item up to this many
# times the CPU bound in wall time, against wall_factor times for one that sleeps
STARVED_FACTOR = 30.0


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
    soft = time.process_time() + timeout_s + _CPU_GRACE_S
    if not soft < 2**62:  # a bound of centuries (the config only asks for a finite one): nothing to enforce
        return
    soft = math.ceil(soft)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _worker(conn: mpc.Connection, progress, options: GradeOptions, memory_mb: int, fn: GradeFn, flush_s: float,
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
            progress[_ITEM] = -1
            _cpu_limit(timeout_s)
            progress[_WALL], progress[_CPU] = time.monotonic(), time.process_time()
            progress[_ITEM] = idx
            try:
                if fn is grade:  # the gold first, on its own, so a timeout can say which side was slow
                    progress[_PHASE] = 1
                    parse_gold(gold)  # cached: grade() reads the same parse
                progress[_PHASE] = 0
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
        progress[_ITEM] = -1
        conn.send(out)


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
    progress: object  # the worker's shared array: _ITEM, _WALL, _CPU
    inflight: collections.deque = field(default_factory=collections.deque)
    check_at: float = 0.0  # wall clock of the next deadline check

    def current(self) -> tuple[int, float, float] | None:
        """(item, wall start, CPU start) of the item the worker is on, or None between items."""
        for _ in range(100):
            item = int(self.progress[_ITEM])
            wall, cpu = self.progress[_WALL], self.progress[_CPU]
            if item < 0:
                return None
            if int(self.progress[_ITEM]) == item:
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
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        progress = ctx.RawArray("d", 4)
        progress[_ITEM] = -1
        server = _server()
        with _this_code_first():  # started here (or again, if it died) importing this process's pipeline
            server.ensure_running()
        proc = _Process(target=_worker, args=(child, progress, self.options, self.memory_mb, self.fn, self.flush_s,
                                              self.timeout_s, server._forkserver_pid),
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
                            phase = _PHASES.get(int(s.progress[_PHASE]), "grading the answer")
                            replace(k, cur and cur[0], Grade("timeout", f"no result within {self.timeout_s:g} s of "
                                                                        f"CPU time ({phase}); worker's CPU limit hit"))
                            continue
                        why = str(exc) or f"exit code {code}" + (" (killed: out of memory?)" if code == -9 else "")
                        replace(k, cur and cur[0], Grade("error", f"worker died: {why}"))
                        continue
                if s.inflight and now >= s.check_at and (item := self._over_time(s, now)) is not None:
                    phase = _PHASES.get(int(s.progress[_PHASE]), "grading the answer")
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
