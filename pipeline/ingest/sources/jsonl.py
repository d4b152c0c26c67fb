"""The ``jsonl`` source kind: any JSON lines file with a field mapping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import SourceConfig
from pipeline.ingest.readers import (
    Record,
    field_mapping,
    iter_jsonl,
    mapped,
    mapped_row,
    resolve_path,
)
from pipeline.ingest.records import Limits
from pipeline.ingest.sources import register


@register("jsonl")
def jsonl(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    """Any JSONL file; ``mapping`` names the columns (question, answer, solution, id, subject, level)."""
    m = field_mapping(cfg)
    items = iter_jsonl(resolve_path(cfg, root, file=True), source=cfg.name, max_line_bytes=limits.max_line_bytes)
    return mapped(cfg, items, lambda sid, obj: mapped_row(cfg, sid, obj, m))
