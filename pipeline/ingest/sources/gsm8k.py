"""The ``gsm8k`` source kind: gSM8K's JSON lines."""

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


@register("gsm8k")
def gsm8k(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    """GSM8K JSONL (``question``, ``answer`` with the gold after ``####``)."""

    def row(sid: str, obj: dict[str, Any]) -> RawRow:
        answer = obj.get("answer")
        return RawRow(cfg.name, sid, obj.get("question"), answer=answer, solution=answer, gold_from="gsm8k",
                      split=cfg.split, excerpt=excerpt(obj.get("question")))

    return mapped(cfg, iter_jsonl(resolve_path(cfg, root, file=True), source=cfg.name,
                                   max_line_bytes=limits.max_line_bytes), row)
