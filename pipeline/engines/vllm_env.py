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

import os
from collections.abc import Iterable, MutableMapping
from pathlib import Path

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
