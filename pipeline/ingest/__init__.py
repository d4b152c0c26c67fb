"""Ingest stage: read every configured source, validate, key, de-duplicate, write problems + rejects."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from pipeline.config import Params
from pipeline.ingest.core import REASONS, IngestResult, Limits, ingest
from pipeline.ingest.sources import SOURCES, read_source
from pipeline.io import replace_dir, write_json

__all__ = ["REASONS", "SOURCES", "IngestResult", "ingest", "run"]


def run(params: Params, *, root: Path = Path("."), progress: bool = True) -> IngestResult:
    """The shell: sources from params.yaml in, ``paths.problems`` / ``paths.rejects`` / metrics out."""
    cfg = params.ingest
    for src in cfg.sources:  # fail fast on a bad kind before reading anything
        from pipeline.ingest.sources import get_source

        get_source(src.kind)

    def records() -> Iterator:
        return itertools.chain.from_iterable(read_source(s, root=root) for s in cfg.sources)

    t0 = time.perf_counter()
    limits = Limits(cfg.max_question_chars, cfg.max_answer_chars, cfg.max_solution_chars)
    stream = tqdm(records(), desc="ingest", unit=" rows", disable=not progress, mininterval=1.0)
    result = ingest(stream, limits=limits)
    seconds = time.perf_counter() - t0
    replace_dir(root / params.paths.problems, [("part-0", result.problems)], name="problems")
    replace_dir(root / params.paths.rejects, [("ingest", result.rejects)], name="rejects")
    write_json(root / params.paths.metrics / "ingest.json", {**result.metrics(), "seconds": round(seconds, 3)})
    return result
