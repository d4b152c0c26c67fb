"""The ``math`` source kind: mATH's JSON lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.config import SourceConfig
from pipeline.ingest.readers import Record, excerpt, mapped_jsonl
from pipeline.ingest.records import Limits, RawRow
from pipeline.ingest.sources import Source, register


@register
class Math(Source):
    """MATH JSONL (``problem``, ``solution`` with the gold in the last ``\\boxed{}``, ``level``, ``type``)."""

    name = "math"

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        def row(sid: str, obj: dict[str, Any]) -> RawRow:
            return RawRow(cfg.name, sid, obj.get("problem"), solution=obj.get("solution"), gold_from="boxed",
                          split=cfg.split, subject=obj.get("type", obj.get("subject")), level=obj.get("level"),
                          excerpt=excerpt(obj.get("problem")))

        return mapped_jsonl(cfg, root, limits, row)
