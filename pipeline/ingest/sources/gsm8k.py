"""The ``gsm8k`` source kind: gSM8K's JSON lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.config import SourceConfig
from pipeline.ingest.readers import Record, excerpt, mapped_jsonl
from pipeline.ingest.records import Limits, RawRow
from pipeline.ingest.sources import Source, register


@register
class Gsm8k(Source):
    """GSM8K JSONL (``question``, ``answer`` with the gold after ``####``)."""

    name = "gsm8k"

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        def row(sid: str, obj: dict[str, Any]) -> RawRow:
            answer = obj.get("answer")
            return RawRow(cfg.name, sid, obj.get("question"), answer=answer, solution=answer, gold_from="gsm8k",
                          split=cfg.split, excerpt=excerpt(obj.get("question")))

        return mapped_jsonl(cfg, root, limits, row)
