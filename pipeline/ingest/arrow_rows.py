"""Arrow record batches into rows in bounded memory: a value over its cap is rejected before Python sees it.

The parquet and hf sources read Arrow record batches. The memory goes when a batch becomes Python objects
(``to_pylist``). A dictionary-encoded column can store one 1.5 MB string once and point 1,024 row indexes at
it: the file is 800 bytes, and ``to_pylist`` makes 1,024 copies (1.5 GB). So each batch is measured on its
Arrow arrays first. Lengths come from ``utf8_length``/``binary_length`` on a dictionary's values, taken
through its indexes, and summed over list, map and struct children:

- a text column a field reads directly (``question``, ``solution``, ``id``...) over that field's cap makes
  the row a reject with the core's reason (``question_too_long``...);
- a row whose columns hold more than ``ingest.max_line_bytes`` bytes in all (the JSONL line cap) is a
  ``row_too_long`` reject.

Only the rows left are decoded, in slices of at most :data:`SLICE_BYTES`. A row that cannot be decoded
(invalid UTF-8 in a string column) is a ``not_utf8`` reject on its own, and the rest of its slice goes on.

    >>> import pyarrow as pa
    >>> big = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["x" * 50_000]))
    >>> batch = pa.record_batch({"question": big, "answer": pa.array(["1", "2"])})
    >>> [r.reason for r in rows([batch], source="s", sid=str, caps=[ValueCap("question", 20_000,
    ...     "question_too_long", "question", "max_question_chars")], max_row_bytes=1 << 20)]
    ['question_too_long', 'question_too_long']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.records import RawReject

SLICE_BYTES = 16 << 20  # rows decoded to Python at once hold at most this much (or one row)
EXCERPT_CHARS = 200
ID_BYTES = 200  # a longer id is named in a reject by its head and length


@dataclass(frozen=True)
class ValueCap:
    """A field read straight from a text column, and its cap: longer is a reject with ``reason``."""

    column: str
    max_chars: int
    reason: str
    what: str  # the field as the detail names it
    knob: str  # the ingest setting of the cap


def _flat(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _dictionary_wise(arr: pa.Array, fn: Callable[[pa.Array], np.ndarray]) -> np.ndarray:
    """``fn`` of each row: on a dictionary array, computed once per dictionary value and taken through the
    indexes (the dense column is never built); a null row is 0."""
    if pa.types.is_dictionary(arr.type):
        per_value = fn(arr.dictionary)
        idx = pc.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        out = per_value[idx] if len(per_value) else np.zeros(len(arr), np.int64)
        if arr.null_count:
            out = np.where(arr.is_null().to_numpy(zero_copy_only=False), 0, out)
        return out
    return fn(arr)


def row_bytes(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each row's size in bytes as Python would hold its text: string and binary lengths, summed over the
    children of lists, maps and structs (8 per fixed-width value)."""
    arr = _flat(arr)
    t = arr.type
    if pa.types.is_dictionary(t):
        return _dictionary_wise(arr, row_bytes)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_map(t):  # as a list of key/value structs (the list kernels do not take a map)
        entries = pa.struct([t.key_field, t.item_field])
        return row_bytes(arr.cast(pa.list_(pa.field("entries", entries, nullable=False))))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        child = row_bytes(pc.list_flatten(arr))
        return np.bincount(parents, weights=child + 8, minlength=len(arr)).astype(np.int64)
    if pa.types.is_struct(t):
        total = np.zeros(len(arr), np.int64)
        for field in arr.flatten():
            total += row_bytes(field)
        return total
    return np.full(len(arr), 8, np.int64)


def _chars(arr: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.utf8_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _is_text(t: pa.DataType) -> bool:
    value_type = t.value_type if pa.types.is_dictionary(t) else t
    return pa.types.is_string(value_type) or pa.types.is_large_string(value_type)


def text_chars(arr: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Each row's length in characters for a text column (dictionary-encoded or not); None for any other type."""
    arr = _flat(arr)
    if not _is_text(arr.type):
        return None
    return _dictionary_wise(arr, _chars)


def _head(arr: pa.Array | pa.ChunkedArray | None, i: int, n: int = EXCERPT_CHARS) -> str:
    """The first ``n`` characters of row ``i`` of a text column ("" for anything else); only that row is read, so a
    reject costs the same whatever the column holds."""
    if arr is None or not _is_text(arr.type):
        return ""
    arr = _flat(arr)
    try:
        if pa.types.is_dictionary(arr.type):
            index = arr.indices[i].as_py()
            if index is None:
                return ""
            value = pc.utf8_slice_codeunits(arr.dictionary.slice(index, 1), 0, n)[0].as_py()
        else:
            value = pc.utf8_slice_codeunits(arr.slice(i, 1), 0, n)[0].as_py()
    except (pa.ArrowException, UnicodeDecodeError):
        return ""
    return value or ""


def _id_of(arr: pa.Array | pa.ChunkedArray | None, i: int, sizes: np.ndarray | None) -> str | None:
    """Row ``i`` of an id column as a reject names it (None: no usable id). A long text id is its head and its
    length, as :func:`pipeline.ingest.core.reject_row` cuts one, without decoding the rest."""
    if arr is None or sizes is None:
        return None
    if sizes[i] > ID_BYTES:
        if not _is_text(arr.type):
            return None
        arr = _flat(arr)
        one = arr.dictionary.take([arr.indices[i].as_py()]) if pa.types.is_dictionary(arr.type) else arr.slice(i, 1)
        return f"{_head(arr, i, 160)}... ({_chars(one)[0]} characters)"
    try:
        value = _flat(arr)[i].as_py()
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    return None if value is None else str(value)


def rows(batches: Iterable[pa.RecordBatch], *, source: str, sid: Callable[[int], str], caps: list[ValueCap],
         max_row_bytes: int, question: str | None = None, id_column: str | None = None,
         others: ValueCap | None = None, mapped: frozenset[str] = frozenset(),
         ) -> Iterator[tuple[str, dict[str, Any]] | RawReject]:
    """``(source_id, row as a dict)`` per row of ``batches``, in order, or a :class:`RawReject` for a row over a
    cap in ``caps`` (checked in order; ``others`` is the cap of every text column not in ``mapped``: the extra
    columns kept in metadata), over ``max_row_bytes`` in all, or that cannot be decoded. ``sid(n)`` names the n-th
    row read; a reject is named by its ``id_column`` value when that is short (as a mapped row is)."""
    n = 0
    for batch in batches:
        extra = [ValueCap(c, others.max_chars, others.reason, others.what, others.knob)
                 for c in batch.schema.names if others is not None and c not in mapped]
        sizes = np.zeros(batch.num_rows, np.int64)
        for col in batch.columns:
            sizes += row_bytes(col)
        names = batch.schema.names
        qcol = batch.column(question) if question in names else None
        idcol = batch.column(id_column) if id_column in names else None
        id_sizes = row_bytes(idcol) if idcol is not None else None
        verdict: list[tuple[str, str] | None] = [None] * batch.num_rows
        for cap in [*caps, *extra]:
            if cap.column not in names:
                continue
            chars = text_chars(batch.column(cap.column))
            if chars is None:
                continue
            for i in np.flatnonzero(chars > cap.max_chars):
                if verdict[i] is None:
                    verdict[i] = (cap.reason, f"{cap.what} has {chars[i]:,} characters (limit ingest.{cap.knob} = "
                                              f"{cap.max_chars:,}); rejected before it was decoded")
        for i in np.flatnonzero(sizes > max_row_bytes):
            if verdict[i] is None:
                verdict[i] = ("row_too_long", f"the row's columns hold {sizes[i]:,} bytes (limit ingest.max_line_bytes"
                                              f" = {max_row_bytes:,}); rejected before it was decoded")
        start = 0
        while start < batch.num_rows:
            if verdict[start] is not None:
                reason, detail = verdict[start]
                rid = _id_of(idcol, start, id_sizes)
                yield RawReject(source, rid if rid is not None else sid(n + start), reason, detail,
                                _head(qcol, start))
                start += 1
                continue
            stop, held = start, 0
            while stop < batch.num_rows and verdict[stop] is None and (stop == start or held + sizes[stop] <= SLICE_BYTES):
                held += sizes[stop]
                stop += 1
            yield from _decoded(batch.slice(start, stop - start), source, lambda k, s=n + start: sid(s + k), qcol, start)
            start = stop
        n += batch.num_rows


def _decoded(part: pa.RecordBatch, source: str, sid: Callable[[int], str], qcol, offset: int,
             ) -> Iterator[tuple[str, dict[str, Any]] | RawReject]:
    """The rows of ``part`` as dicts; when the slice cannot be decoded, row by row, a ``not_utf8`` reject for each
    row that cannot."""
    try:
        objs = part.to_pylist()
    except (UnicodeDecodeError, pa.ArrowException):
        objs = None
    if objs is not None:
        for k, obj in enumerate(objs):
            yield sid(k), obj
        return
    for k in range(part.num_rows):
        try:
            obj = part.slice(k, 1).to_pylist()[0]
        except (UnicodeDecodeError, pa.ArrowException) as exc:
            yield RawReject(source, sid(k), "not_utf8", f"the row cannot be decoded: {str(exc)[:200]}",
                            _head(qcol, offset + k))
            continue
        yield sid(k), obj
