"""The Python detectors over a pool of worker processes: annotate's CPU-bound part on every core.

DuckDB already uses every core for the SQL side; the Python detectors (``detect(row)`` per candidate row)
held one. :func:`pooled_detectors` sends each batch of candidate rows (Arrow, so a batch crosses as one buffer,
not a row at a time) to a worker that runs :func:`pipeline.annotate.flag_runner.run_detectors` on it, and yields
the hit batches back in the order the batches were read, with the same counts: the hits are the same rows as in
one process (each detector decides on its own row). At most two batches per worker are in flight, so memory
stays a few batches whatever the job's size.

Workers are started with ``spawn`` (the stage holds DuckDB's threads: a ``fork`` could copy a lock held by one
of them) as direct children of the stage process, and each asks the kernel for SIGKILL when the stage exits
(``PR_SET_PDEATHSIG``, checked against a parent that died before it asked), so a ``kill -9`` of the stage or the
OOM killer taking it leaves no worker computing. The user's plugins (params.yaml's ``plugins``: files and modules)
are shipped to each worker and loaded there first (the Python ones: :func:`pipeline.plugins.shipped_plugins`;
:func:`pipeline.plugins.load_shipped`, as the Ray engine and
the verify pool's Ray workers do): a detector defined in a plugin file reaches the worker by name, looked up in the
registry its file filled there (its module's name is the file's path, which pickling cannot follow); every other
detector is pickled. The knobs go as a dict, validated again there against the same registry.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pyarrow as pa

from pipeline.annotate.detectors import DETECTORS, Detector
from pipeline.annotate.flag_runner import FlagCounts, run_detectors
from pipeline.errors import PassbandError
from pipeline.lifetime import die_with_parent
from pipeline.plugins import ShippedPlugin, load_shipped, shipped_plugins

IN_FLIGHT_PER_WORKER = 2  # batches queued per worker: one running, one ready, so no worker waits on the parent

_WORKER: dict[str, Any] = {}


class DetectorPoolError(PassbandError):
    """A detector worker died (the OOM killer, a segfault): the stage stops with one line."""


PLUGIN_MODULE = "passband_plugin_"  # the module-name prefix of a plugin file (pipeline.plugins)


def _shipped(detectors: Sequence[Detector]) -> list[tuple[str, dict[str, Any], bytes | None]]:
    """Each detector as a worker gets it: (name, its knobs, None) when a plugin file defines it (its class looked up
    by name there after the file is loaded), else (name, its knobs, its pickle: its class by reference and knobs)."""
    out = []
    for d in detectors:
        by_name = type(d).__module__.startswith(PLUGIN_MODULE)
        out.append((d.name, d.options.model_dump(mode="json"), None if by_name else pickle.dumps(d)))
    return out


def _init(parent_pid: int, detectors: list[tuple[str, dict[str, Any], bytes | None]],
          plugins: list[ShippedPlugin]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C goes to the stage, which shuts the pool down
    die_with_parent(parent_pid)  # elsewhere than Linux it ends when its pipe closes
    load_shipped(plugins)  # the user's Python plugins first: their detectors and their options' models
    _WORKER["detectors"] = [DETECTORS.lookup(name)(knobs) if blob is None else pickle.loads(blob)
                            for name, knobs, blob in detectors]


def _run(batch: pa.RecordBatch) -> tuple[list[pa.RecordBatch], FlagCounts, int]:
    counts = FlagCounts({}, {})
    hits = list(run_detectors(iter([batch]), _WORKER["detectors"], counts=counts))
    return hits, counts, batch.num_rows


def _merge(into: FlagCounts, part: FlagCounts) -> None:
    for mine, theirs in ((into.candidates, part.candidates), (into.fired, part.fired), (into.errors, part.errors)):
        for k, v in theirs.items():
            mine[k] = mine.get(k, 0) + v


def pooled_detectors(batches: Iterator[pa.RecordBatch], detectors: Sequence[Detector], *, workers: int,
                     counts: FlagCounts | None = None,
                     on_batch: Callable[[int], None] | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`~pipeline.annotate.flag_runner.run_detectors` over ``workers`` processes (1: in this process)."""
    if workers <= 1:
        yield from run_detectors(batches, detectors, counts=counts, on_batch=on_batch)
        return
    ex = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init,
                             initargs=(os.getpid(), _shipped(detectors),
                                       shipped_plugins()))
    pending: deque[Future] = deque()

    def done(future: Future) -> list[pa.RecordBatch]:
        try:
            hits, part, n = future.result()
        except BrokenProcessPool as exc:
            raise DetectorPoolError(f"annotate: a detector worker died ({exc}); annotate.workers: 1 runs the "
                                    "detectors in the stage's own process") from None
        if counts is not None:
            _merge(counts, part)
        if on_batch:
            on_batch(n)
        return hits

    try:
        for batch in batches:
            pending.append(ex.submit(_run, batch))
            if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                yield from done(pending.popleft())
        while pending:
            yield from done(pending.popleft())
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
