"""Completions in a sorted order without their text in DuckDB's sort: the job's text far past its memory limit.

A stage that lists rollouts in an order of its own (publish's rollouts config, the report's item browser) sorts
their keys and short columns in DuckDB, and gathers the text with pyarrow:

1. :func:`sizes`: every rollout's completion size in bytes by (file index, row), one row group at a time;
2. :func:`register_keys`: a view of every rollout's keys and short columns with its ``size``, ``file`` and
   ``file_row``; the caller's SQL over it gives each wanted rollout its place ``pos`` (0, 1, ... in the caller's
   order) and a ``bucket``: consecutive places holding about the bytes of text :func:`register_keys` returns
   (:data:`BUCKET_SQL`);
3. :func:`scatter`: one pass over the shards, row group by row group (the completion column only), appends each
   wanted completion with its place to its bucket's file in a spill folder;
4. :func:`with_text`: the caller's rows, read in place order, each with its completion, read back one bucket at
   a time.

Memory holds one row group and one bucket of text, whatever the job's size. DuckDB sorting rows with their text
inside ran out of its memory at 48,000 rollouts (publish) and on 160 MB of shown text under a 64 MB limit (the
report): tests/test_publish_rollouts_streaming.py, tests/test_report_at_size.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import PassbandError
from pipeline.sqltext import sql_list

BUCKET_BYTES = 16 << 20  # completion text gathered per bucket: what rows are built from at a time
MAX_BUCKETS = 512  # bucket files open at once while gathering (a job past 8 GB of text gets bigger buckets)
BATCH = 4096  # rows fetched from DuckDB at a time
# the bucket of each place: the text before it, in buckets of $bucket bytes (``s``: pos and size)
BUCKET_SQL = ("(coalesce(sum(size) OVER (ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) "
              "// $bucket)::BIGINT AS bucket")
_TEXT = pa.schema([("pos", pa.int64()), ("completion", pa.string())])
SIZES_SCHEMA = pa.schema([("file_idx", pa.int32()), ("file_row", pa.int64()), ("size", pa.int64())])


def sizes(files: list[str]) -> pa.Table:
    """Every rollout's completion size in bytes, by (file index, row): read one row group's text at a time."""
    parts = []
    for i, file in enumerate(files):
        pf = pq.ParquetFile(file)
        start = 0
        for rg in range(pf.num_row_groups):
            size = pc.binary_length(pf.read_row_group(rg, columns=["completion"]).column(0)).cast(pa.int64())
            n = len(size)
            parts.append(pa.table({"file_idx": pa.array(np.full(n, i, dtype=np.int32)),
                                   "file_row": pa.array(np.arange(start, start + n, dtype=np.int64)), "size": size}))
            start += n
    return pa.concat_tables(parts).combine_chunks() if parts else SIZES_SCHEMA.empty_table()


def bucket_bytes(size_table: pa.Table, *, bucket: int = BUCKET_BYTES, max_buckets: int = MAX_BUCKETS) -> int:
    """The bytes of text a bucket gathers: ``bucket``, or more where the text would need over ``max_buckets``."""
    return max(bucket, -(-(pc.sum(size_table["size"]).as_py() or 0) // max_buckets))


def register_keys(con: duckdb.DuckDBPyConnection, files: list[str], *, name: str, bucket: int = BUCKET_BYTES) -> int:
    """Create the temp view ``name`` on ``con``: every rollout of the shards ``files`` as (problem_id, policy_id,
    sample_idx, finish_reason, n_tokens, size, file, file_row), no text; return the bytes of text a bucket gathers
    (:func:`bucket_bytes`). The view reads two Arrow tables registered on ``con`` as ``<name>_files`` and
    ``<name>_sizes``: keep them registered while it is read."""
    size_table = sizes(files)
    con.register(f"{name}_files", pa.table({"file_idx": pa.array(range(len(files)), pa.int32()), "file": files}))
    con.register(f"{name}_sizes", size_table)
    con.execute(f"""CREATE OR REPLACE TEMP VIEW {name} AS
        SELECT k.problem_id, k.policy_id, k.sample_idx, k.finish_reason, k.n_tokens, z.size, k.filename AS file,
               k.file_row_number AS file_row
        FROM read_parquet({sql_list(files)}, filename = true, file_row_number = true) k
        JOIN {name}_files p ON p.file = k.filename
        JOIN {name}_sizes z ON z.file_idx = p.file_idx AND z.file_row = k.file_row_number""")
    return bucket_bytes(size_table, bucket=bucket)


def scatter(con: duckdb.DuckDBPyConnection, places: str, spill: Path) -> None:
    """Read every completion ``places`` names once, shard by shard and row group by row group (the completion column
    only), and append it with its place to its bucket's file under ``spill``: memory holds one row group.

    ``places`` is a relation of DuckDB with columns ``file``, ``file_row``, ``pos`` and ``bucket``."""
    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}

    def gather(file: str, rows: np.ndarray, pos: np.ndarray, bucket: np.ndarray) -> None:
        pf = pq.ParquetFile(file)
        start = 0
        for rg in range(pf.num_row_groups):
            n = pf.metadata.row_group(rg).num_rows
            here = (rows >= start) & (rows < start + n)
            if here.any():
                text = pf.read_row_group(rg, columns=["completion"]).column(0).combine_chunks()
                taken = text.take(pa.array(rows[here] - start))
                for b in np.unique(bucket[here]):
                    sel = bucket[here] == b
                    if b not in writers:
                        writers[b] = pa.ipc.new_file(spill / f"bucket-{b:08d}.arrow", _TEXT)
                    writers[b].write_batch(pa.record_batch([pa.array(pos[here][sel]), taken.filter(pa.array(sel))],
                                                           schema=_TEXT))
            start += n

    try:
        reader = con.sql(f"SELECT file, file_row, pos, bucket FROM {places} ORDER BY file, file_row, pos"
                         ).to_arrow_reader(BATCH)
        pending: list[pa.RecordBatch] = []  # one file's requests (at most its rows, and their duplicates)

        def flush() -> None:
            t = pa.Table.from_batches(pending)
            gather(t["file"][0].as_py(), *(t[c].to_numpy() for c in ("file_row", "pos", "bucket")))
            pending.clear()

        for batch in reader:
            files = batch.column("file")
            for value in pc.unique(files).to_pylist():  # in order: the batch is sorted by file
                part = batch.filter(pc.equal(files, value))
                if pending and pending[0]["file"][0].as_py() != value:
                    flush()
                pending.append(part)
        if pending:
            flush()
    finally:
        for w in writers.values():
            w.close()


def with_text(rows: Iterable[dict], spill: Path, *, what: str) -> Iterator[tuple[dict, str]]:
    """Each of ``rows`` (dicts with ``pos`` and ``bucket``, in ``pos`` order) with its completion, from the bucket
    files :func:`scatter` wrote: one bucket's text in memory at a time, each file removed once read.
    ``what`` names the caller in the error a bucket that is not one run of places raises."""
    loaded, texts, first = None, [], 0
    for s in rows:
        if s["bucket"] != loaded:
            path = spill / f"bucket-{s['bucket']:08d}.arrow"
            with pa.memory_map(str(path)) as source:
                t = pa.ipc.open_file(source).read_all().sort_by("pos")
            texts, first, loaded = t["completion"].to_pylist(), t["pos"][0].as_py(), s["bucket"]
            if t["pos"][-1].as_py() - first + 1 != len(texts):  # every position once: a bucket is a run
                raise PassbandError(f"{what}: bucket {path.name} does not hold one run of positions")
            del t
            path.unlink()
        yield s, texts[s["pos"] - first]


def rows_in_order(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> Iterator[dict]:
    """The rows of ``sql`` as dicts, fetched :data:`BATCH` at a time."""
    for batch in con.sql(sql, params=params or {}).to_arrow_reader(BATCH):
        yield from batch.to_pylist()
