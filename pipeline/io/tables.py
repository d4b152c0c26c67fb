"""Tables as folders of schema-checked Parquet shards: written atomically, read with their declared schema, a
damaged or foreign shard named with how to recover, and a table's folder replaced whole or claimed as passband's.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.io.files import REPAIR_HINT, SHARD_GLOB, TEMP_GLOB, DamagedShardError, atomic_write, atomic_write_text
from pipeline.ownership import TABLE_MARKER, NotOwnedError
from pipeline.schema import SchemaError, schema


def write_table(table: pa.Table, path: str | Path, *, name: str) -> Path:
    """Validate ``table`` against table ``name`` and write it atomically to ``path``."""
    table = schema(name).validate(table, where=str(path))
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def swap_dirs(new: str | Path, target: str | Path) -> Path | None:
    """Put folder ``new`` at ``target`` in one step; the old ``target`` folder (now at ``new``'s path) or None.

    On Linux ``renameat2(RENAME_EXCHANGE)`` swaps the two atomically, so a reader of ``target``
    always finds a whole folder; elsewhere (or where the filesystem refuses) two renames leave a
    moment without one. The caller removes the old folder.
    """
    new, target = Path(new), Path(target)
    if not target.exists():
        os.replace(new, target)
        return None
    if _exchange(new, target):
        return new
    old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
    os.replace(target, old / target.name)
    os.replace(new, target)
    return old


def _exchange(a: Path, b: Path) -> bool:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def shard_paths(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(directory.glob(SHARD_GLOB))


def temp_paths(directory: str | Path) -> list[Path]:
    """Temp files of writes that never finished (killed, or the disk filled): invisible to readers."""
    directory = Path(directory)
    return sorted(directory.glob(TEMP_GLOB)) if directory.is_dir() else []


def damaged(path: str | Path, name: str, why) -> DamagedShardError:
    """The one-line error for a damaged shard: the file, the table, the first sentence of why, what to do."""
    why = " ".join(str(why).split()).replace(f"Could not open Parquet input source '{path}': ", "")
    why = why.split(". ")[0].rstrip(".")
    if len(why) > 120:
        why = why[:117] + "..."
    return DamagedShardError(f"{path}: damaged shard of table {name} ({why}); {REPAIR_HINT}")


def _foreign(path: Path, name: str, sch: pa.Schema) -> DamagedShardError | None:
    other = (sch.metadata or {}).get(b"passband.table", b"").decode()
    if other and other != name:
        return damaged(path, name, f"it holds table {other}, not {name}")
    return None


def check_shard(path: str | Path, *, name: str) -> None:
    """Check a shard's footer and columns (cheap: no data pages are read); raise :class:`DamagedShardError`."""
    path = Path(path)
    try:
        sch = pq.read_schema(path)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise damaged(path, name, exc) from None
    if err := _foreign(path, name, sch):
        raise err
    try:
        schema(name).validate(sch.empty_table(), where=str(path))
    except SchemaError as exc:
        raise damaged(path, name, str(exc).split(": ", 1)[-1]) from None


def check_shards(directory: str | Path, *, name: str) -> list[Path]:
    """:func:`check_shard` on every shard of ``directory`` (shards removed meanwhile are skipped); the shards."""
    paths = shard_paths(directory)
    for p in paths:
        try:
            check_shard(p, name=name)
        except FileNotFoundError:
            continue
    return paths


def read_shard(path: str | Path, *, name: str, columns: list[str] | None = None) -> pa.Table:
    """One shard, validated against table ``name``; damage of any kind is a :class:`DamagedShardError`.

    With ``columns`` only those columns' pages are read (the footer is still checked whole): the keys of a
    rollouts shard without its completion text, which is nearly all of its bytes."""
    path = Path(path)
    if columns:
        check_shard(path, name=name)
    try:
        raw = pq.read_table(path, columns=columns)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise damaged(path, name, exc) from None
    if err := _foreign(path, name, raw.schema):
        raise err
    try:
        if columns:
            return _validate_columns(raw, name, columns, where=str(path))
        return schema(name).validate(raw, where=str(path))
    except SchemaError as exc:
        raise damaged(path, name, str(exc).split(": ", 1)[-1]) from None


def _validate_columns(table: pa.Table, name: str, columns: list[str], *, where: str) -> pa.Table:
    """:meth:`Schema.validate` for a selection of the declared columns: no nulls where none are allowed, the declared types."""
    sch = schema(name)
    nullable = {c.name: c.nullable for c in sch.columns}
    if unknown := [c for c in columns if c not in nullable]:
        raise SchemaError(f"table {name} ({where}): no columns {unknown}")
    table = table.select(columns)
    for c in columns:
        if not nullable[c] and table.column(c).null_count:
            raise SchemaError(f"table {name} ({where}): column {c!r} has nulls")
    try:
        return table.cast(pa.schema([sch.arrow.field(c) for c in columns]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"table {name} ({where}): {exc}") from exc


def read_table(directory: str | Path, *, name: str, columns: list[str] | None = None) -> pa.Table:
    """Read every shard of table ``name`` under ``directory`` (an empty table when there are none).

    A shard replaced or removed by a concurrent writer between listing and reading is
    re-listed (a few times), so a reader sees either the old or the new set of shards.
    """
    sch = schema(name)
    for attempt in range(5):
        paths = shard_paths(directory)
        try:
            parts = [read_shard(p, name=name, columns=columns) for p in paths]
            break
        except FileNotFoundError:
            if attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
    if not parts:
        return sch.empty().select(columns) if columns else sch.empty()
    return pa.concat_tables(parts)


def is_table_shard(path: str | Path, *, name: str) -> bool:
    """Whether ``path`` is a shard passband wrote for table ``name``: its Parquet footer says ``passband.table: name``."""
    try:
        sch = pq.read_schema(path)
    except (pa.ArrowException, OSError):
        return False
    return (sch.metadata or {}).get(b"passband.table") == name.encode()


def _is_own_temp(path: Path) -> bool:
    return path.name.startswith(".") and path.name.endswith(".tmp") and path.is_file() and not path.is_symlink()


def claim_table_dir(directory: str | Path, *, name: str, subfolders: tuple[str, ...] = ()) -> Path:
    """Prove that ``directory`` is table ``name``'s folder, or make it one; raise :class:`NotOwnedError` otherwise.

    Owned: a folder that does not exist yet (created), an empty one, or one carrying the marker
    ``.passband-table`` that names this table. A folder written by an earlier version (no marker) is
    owned when everything in it is a shard of this table (its footer's ``passband.table`` is ``name``)
    or a temp file of passband's own, or one of the table's own ``subfolders`` (the rollouts folder holds
    the rollout stage's ``rejects/``): it then gets the marker. Anything else is refused, naming the
    files passband did not write, and nothing in the folder is touched (pipeline/ownership.py).
    """
    directory = Path(directory)
    fix = "point the table's path in params.yaml at a folder of its own (such as data/<table>), or move those files away"
    if directory.is_symlink():
        raise NotOwnedError(f"{directory}: the folder of table {name} is a symbolic link (to {os.readlink(directory)}); "
                            "passband removes stale shards only in a folder of its own, never through a link: "
                            "replace the link by a folder (what it points to is kept)")
    if directory.exists() and not directory.is_dir():
        raise NotOwnedError(f"{directory}: the folder of table {name} is a file; {fix}")
    marker = directory / TABLE_MARKER
    text = f"passband table {name}\n"
    if marker.is_file() and not marker.is_symlink():
        found = marker.read_text(errors="replace")
        if found == text:
            return directory
        other = found.removeprefix("passband table ").strip()[:60]
        raise NotOwnedError(f"{directory}: this folder holds table {other!r}, not {name}; {fix}")
    if directory.is_dir():
        strangers = [p.name for p in sorted(directory.iterdir())
                     if not (_is_own_temp(p) or (p.suffix == ".parquet" and p.is_file() and is_table_shard(p, name=name))
                             or (p.name in subfolders and p.is_dir() and not p.is_symlink()))]
        if strangers:
            shown = ", ".join(strangers[:3]) + (f" and {len(strangers) - 3} more" if len(strangers) > 3 else "")
            raise NotOwnedError(f"{directory}: holds files passband did not write as table {name} ({shown}); nothing "
                                f"was touched: {fix} (a damaged shard: `passband doctor --repair` moves it aside)")
    atomic_write_text(marker, text)
    return directory


def replace_dir(directory: str | Path, tables: Iterable[tuple[str, pa.Table]], *, name: str) -> list[Path]:
    """Make ``directory`` hold exactly the given shards (``(shard_name, table)`` pairs, a lazy iterable is fine).

    The folder must be table ``name``'s own (:func:`claim_table_dir`): passband refuses a folder
    holding files it did not write before it writes anything. New shards are written first; stale
    shards are removed afterwards, so a crash leaves a superset that the next run cleans up, never a
    gap. Only files proven to be shards of this table (their footer) are ever removed or replaced:
    a readable Parquet file of any other origin in the way of a new shard is refused.
    """
    directory = claim_table_dir(directory, name=name)
    written = []
    for shard, t in tables:
        path = directory / f"{shard}.parquet"
        if path.is_file() and not path.is_symlink() and not is_table_shard(path, name=name) and _readable_parquet(path):
            raise NotOwnedError(f"{path}: a Parquet file passband did not write as table {name} is in the way of "
                                f"shard {shard}; nothing was replaced: move it out of {directory}")
        written.append(write_table(t, path, name=name))
    keep = set(written)
    for old in shard_paths(directory):
        if old not in keep and is_table_shard(old, name=name):
            old.unlink()
    return written


def _readable_parquet(path: Path) -> bool:
    try:
        pq.read_schema(path)
    except (pa.ArrowException, OSError):
        return False
    return True
