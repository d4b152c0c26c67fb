"""Atomic, schema-checked Parquet I/O, with file modes that follow the umask and one-line errors.

A table lives in a directory of shards (``<dir>/*.parquet``). Writers always pass the
declared schema, write under a name that the readers' glob cannot match
(``.<name>.parquet.<pid>.<random>.tmp``) and rename into place, so a reader never sees half a file and a
killed writer leaves at most one stray temp file, which the next write of the same file removes
(``passband doctor`` reports and moves aside any other).

Every file written here gets the mode a plain ``open()`` would give it (``0666 & ~umask``):
``mkstemp`` alone makes owner-only files, which teammates on a shared filesystem cannot read.
A full disk is a :class:`DiskFullError` naming the file (the previous version stays in place);
a shard that cannot be read, or holds another table or the wrong columns, is a
:class:`DamagedShardError` naming the shard and saying how to recover.
"""

from __future__ import annotations

from pipeline.io.files import (
    REPAIR_HINT,
    SHARD_GLOB,
    SKIP_BYTES,
    TEMP_GLOB,
    TIMING_KEYS,
    TIMINGS,
    DamagedShardError,
    DiskFullError,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    bounded_lines,
    current_umask,
    disk_full,
    follow_umask,
    path_in,
    read_plain_file,
    remove_stale_temps,
    split_timings,
    temp_prefix,
    write_json,
    write_metrics,
)
from pipeline.io.tables import (
    check_shard,
    check_shards,
    claim_table_dir,
    damaged,
    is_table_shard,
    read_shard,
    read_table,
    replace_dir,
    shard_paths,
    swap_dirs,
    temp_paths,
    write_table,
)

__all__ = ["REPAIR_HINT", "SHARD_GLOB", "SKIP_BYTES", "TEMP_GLOB", "TIMINGS", "TIMING_KEYS", "DamagedShardError",
           "DiskFullError", "atomic_path", "atomic_write_bytes", "atomic_write_text", "bounded_lines", "check_shard",
           "check_shards", "claim_table_dir", "current_umask", "damaged", "disk_full", "follow_umask",
           "is_table_shard", "path_in", "read_plain_file", "read_shard", "read_table", "remove_stale_temps",
           "replace_dir", "shard_paths", "split_timings", "swap_dirs", "temp_paths", "temp_prefix", "write_json", "write_metrics",
           "write_table"]
