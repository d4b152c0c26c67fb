"""One writer per stage and table set: an advisory lock file per (stage, set) under ``.passband/locks``.

Every stage command takes its lock before reading anything (``with_params`` does it for the
commands in :data:`WRITERS`); a second writer of the same stage refuses at once with the
first one's pid, command and start time, instead of interleaving shards. The lock is an
``flock`` on an open file, so the kernel releases it when its holder dies, SIGKILL included:
a crashed run never leaves a lock to clean up. ``passband doctor --repair`` takes every lock.

A lock file is opened with ``O_NOFOLLOW`` inside the lock folder (itself opened with ``O_NOFOLLOW``),
and must be a regular file with one link: a symbolic link, hard link, FIFO or other file planted at
its name is refused with one line, never truncated, written or chmod-ed.

:func:`hold_folder` is the same ``flock`` taken on an output folder itself (rollout's: two runs from
different projects or params files that name one folder), so no lock file lands inside a DVC output.
This module is passband's one lock implementation; the ``flock /tmp/...`` in benchmark and test
docstrings is the shell's command, serialising heavy jobs on a shared box, not passband's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import PassbandError
from pipeline.io import current_umask
from pipeline.stages import writers
from pipeline.tablesets import SETS

LOCK_DIR = ".passband/locks"
# command -> does it take --set (its lock is per set): every command pipeline/stages.py declares a writer
WRITERS = writers()


class LockedError(PassbandError):
    """Another process holds the lock."""


def lock_name(command: str, set_name: str | None = None) -> str:
    return f"{command}-{set_name}" if WRITERS.get(command) and set_name else command


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        return "another process"
    return text or "another process"


@contextlib.contextmanager
def hold(root: Path, name: str, *, wait_s: float = 0.0) -> Iterator[Path]:
    """Hold lock ``name`` of the repository at ``root``; wait up to ``wait_s`` seconds, then raise :class:`LockedError`."""
    directory = Path(root) / LOCK_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.lock"
    fd = _open_lock(directory, path)
    try:
        if not _acquire(fd, wait_s=wait_s):
            raise LockedError(f"stage {name} is already running in {Path(root).resolve()} ({_holder(path)}); "
                              "wait for it to finish (a killed run releases the lock by itself), then re-run")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        with contextlib.suppress(OSError):  # who holds it, for the next one's message (best effort: a full disk)
            os.fchmod(fd, 0o666 & ~current_umask())
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}, `{' '.join(sys.argv[1:]) or name}`, since {stamp}\n".encode())
        yield path
    finally:
        os.close(fd)


def _acquire(fd: int, *, wait_s: float) -> bool:
    """An exclusive ``flock`` on ``fd``, retried for up to ``wait_s`` seconds; False if another process still holds it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


@contextlib.contextmanager
def hold_folder(directory: Path, *, busy: str) -> Iterator[None]:
    """An exclusive lock on ``directory`` itself (no lock file inside it); :class:`LockedError` ``busy`` if held."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if not _acquire(fd, wait_s=0.0):
            raise LockedError(busy)
        yield
    finally:
        os.close(fd)


def _refuse(path: Path, what: str) -> LockedError:
    return LockedError(f"{path}: the lock file is {what}; passband makes its own lock files and never writes through "
                       "one planted there: remove it (what it points to is kept), then re-run")


def _open_lock(directory: Path, path: Path) -> int:
    """The lock file's descriptor, opened without following a link and checked to be a plain file of its own."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise _refuse(directory, f"in a folder that is a symbolic link or unreadable ({exc.strerror})") from None
    try:
        fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666,
                     dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise _refuse(path, "a symbolic link") from None
        if exc.errno == errno.EISDIR:
            raise _refuse(path, "a folder") from None
        raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise _refuse(path, "not a plain file" if not stat.S_ISREG(st.st_mode) else "a hard link to another file")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def hold_all(root: Path) -> Iterator[None]:
    """Every stage's lock (for ``passband doctor --repair``): no stage can write while it runs."""
    names = [lock_name(c, s) for c, per_set in WRITERS.items() for s in (SETS if per_set else (None,))]
    with contextlib.ExitStack() as stack:
        for n in names:
            stack.enter_context(hold(root, n))
        yield
