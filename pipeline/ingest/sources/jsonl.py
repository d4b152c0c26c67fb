"""The ``jsonl`` source kind: any JSON lines file with a field mapping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import SourceConfig
from pipeline.ingest.readers import MappedOptions, Record, field_mapping, mapped_jsonl, mapped_row
from pipeline.ingest.records import Limits
from pipeline.ingest.sources import Source, register


@register
class Jsonl(Source):
    """Any JSONL file; ``mapping`` names the columns (question, answer, solution, id, subject, level)."""

    name = "jsonl"
    Options = MappedOptions

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        m = field_mapping(cfg)
        return mapped_jsonl(cfg, root, limits, lambda sid, obj: mapped_row(cfg, sid, obj, m))
