"""The ``math`` source kind: mATH's JSON lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.config import SourceConfig
from pipeline.ingest.readers import (
    Record,
    excerpt,
    iter_jsonl,
    mapped,
    resolve_path,
)
from pipeline.ingest.records import Limits, RawRow
from pipeline.ingest.sources import register


@register("math")
def math(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    """MATH JSONL (``problem``, ``solution`` with the gold in the last ``\\boxed{}``, ``level``, ``type``)."""

    def row(sid: str, obj: dict[str, Any]) -> RawRow:
        return RawRow(cfg.name, sid, obj.get("problem"), solution=obj.get("solution"), gold_from="boxed",
                      split=cfg.split, subject=obj.get("type", obj.get("subject")), level=obj.get("level"),
                      excerpt=excerpt(obj.get("problem")))

    return mapped(cfg, iter_jsonl(resolve_path(cfg, root, file=True), source=cfg.name,
                                   max_line_bytes=limits.max_line_bytes), row)
