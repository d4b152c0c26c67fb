"""Fail, not hang, when an engine's worker process dies: a watchdog for engines that run their model in children.

vLLM runs the model in worker processes and waits on them without a time limit; when the
kernel's OOM killer (or a person) kills one, the parent would wait forever. While a stream
runs, :func:`dies_with` polls the worker pids once a second; when one is gone it interrupts the
main thread (a signal, so even a blocking wait returns) with an :class:`EngineDied` error naming the
process. The stage then fails with one line; its finished shards are kept, and a re-run resumes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from pipeline.errors import EngineError


class EngineDied(EngineError):
    """An engine worker process is gone: the engine cannot be asked anything any more."""


def children() -> set[int]:
    """Every descendant process of this one (empty without psutil)."""
    try:
        import psutil
    except ImportError:
        return set()
    return {c.pid for c in psutil.Process().children(recursive=True)}


def kill(pids: set[int]) -> None:
    """SIGKILL the ones of ``pids`` still running (an engine's other workers, once one has died)."""
    import psutil

    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextlib.contextmanager
def dies_with(pids: set[int], *, engine: str, poll_s: float = 1.0) -> Iterator[None]:
    """Raise EngineError in the main thread if one of ``pids`` exits while the block runs (no-op off the main thread)."""
    if not pids or threading.current_thread() is not threading.main_thread():
        yield
        return
    dead: list[int] = []
    main = threading.main_thread().ident

    def interrupt(signum, frame):
        raise EngineDied(f"{engine}: engine worker process {dead[0]} died (killed, or out of memory); "
                          "the finished shards are kept: re-run to resume")

    previous = signal.signal(signal.SIGUSR1, interrupt)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(poll_s):
            gone = [p for p in pids if not _alive(p)]
            if gone:
                dead.extend(gone)
                signal.pthread_kill(main, signal.SIGUSR1)
                return

    watcher = threading.Thread(target=watch, name="engine-watchdog", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        signal.signal(signal.SIGUSR1, previous)
