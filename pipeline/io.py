"""Atomic, schema-checked Parquet I/O.

A table lives in a directory of shards (``<dir>/*.parquet``). Writers always pass the
declared schema, write under a name that the readers' glob cannot match
(``.<name>.parquet.tmp``) and rename into place, so a reader never sees half a file and a
killed writer leaves at most one stray temp file, which the next write of that shard
replaces.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.schema import schema

SHARD_GLOB = "*.parquet"


def _atomic(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp)`` on a temp name in ``path``'s folder, fsync it, rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return _atomic(path, lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def write_json(path: str | Path, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_table(table: pa.Table, path: str | Path, *, name: str) -> Path:
    """Validate ``table`` against table ``name`` and write it atomically to ``path``."""
    table = schema(name).validate(table, where=str(path))
    return _atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def shard_paths(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(directory.glob(SHARD_GLOB))


def read_table(directory: str | Path, *, name: str, columns: list[str] | None = None) -> pa.Table:
    """Read every shard of table ``name`` under ``directory`` (an empty table when there are none)."""
    sch = schema(name)
    paths = shard_paths(directory)
    if not paths:
        table = sch.empty()
    else:
        parts = [sch.validate(pq.read_table(p), where=str(p)) for p in paths]
        table = pa.concat_tables(parts)
    return table.select(columns) if columns else table


def replace_dir(directory: str | Path, tables: Iterable[tuple[str, pa.Table]], *, name: str) -> list[Path]:
    """Make ``directory`` hold exactly the given shards (``(shard_name, table)`` pairs).

    New shards are written first; stale shards are removed afterwards, so a crash leaves a
    superset that the next run cleans up, never a gap.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = [write_table(t, directory / f"{shard}.parquet", name=name) for shard, t in tables]
    keep = set(written)
    for old in shard_paths(directory):
        if old not in keep:
            old.unlink()
    return written
