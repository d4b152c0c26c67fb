"""Environment variables that vLLM reads at import and engine start-up.

vLLM reads most of its settings from the environment (``vllm.envs``), and the CPU build
needs a few of them to run well:

- ``VLLM_CPU_OMP_THREADS_BIND``: the cores the worker's OpenMP threads are pinned to. The
  default ``auto`` reserves one core per worker for the scheduler process, which on a
  2-core machine halves throughput; binding every allowed core (e.g. ``0-1``) is faster.
- ``VLLM_CPU_KVCACHE_SPACE``: KV-cache size in GiB (an integer). Unset, vLLM sizes the
  cache from a fraction of system memory after a warm-up pass.
- ``VLLM_CACHE_ROOT``: vLLM's cache (compiled graphs, assets, start-up plans); defaults to
  ``~/.cache/vllm``, which we keep out of the home directory.
- ``VLLM_NO_USAGE_STATS`` / ``DO_NOT_TRACK``: no usage report to vLLM's stats server.

Call :func:`configure_cpu_env` before ``import vllm`` (``vllm.envs`` caches some values),
and before the engine spawns its worker process, which inherits the environment.
Variables the user already set are left alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, MutableMapping
from pathlib import Path

from pipeline.errors import PassbandError

DEFAULT_KV_CACHE_GIB = 2


def cpu_ranges(cores: Iterable[int]) -> str:
    """Format core ids as vLLM's bind syntax: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    ids = sorted(set(cores))
    if not ids:
        raise ValueError("no CPU cores to bind")
    parts: list[str] = []
    start = prev = ids[0]
    for c in [*ids[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(parts)


def allowed_cores() -> list[int]:
    """The cores this process may run on (its affinity mask), sorted."""
    return sorted(os.sched_getaffinity(0))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def configure_cpu_env(
    *,
    threads: int | None = None,
    kv_cache_gib: int = DEFAULT_KV_CACHE_GIB,
    cache_root: Path,
    on_gpu: bool | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> dict[str, str]:
    """Set vLLM's environment for this process; return the variables it set.

    ``threads`` is how many of the allowed cores the engine's OpenMP threads use (all of them
    when None). ``kv_cache_gib`` must be a whole number of GiB (vLLM parses it with ``int``).
    On a GPU machine (``on_gpu``; detected with ``torch.cuda.is_available()`` when None) the
    CPU-only variables are not set; the cache root and the usage-stats opt-out still are.
    A variable that is already present in the environment is never changed.
    """
    env = os.environ if environ is None else environ
    if isinstance(kv_cache_gib, bool) or not isinstance(kv_cache_gib, int) or kv_cache_gib < 1:
        raise ValueError(f"kv_cache_gib must be a whole number of GiB >= 1, got {kv_cache_gib!r}")
    wanted: dict[str, str] = {
        "VLLM_CACHE_ROOT": str(Path(cache_root).expanduser().resolve()),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    if on_gpu is None:
        on_gpu = _cuda_available()
    if not on_gpu:
        cores = allowed_cores()
        if threads is not None:
            if not 1 <= threads <= len(cores):
                raise ValueError(f"threads must be between 1 and {len(cores)} (the allowed cores), got {threads}")
            cores = cores[:threads]
        wanted["VLLM_CPU_OMP_THREADS_BIND"] = cpu_ranges(cores)
        wanted["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)

    set_now: dict[str, str] = {}
    for key, value in wanted.items():
        if key not in env:
            env[key] = value
            set_now[key] = value
    return set_now


def verbose() -> bool:
    """Engine logs on the terminal too: ``passband --verbose`` or ``PASSBAND_LOG_LEVEL=DEBUG``."""
    return os.environ.get("PASSBAND_LOG_LEVEL", "").upper() == "DEBUG"


def logging_config(log_file: Path, *, to_terminal: bool) -> dict:
    """A ``logging.dictConfig`` for the ``vllm`` logger: INFO and up appended to ``log_file``, and to stderr when asked."""
    fmt = {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    handlers = {"file": {"class": "logging.FileHandler", "filename": str(log_file), "mode": "a", "formatter": "plain",
                         "encoding": "utf-8"}}
    if to_terminal:
        handlers["terminal"] = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}
    return {"version": 1, "disable_existing_loggers": False, "formatters": {"plain": fmt}, "handlers": handlers,
            "loggers": {"vllm": {"handlers": list(handlers), "level": "DEBUG" if to_terminal else "INFO",
                                 "propagate": False}}}


def configure_logging(log_file: Path, *, to_terminal: bool | None = None,
                      environ: MutableMapping[str, str] | None = None) -> Path:
    """Send vLLM's log lines (this process and the worker it spawns) to ``log_file``; return its path.

    vLLM configures its ``vllm`` logger at import from ``VLLM_LOGGING_CONFIG_PATH``, a JSON
    dictConfig: it is written beside the log and named there, so the worker process, which
    imports vLLM afresh, logs to the same file. If vLLM is already imported here, the same
    config is applied at once. ``to_terminal`` (default :func:`verbose`) also keeps them on stderr.
    """
    import json
    import logging.config
    import sys

    from pipeline.io import atomic_write_text  # lazy: keeps this module stdlib-only (io brings pyarrow)

    env = os.environ if environ is None else environ
    to_terminal = verbose() if to_terminal is None else to_terminal
    log_file = Path(log_file).resolve()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    cfg = logging_config(log_file, to_terminal=to_terminal)
    cfg_path = log_file.with_suffix(".logging.json")
    atomic_write_text(cfg_path, json.dumps(cfg, indent=1))
    env["VLLM_CONFIGURE_LOGGING"] = "1"
    env["VLLM_LOGGING_CONFIG_PATH"] = str(cfg_path)
    if "vllm" in sys.modules and environ is None:
        logging.config.dictConfig(cfg)
    return log_file


@contextlib.contextmanager
def output_to(log_file: Path | None) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2) to ``log_file`` inside the block.

    For engine start-up: vLLM and the libraries under it also print without ``logging`` (weight
    loading bars, compiler and platform notes), and the worker process it spawns inherits the
    descriptors, so its output stays in the file after the block. ``None`` changes nothing.
    On an error the last lines of the file are added to the exception's notes, so its cause
    still reaches the terminal.
    """
    if log_file is None:
        yield
        return
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:  # O_NOFOLLOW: a link planted at the log's name is refused, never appended to
        fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise PassbandError(f"{log_file}: cannot open the engine log ({exc.strerror}); if it is a symbolic link, "
                            "remove it (what it points to is kept), then re-run") from None
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    except BaseException as exc:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        tail = Path(log_file).read_text(errors="replace").splitlines()[-15:]
        exc.add_note(f"last lines of {log_file}:\n" + "\n".join(tail))
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


__all__ = ["DEFAULT_KV_CACHE_GIB", "allowed_cores", "configure_cpu_env", "configure_logging", "cpu_ranges",
           "logging_config", "output_to", "verbose"]
