"""The ``synthetic`` source kind: seeded arithmetic of graded difficulty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import SourceConfig, parse_options
from pipeline.ingest.readers import (
    Record,
)
from pipeline.ingest.records import Limits, RawRow
from pipeline.ingest.sources import register
from pipeline.ingest.synthetic import SyntheticOptions, generate


@register("synthetic")
def synthetic(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    """Seeded arithmetic of graded difficulty (see :mod:`pipeline.ingest.synthetic`)."""
    opts = parse_options(SyntheticOptions, cfg.options, where=f"source {cfg.name!r} options")
    for i, item in enumerate(generate(opts)):
        yield RawRow(
            cfg.name, f"{item.level}:{i}", item.question, answer=item.answer, solution=item.solution,
            split=cfg.split, subject=item.skill, level=item.level, excerpt=item.question[:200],
        )
