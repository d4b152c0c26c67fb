"""Reading a dump: its rows streamed with their byte offset and line (JSON lines in bounded pieces, Parquet in
batches), from where an earlier import stopped; and matching a record to one selected problem (:class:`Matcher`).
"""


from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import keys
from pipeline.errors import PassbandError
from pipeline.io import bounded_lines
from pipeline.rollout.layout import DumpRecord, LayoutError


class DumpError(PassbandError):
    """A dump that cannot be imported as declared (nothing of this import has been written when it is raised)."""


PARQUET_BATCH_BYTES = 16 << 20


def _jsonl_rows(path: Path, *, start: int, line: int, max_bytes: int) -> Iterator[tuple[int, int, Any]]:
    """``(offset after the row, line number, object | (reason, detail, excerpt))`` per non-blank line from byte
    ``start``; a line is read in bounded pieces (one over ``max_bytes`` is a reject, the rest skipped unkept)."""
    with path.open("rb") as fh:
        if start == 0:
            head = fh.read(4)
            if head.startswith(b"\x1f\x8b"):
                raise DumpError(f"{path} is gzip-compressed; decompress it first (gunzip)")
            if head.startswith(b"PAR1"):
                raise DumpError(f"{path} is a Parquet file; this layout reads JSON lines")
            fh.seek(3 if head.startswith(b"\xef\xbb\xbf") else 0)
        else:
            fh.seek(start)
        for raw, size, too_long in bounded_lines(fh, max_bytes):
            line += 1
            offset = fh.tell()
            if too_long:
                yield offset, line, ("line_too_long", f"the line has {size:,} bytes (dump.max_row_mb: "
                                                      f"{max_bytes >> 20} MB)", "")
                continue
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    yield offset, line, ("not_utf8", str(bad), raw[:200].decode("utf-8", "replace"))
                    continue
                yield offset, line, ("malformed_json", str(exc), raw[:200].decode("utf-8", "replace"))
                continue
            if not isinstance(obj, dict):
                yield offset, line, ("not_an_object", f"JSON {type(obj).__name__}, expected an object", "")
                continue
            yield offset, line, obj


def _parquet_rows(path: Path, *, start: int) -> Iterator[tuple[int, int, Any]]:
    """``(rows read after this one, row number, object)`` per row from row ``start``, in batches of about
    PARQUET_BATCH_BYTES decoded (from each row group's footer), never the whole file."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DumpError(f"{path}: not a readable Parquet file ({exc})") from None
    seen = 0
    for g in range(pf.metadata.num_row_groups):
        rg = pf.metadata.row_group(g)
        if seen + rg.num_rows <= start:
            seen += rg.num_rows
            continue
        per_row = max(1, rg.total_byte_size // max(1, rg.num_rows))
        batch = max(1, min(rg.num_rows, PARQUET_BATCH_BYTES // per_row))
        for b in pf.iter_batches(batch_size=batch, row_groups=[g]):
            for obj in b.to_pylist():
                seen += 1
                if seen > start:
                    yield seen, seen, obj


def dump_rows(path: Path, fmt: str, *, start: int = 0, line: int = 0, max_bytes: int = 64 << 20):
    if fmt == "parquet":
        return _parquet_rows(path, start=start)
    return _jsonl_rows(path, start=start, line=line, max_bytes=max_bytes)


class Matcher:
    """A record's problem among the selected ones (``dump.match``): its problem_id, or why none."""

    def __init__(self, problems: pa.Table, how: str) -> None:
        self.how = how
        ids = problems.column("problem_id").to_pylist()
        self.ids = set(ids)
        self.by_source: dict[str, str | None] = {}
        if how == "source_id":
            for pid, sid in zip(ids, problems.column("source_id").to_pylist(), strict=True):
                self.by_source[sid] = None if sid in self.by_source else pid  # None: two problems share it

    def __call__(self, rec: DumpRecord) -> str:
        value = rec.match_value(self.how)
        if value is None:
            raise LayoutError("missing_field", f"the row gives no {self.how} to match on (dump.match: {self.how})")
        if self.how == "question":
            pid = keys.problem_id(value)
        elif self.how == "problem_id":
            pid = value
        else:
            if value in self.by_source and self.by_source[value] is None:
                raise LayoutError("ambiguous", f"source_id {value!r} names two selected problems; match on question")
            pid = self.by_source.get(value, "")
        if pid not in self.ids:
            raise LayoutError("no_match", f"no selected problem (ingested, in rollout.sources) has this {self.how}")
        return pid
