"""passband's own forkserver, the one the grading workers fork from (it has imported math-verify and sympy once).

Workers never import the caller's ``__main__``: multiprocessing would re-run a script that has no
``if __name__ == "__main__":`` guard in every worker (which then fails to start); :class:`WorkerProcess`
sends the workers everything of the caller's set-up except its main module, so a plain script, ``python -c``,
a notebook, a thread or a Ray task can all grade. The forkserver imports this process's ``pipeline``, never
another one on its path (:func:`this_code_first`).
"""


from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import os
import threading
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.context import set_spawning_popen

_CTX: mp.context.BaseContext | None = None


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
        self.sentinel, w = server().connect_to_new_process(self._fds)  # running: GradePool._spawn started it
        _parent_w = os.dup(w)  # the child's sentinel of its parent, as in CPython
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class WorkerProcess(mp.context.ForkServerProcess):
    _start_method = "forkserver"

    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


_SERVER: tuple[int, forkserver.ForkServer] | None = None


_SERVER_LOCK = threading.Lock()


def server() -> forkserver.ForkServer:
    """passband's own forkserver (not multiprocessing's global one: another library's preload or a fork of this
    process cannot break it): it imports math-verify and sympy once; a process forked from this one gets its own."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or _SERVER[0] != os.getpid():
            server = forkserver.ForkServer()
            server.set_forkserver_preload(["pipeline.verify._preload"])
            _SERVER = (os.getpid(), server)
        return _SERVER[1]


IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds this pipeline/


@contextlib.contextmanager
def this_code_first():
    """The environment the forkserver starts in, so that it imports this process's ``pipeline``.

    The forkserver is ``python -c ...``, whose path starts with the current folder, and CPython (3.11-3.13) does not
    give it the parent's ``sys.path``: run from a folder that holds another ``pipeline`` package (a user's project
    has one; a checkout of another commit beside a pinned copy, as the band-value runner is), it imported that one
    and every worker ran foreign code (``TypeError: worker_main() missing 2 required positional arguments``). Started
    with ``PYTHONSAFEPATH`` (no current folder on its path) and, where this ``pipeline`` is not in site-packages,
    its folder first on ``PYTHONPATH``, it imports this code. The variables are restored at once (the workers it
    forks later inherit the forkserver's, and start no Python of their own)."""
    import site

    saved = {k: os.environ.get(k) for k in ("PYTHONSAFEPATH", "PYTHONPATH")}
    os.environ["PYTHONSAFEPATH"] = "1"
    site_dirs = {os.path.abspath(d) for d in [*site.getsitepackages(), site.getusersitepackages()]}
    if IMPORT_ROOT not in site_dirs:  # a checkout, an editable install or a copy: its folder first
        os.environ["PYTHONPATH"] = os.pathsep.join([IMPORT_ROOT, *filter(None, [saved["PYTHONPATH"]])])
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def context() -> mp.context.BaseContext:
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
    return _CTX
