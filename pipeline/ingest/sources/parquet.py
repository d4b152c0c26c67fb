"""The ``parquet`` source kind: a Parquet file or folder with a field mapping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from pipeline.config import SourceConfig
from pipeline.ingest.readers import (
    MappedOptions,
    Record,
    damaged,
    field_mapping,
    guarded,
    parquet_batches,
    record_rows,
    resolve_path,
)
from pipeline.ingest.records import Limits
from pipeline.ingest.sources import Source, register


@register
class Parquet(Source):
    """A Parquet file (or a directory of them) with a column ``mapping``, read in batches of 1,024 rows.

    Only the columns a row needs are read, text columns as dictionaries; a value over its cap is a reject
    before it is decoded (:mod:`pipeline.ingest.arrow_rows`). A file that cannot be read (truncated, not
    Parquet, a damaged page) is a :class:`SourceError` naming it, wherever the damage is: the stage writes
    nothing from a partly read source.
    """

    name = "parquet"
    Options = MappedOptions

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        m = field_mapping(cfg)
        path = resolve_path(cfg, root)
        try:
            batches = parquet_batches(cfg, path, m)
        except (pa.ArrowException, OSError) as exc:
            raise damaged(cfg, path, exc, 0) from None
        yield from record_rows(cfg, guarded(cfg, path, batches, [0]), m, limits, lambda n: f"{path.name}:{n}")
