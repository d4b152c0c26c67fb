"""Annotate stage: verdicts (of the current verifier_id) + rollouts + problems -> flags, difficulty, metrics, plots.

The shell opens an in-memory DuckDB with a memory limit (``annotate.memory_limit_mb``; it
spills to a temp folder past it), points views at the set's Parquet shards, runs the core
(:mod:`pipeline.annotate.core`) and writes each output to a temp name renamed into place.
"""

from __future__ import annotations

from pipeline.annotate.stage import AnnotateResult, annotate_tables, open_inputs, run, set_config

__all__ = ["AnnotateResult", "annotate_tables", "open_inputs", "run", "set_config"]
