"""The ``synthetic`` source kind: seeded arithmetic of graded difficulty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import SourceConfig
from pipeline.ingest.readers import (
    Record,
)
from pipeline.ingest.records import Limits, RawRow
from pipeline.ingest.sources import Source, register
from pipeline.ingest.synthetic import SyntheticOptions, generate


@register
class Synthetic(Source):
    """Seeded arithmetic of graded difficulty (see :mod:`pipeline.ingest.synthetic`)."""

    name = "synthetic"
    Options = SyntheticOptions

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        for i, item in enumerate(generate(self.options)):
            yield RawRow(
                cfg.name, f"{item.level}:{i}", item.question, answer=item.answer, solution=item.solution,
                split=cfg.split, subject=item.skill, level=item.level, excerpt=item.question[:200],
            )
