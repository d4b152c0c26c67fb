"""The ``hf`` source kind: a Hub dataset, or local data laid out as one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config import ConfigError, SourceConfig
from pipeline.ingest.readers import (
    PARQUET_BATCH_ROWS,
    MappedOptions,
    Mapping,
    Record,
    SourceError,
    check_columns,
    damaged,
    field_mapping,
    guarded,
    iter_jsonl,
    mapped,
    mapped_row,
    parquet_batches,
    read_columns,
    record_rows,
)
from pipeline.ingest.records import Limits, RawReject
from pipeline.ingest.sources import Source, register


@register
class Hf(Source):
    """A Hub dataset (``path``, or the preset's dataset), or local data, under the same caps as the other kinds.

    Local data: a Parquet or JSONL file, or a folder holding ``<split>-*.parquet`` / ``<split>.parquet`` (or
    ``.jsonl``) files (the Hub's shard names; any depth), or for ``train`` a folder of such files without split
    names (as 🤗 datasets reads it), is read as the parquet and jsonl kinds read (bounded batches, the caps applied
    before decoding, the line cap), with no 🤗 datasets cache. Any other local folder (CSV, Arrow), or a Hub
    name, streams through ``load_dataset(name, options.config, split=options.hf_split, streaming=True)``
    as Arrow batches (no Arrow cache is built), measured the same way. Rows are named ``<split>:<n>``.
    """

    name = "hf"
    Options = MappedOptions

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
        m = field_mapping(cfg)
        path = cfg.path or (m.preset.hub if m.preset else None)
        if not path:
            raise ConfigError(f"source {cfg.name!r} (hf) needs a 'path': a Hub dataset name or a local folder")
        local = Path(path) if Path(path).is_absolute() else root / path
        files = _local_files(local, m.opts.hf_split) if local.exists() else None
        sid = lambda n: f"{m.opts.hf_split}:{n}"  # noqa: E731
        if files and files[0] == "json":
            return _hf_jsonl(cfg, files[1], m, limits)
        if files:
            try:
                batches = parquet_batches(cfg, files[1], m)
            except (pa.ArrowException, OSError) as exc:
                raise damaged(cfg, local, exc, 0) from None
            return record_rows(cfg, guarded(cfg, local, batches, [0]), m, limits, sid)
        name = str(local) if local.exists() else path
        data = _load(cfg, name, lambda datasets: datasets.load_dataset(name, m.opts.config, split=m.opts.hf_split,
                                                                       streaming=True))
        return _hf_stream(cfg, name, data, m, limits, sid)


def _local_files(local: Path, split: str) -> tuple[str, list[str]] | None:
    """``(builder, files)`` for a local Parquet/JSONL file or a folder of ``<split>`` shards; None otherwise.

    A folder whose files carry no split name (``data.jsonl``, ``part-0.parquet``) is, as 🤗 datasets reads it,
    all ``train``: its Parquet files, else its JSON lines files, go through the same bounded readers."""
    builders = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}
    if local.is_file():
        return (builders[local.suffix], [str(local)]) if local.suffix in builders else None
    for builder, suffixes in (("parquet", (".parquet",)), ("json", (".jsonl", ".json"))):
        found = sorted({p for sfx in suffixes for p in (*local.rglob(f"{split}-*{sfx}"), *local.rglob(f"{split}{sfx}"))})
        if found:
            return builder, [str(p) for p in found]
    if split == "train":
        for builder, suffixes in (("parquet", (".parquet",)), ("json", (".jsonl", ".json"))):
            found = sorted(p for sfx in suffixes for p in local.rglob(f"*{sfx}")
                           if not any(part.startswith((".", "_")) for part in p.relative_to(local).parts))
            if found:
                return builder, [str(p) for p in found]
    return None


def _load(cfg: SourceConfig, name: str, load: Callable) -> Any:
    import datasets

    try:
        return load(datasets)
    except Exception as exc:  # datasets raises many types; all mean "could not load"
        why = " ".join(str(exc).split())[:300]
        raise ConfigError(f"source {cfg.name!r}: load_dataset({name!r}) failed: {why}") from exc


def _hf_jsonl(cfg: SourceConfig, files: list[str], m: Mapping, limits: Limits) -> Iterator[Record]:
    """Local JSON lines files read as the jsonl kind reads them (the line cap, bounded reads), rows named
    ``<split>:<n>`` as a 🤗 dataset names them."""
    def items() -> Iterator:
        n = 0
        for f in files:
            for item in iter_jsonl(Path(f), source=cfg.name, max_line_bytes=limits.max_line_bytes):
                sid = f"{m.opts.hf_split}:{n}"
                n += 1
                if isinstance(item, RawReject):
                    item.source_id = sid
                    yield item
                else:
                    yield sid, item[1]
    return mapped(cfg, items(), lambda s, obj: mapped_row(cfg, s, obj, m))


def _hf_stream(cfg: SourceConfig, name: str, data: Any, m: Mapping, limits: Limits,
               sid: Callable[[int], str]) -> Iterator[Record]:
    """A streamed 🤗 dataset as Arrow batches of PARQUET_BATCH_ROWS rows, through the same caps."""
    import datasets

    columns_all = list(data.column_names or [])
    if columns_all:
        check_columns(cfg, columns_all, m)

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for table in data.with_format("arrow").iter(batch_size=PARQUET_BATCH_ROWS):
                if not columns_all:
                    check_columns(cfg, table.schema.names, m)
                table = table.select(read_columns(table.schema, m))
                yield from table.to_batches()
        except datasets.exceptions.DatasetsError as exc:  # pragma: no cover - a Hub or builder failure mid-stream
            why = " ".join(str(exc).split())[:300]
            raise SourceError(f"source {cfg.name!r}: reading {name!r} failed: {why}") from None

    return record_rows(cfg, batches(), m, limits, sid)
