"""The verify core as Ray tasks: the rollouts in chunks, each chunk verified by :func:`pipeline.verify.core.verify`.

    verify:
      executor: ray            # local (default): one GradePool on this machine
      ray_address: auto        # None: RAY_ADDRESS, else a local Ray with `workers` CPUs
      ray_chunk_rows: 2000

Each task runs the same core function as the local stage, with its own worker pool of
``verify.workers`` processes (the task reserves that many CPUs), so every check has the same
CPU-time and memory bounds and every verdict is the one the local pool gives (same code, same
``verifier_id``). A task lost with its node is re-run by Ray on another node
(``max_retries``); the results are taken once per chunk, so no rollout is verified twice in
the output. ``checks`` and ``restarts`` are summed over the chunks. The user's plugins (params.yaml's
``plugins``: an extractor in a file) travel with each task (:func:`pipeline.plugins.shipped_plugins`), so a
node that lacks the file verifies with it all the same.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping

import pyarrow as pa

from pipeline.config import VerifyConfig, field_default
from pipeline.plugins import ShippedPlugin, load_shipped, shipped_plugins
from pipeline.verify.core import VerifyResult, verify
from pipeline.verify.pool import VerifyError

TASK_RETRIES = 3


def _chunk(rollouts: pa.Table, problems: pa.Table, config: VerifyConfig, modes: dict[str, str],
           plugins: list[ShippedPlugin]) -> VerifyResult:
    load_shipped(plugins)
    return verify(rollouts, problems, config=config, modes=modes)


def verify_on_ray(rollouts: pa.Table, problems: pa.Table, *, config: VerifyConfig,
                  chunk_rows: int = field_default(VerifyConfig, "ray_chunk_rows"),
                  address: str | None = None, on_done: Callable[[int], None] | None = None,
                  modes: Mapping[str, str] | None = None) -> VerifyResult:
    """Verdicts for every rollout (same order), the chunks verified as Ray tasks (``modes``: as in ``verify``)."""
    try:
        import ray
    except ImportError as exc:
        raise VerifyError(f"verify.executor ray needs Ray (pip install 'passband[ray]'): {exc}") from exc
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    own = not ray.is_initialized()
    if own:
        address = address or os.environ.get("RAY_ADDRESS")
        kwargs = {"address": address} if address else {"num_cpus": config.workers}
        ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **kwargs)
    try:
        task = ray.remote(_chunk).options(num_cpus=config.workers, max_retries=TASK_RETRIES)
        starts = range(0, rollouts.num_rows, chunk_rows)
        plugins = ray.put(shipped_plugins())
        refs = [task.remote(rollouts.slice(a, chunk_rows), problems, config, dict(modes or {}), plugins)
                for a in starts]
        where = dict(zip(refs, starts, strict=True))
        done: dict[int, VerifyResult] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                done[where[ready[0]]] = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:
                raise VerifyError(f"verify on Ray: the chunk of rollouts {where[ready[0]]}.."
                                  f"{where[ready[0]] + chunk_rows - 1} failed: {exc.cause or exc}") from exc
            except ray.exceptions.RayError as exc:  # retries exhausted (nodes lost)
                raise VerifyError(f"verify on Ray: the chunk of rollouts from {where[ready[0]]} was lost "
                                  f"{TASK_RETRIES + 1} times ({exc}); re-run to verify what is missing") from exc
            if on_done:
                on_done(done[where[ready[0]]].verdicts.num_rows)
    finally:
        if own:
            ray.shutdown()
    parts = [done[a] for a in starts]
    if not parts:
        return verify(rollouts, problems, config=config)
    statuses, extractors = Counter(), Counter()
    for p in parts:
        statuses.update(p.statuses)
        extractors.update(p.extractors)
    return VerifyResult(verdicts=pa.concat_tables([p.verdicts for p in parts]), verifier_id=parts[0].verifier_id,
                        checks=sum(p.checks for p in parts), restarts=sum(p.restarts for p in parts),
                        statuses=dict(statuses), extractors=dict(extractors))
