"""Annotate stage: verdicts (of the current verifier_id) + rollouts + problems -> flags, difficulty, metrics, plots.

The shell opens an in-memory DuckDB with a memory limit (``annotate.memory_limit_mb``; it
spills to a temp folder past it), points views at the set's Parquet shards, runs the core
(:mod:`pipeline.annotate.core`) and writes each output to a temp name renamed into place.

The names below are imported on first use: a detector worker (:mod:`pipeline.annotate.detector_pool`) imports
this package and needs the detectors, not the stage's DuckDB, plots and rollout helpers (seconds of start-up each).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.annotate.stage import AnnotateResult, annotate_tables, open_inputs, run, set_config  # lazy: types only

__all__ = ["AnnotateResult", "annotate_tables", "open_inputs", "run", "set_config"]


def __getattr__(name: str):
    if name in __all__:
        from pipeline.annotate import stage  # lazy: a detector worker never loads the stage (above)

        return getattr(stage, name)
    raise AttributeError(f"module 'pipeline.annotate' has no attribute {name!r}")
