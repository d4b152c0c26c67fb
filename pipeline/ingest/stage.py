"""The ingest stage's shell and helpers; :mod:`pipeline.ingest` describes the stage and re-exports its public names."""

from __future__ import annotations

import functools
import itertools
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from pipeline.config import Params
from pipeline.ingest.core import REASONS, IngestResult, IngestSummary, Limits, check, ingest
from pipeline.ingest.fold import Fold
from pipeline.ingest.sources import SOURCES, SourceError, build_source, read_source
from pipeline.io import replace_dir, write_metrics
from pipeline.run_metrics import RunStats
from pipeline.verify.gold_check import gold_budget, ungradable_golds

__all__ = ["REASONS", "SOURCES", "IngestResult", "IngestSummary", "SourceError", "ingest", "limits_of", "run"]


def limits_of(params: Params) -> Limits:
    cfg = params.ingest
    answer = cfg.max_answer_chars if cfg.max_answer_chars is not None else params.verify.max_answer_chars
    return Limits(max_question_chars=cfg.max_question_chars, max_answer_chars=answer,
                  max_solution_chars=cfg.max_solution_chars, max_field_chars=cfg.max_field_chars,
                  max_metadata_chars=cfg.max_metadata_chars, max_line_bytes=cfg.max_line_bytes)


def run(params: Params, *, root: Path = Path("."), progress: bool = True) -> IngestSummary:
    """The shell: sources from params.yaml in, ``paths.problems`` / ``paths.rejects`` / metrics out."""
    cfg = params.ingest
    for src in cfg.sources:  # fail fast on a bad kind or knob before reading anything
        build_source(src)
    limits = limits_of(params)

    def records() -> Iterator:
        return itertools.chain.from_iterable(read_source(s, root=root, limits=limits) for s in cfg.sources)

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="passband-ingest-") as tmp, \
            Fold(Path(tmp), memory_limit_mb=cfg.memory_limit_mb,
                 grade_golds=functools.partial(ungradable_golds, config=params.verify)) as fold, \
            gold_budget(cfg.gold_budget_s):
        for rec in tqdm(records(), desc="ingest", unit=" rows", disable=not progress, mininterval=1.0):
            fold.add(rec.source, *check(rec, limits))
        summary = fold.finish()
        replace_dir(root / params.paths.problems, fold.problem_shards(cfg.shard_rows), name="problems")
        replace_dir(root / params.paths.rejects, fold.reject_shards(cfg.shard_rows), name="rejects")
    seconds = time.perf_counter() - t0
    write_metrics(root / params.paths.metrics / "ingest.json", RunStats.of(summary.metrics()).add_time("seconds", seconds),
                  root=root)
    return summary
