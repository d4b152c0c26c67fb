"""A published split's Parquet shards: written a row group at a time as its rows come, read back a column or a
batch at a time. Nothing here holds more than a row group of rows, so the folder's size never decides publish's
memory.

Shards are ``<split>-NNNNN.tmp`` while written and renamed ``<split>-NNNNN-of-MMMMM.parquet`` (🤗 datasets' names)
once the split is complete; row groups have a fixed size, so the files depend on the rows only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

BATCH_ROWS = 4096  # rows read back (or turned into Python objects) at a time
# rows per row group of a config: rows wait as Python objects until their group is written, in every config a row
# goes to (default and its band), so this bounds what publish holds of the rows it builds
ROW_GROUP = 1024


class SplitWriter:
    """Shards of one split: at most ``shard_rows`` rows (and ``shard_bytes`` of the sizes given to :meth:`add`) each,
    row groups of ``row_group`` rows."""

    def __init__(self, folder: Path, split: str, *, schema: pa.Schema, shard_rows: int, row_group: int,
                 shard_bytes: int | None = None):
        self.folder, self.split, self.schema = folder, split, schema
        self.shard_rows, self.row_group, self.shard_bytes = shard_rows, row_group, shard_bytes
        self.parts: list[Path] = []
        self.writer: pq.ParquetWriter | None = None
        self.rows = self.bytes = self.total = 0
        self.pending: list[dict] = []

    def add(self, row: dict, size: int = 0) -> None:
        full = self.shard_bytes is not None and self.bytes >= self.shard_bytes
        if self.writer is None or self.rows >= self.shard_rows or full:
            self._next()
        self.pending.append(row)
        self.rows += 1
        self.total += 1
        self.bytes += size
        if len(self.pending) >= self.row_group:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_pylist(self.pending, schema=self.schema))
            self.pending = []

    def _next(self) -> None:
        self._close_writer()
        path = self.folder / f"{self.split}-{len(self.parts):05d}.tmp"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.parts.append(path)
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd")
        self.rows = self.bytes = 0

    def _close_writer(self) -> None:
        if self.writer is not None:
            self._flush()
            self.writer.close()
            self.writer = None

    def close(self) -> list[Path]:
        """Finish the last shard and give every shard its final name; the shards, in order."""
        self._close_writer()
        final = []
        for i, p in enumerate(self.parts):
            target = p.with_name(f"{self.split}-{i:05d}-of-{len(self.parts):05d}.parquet")
            os.replace(p, target)
            final.append(target)
        return final


@dataclass
class Shards:
    """A written split: its shard files, in order, and its row count (from the writer: no file is opened for it)."""

    schema: pa.Schema
    files: list[Path] = field(default_factory=list)
    num_rows: int = 0

    def select(self, names: list[str]) -> pa.Table:
        """Only the columns ``names``, every row (read column by column: the others' pages are never read)."""
        if not self.files:
            return self.schema.empty_table().select(names)
        return pa.concat_tables(pq.read_table(f, columns=names) for f in self.files)

    def column(self, name: str) -> pa.ChunkedArray:
        return self.select([name]).column(name)

    def batches(self, names: list[str], rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The columns ``names``, at most ``rows`` rows at a time, in order."""
        for f in self.files:
            yield from pq.ParquetFile(f).iter_batches(batch_size=rows, columns=names)

    def pylist(self, names: list[str], rows: int = BATCH_ROWS) -> Iterator[dict]:
        """The rows as dicts of the columns ``names``, :data:`BATCH_ROWS` turned into Python objects at a time."""
        for batch in self.batches(names, rows):
            yield from batch.to_pylist()

    def moved(self, old: Path, new: Path) -> None:
        """The files now live under ``new`` instead of ``old`` (the staging folder swapped into place)."""
        self.files = [new / f.relative_to(old) for f in self.files]


class ConfigWriter:
    """Every config's splits under ``folder/<config>/``: rows added one at a time, in order, to a
    :class:`SplitWriter` per (config, split)."""

    def __init__(self, folder: Path, *, schema: pa.Schema, shard_rows: int, row_group: int = ROW_GROUP):
        self.folder, self.schema, self.shard_rows, self.row_group = folder, schema, shard_rows, row_group
        self.writers: dict[tuple[str, str], SplitWriter] = {}

    def add(self, config: str, split: str, row: dict) -> None:
        w = self.writers.get((config, split))
        if w is None:
            w = self.writers[(config, split)] = SplitWriter(self.folder / config, split, schema=self.schema,
                                                            shard_rows=self.shard_rows, row_group=self.row_group)
        w.add(row)

    def finish(self, configs: list[str]) -> dict[str, dict[str, Shards]]:
        """Close every shard; config -> split (train first, then by name) -> its shards. A config without rows has one
        empty ``train`` split and no file (🤗 datasets cannot load a config without rows: it is not declared)."""
        out: dict[str, dict[str, Shards]] = {}
        for config in configs:
            splits = sorted((s for c, s in self.writers if c == config), key=lambda s: (s != "train", s))
            out[config] = {s: Shards(self.schema, self.writers[(config, s)].close(), self.writers[(config, s)].total)
                           for s in splits} or {"train": Shards(self.schema)}
        return out

    def abort(self) -> None:
        """Close every open file, writing nothing more (the caller removes the folder): after a failed write, a full
        disk say, a flush or a footer would fail again and hide the first error."""
        for w in self.writers.values():
            w.pending = []
            if w.writer is not None:
                with contextlib.suppress(OSError, pa.ArrowException):
                    w.writer.close()
                w.writer = None
