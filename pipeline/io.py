"""Atomic, schema-checked Parquet I/O, with file modes that follow the umask and one-line errors.

A table lives in a directory of shards (``<dir>/*.parquet``). Writers always pass the
declared schema, write under a name that the readers' glob cannot match
(``.<name>.parquet.<random>.tmp``) and rename into place, so a reader never sees half a file and a
killed writer leaves at most one stray temp file, which the next write of the same file removes
(``passband doctor`` reports and moves aside any other).

Every file written here gets the mode a plain ``open()`` would give it (``0666 & ~umask``):
``mkstemp`` alone makes owner-only files, which teammates on a shared filesystem cannot read.
A full disk is a :class:`DiskFullError` naming the file (the previous version stays in place);
a shard that cannot be read, or holds another table or the wrong columns, is a
:class:`DamagedShardError` naming the shard and saying how to recover.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import PassbandError
from pipeline.ownership import TABLE_MARKER, NotOwnedError
from pipeline.run_metrics import RunStats
from pipeline.schema import SchemaError, schema

SHARD_GLOB = "*.parquet"
TEMP_GLOB = ".*.tmp"
REPAIR_HINT = "run `passband doctor --repair` to move it aside, then `dvc repro` to regenerate its rows"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DiskFullError(PassbandError):
    """A write failed for lack of space; nothing partial is visible and the previous file is intact."""


class DamagedShardError(PassbandError):
    """A shard cannot be read as its table: truncated, empty, foreign or with the wrong columns."""


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` would, briefly, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def follow_umask(path: str | Path, *, directory: bool = False) -> None:
    """Give ``path`` the mode ``open()``/``mkdir()`` would have: 0666 (0777 for a folder) minus the umask."""
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def disk_full(exc: OSError, path: str | Path) -> DiskFullError:
    return DiskFullError(f"no space left on the device writing {path} ({os.strerror(exc.errno or errno.ENOSPC)}): "
                         "free some space and re-run; the previous version of the file, if any, is untouched")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[str]:
    """Yield a temp name beside ``path``; on a clean exit fsync it, give it the umask's mode and rename it to ``path``.

    On any error the temp file is removed and ``path`` is left as it was; a full disk becomes
    a :class:`DiskFullError` naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        follow_umask(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno in _NO_SPACE:
            raise disk_full(exc, path) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temps(path: str | Path) -> None:
    """Remove the temp files a killed write of ``path`` left beside it (each stage runs under its lock, so none is live)."""
    path = Path(path)
    for old in path.parent.glob(f".{glob.escape(path.name)}.*.tmp*"):
        old.unlink(missing_ok=True)


def _atomic(path: str | Path, write: Callable[[str], None]) -> Path:
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return _atomic(path, lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def write_json(path: str | Path, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def path_in(folder: str | Path, rel: str) -> Path:
    """``folder / rel``, where ``rel`` is a relative file path built from values (a policy name, a source, a
    config); each of its ``/``-separated parts must be a plain name (not empty, ``.`` or ``..``), so the path
    can never lead out of ``folder``, whatever a value holds. Else a one-line PassbandError."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise PassbandError(f"{rel!r} is not a plain relative file name (a name in it holds '/', '..' or is empty): "
                            f"passband writes only inside {folder}")
    return Path(folder).joinpath(*parts)


def read_plain_file(path: str | Path, *, max_bytes: int, what: str, fix: str) -> bytes:
    """The bytes of ``path``, a file passband copies out (a source's LICENSE into the published folder): it must
    be a regular file, not a symbolic link, with a single hard link, of at most ``max_bytes``. Else a one-line
    PassbandError naming it, what it is (``what``) and what to do (``fix``).

    Opened with ``O_NOFOLLOW`` and checked on the open descriptor, so a link swapped in after a check is never
    followed, and read no further than the cap, so a file growing meanwhile cannot blow it."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO never hangs the open
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PassbandError(f"{path} ({what}) is a symbolic link (to {os.readlink(path)}): passband copies only a "
                                f"regular file, never what a link points to; {fix}") from None
        raise PassbandError(f"{path} ({what}): cannot read it ({exc.strerror}); {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PassbandError(f"{path} ({what}) is not a regular file: passband copies only a regular file; {fix}")
        if st.st_nlink != 1:
            raise PassbandError(f"{path} ({what}) is a hard link ({st.st_nlink} names for one file): passband copies "
                                f"only a file with a single name; {fix}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise PassbandError(f"{path} ({what}) is over {max_bytes} bytes, too big to be what it should be; {fix}")
        return data
    finally:
        os.close(fd)


TIMINGS = Path("data/logs/timings")  # beside the engines' logs (data/logs/): no DVC output, ignored by git
TIMING_KEYS = frozenset({"seconds", "wall_s", "generate_s", "engine_startup_s", "startup_s", "tokens_per_s",
                         "rollouts_per_s"})


def split_timings(metrics: dict) -> tuple[dict, dict]:
    """``metrics`` split into (counts, timings): every key named in :data:`TIMING_KEYS`, at any depth, goes to the
    timings (under the same nesting); everything else stays. A dict left with no timing has no entry there."""
    counts, timings = {}, {}
    for key, value in metrics.items():
        if key in TIMING_KEYS:
            timings[key] = value
        elif isinstance(value, dict):
            counts[key], inner = split_timings(value)
            if inner:
                timings[key] = inner
        else:
            counts[key] = value
    return counts, timings


def write_metrics(path: str | Path, metrics: RunStats | dict, *, root: str | Path) -> Path:
    """A stage's metrics: the counts to ``path`` (a DVC metrics file, hashed into dvc.lock, so it must be the same
    run to run) and the timings to ``<root>/data/logs/timings/<path's name>``, which neither DVC nor git tracks.
    A :class:`~pipeline.run_metrics.RunStats` says which keys are timings (its timers and rates); a plain dict's are
    the keys named in :data:`TIMING_KEYS`. Returns ``path``."""
    if isinstance(metrics, RunStats):
        counts, timings = metrics.counts(), metrics.timings()
    else:
        counts, timings = split_timings(metrics)
    write_json(Path(root) / TIMINGS / Path(path).name, timings)
    return write_json(path, counts)


SKIP_BYTES = 1 << 20  # a line over the cap is skipped in reads of this size


def bounded_lines(fh, max_bytes: int) -> Iterator[tuple[bytes, int, bool]]:
    """``(line, size, too_long)`` per line of the binary file ``fh`` from where it stands, each read in bounded pieces:
    a line of more than ``max_bytes`` (its newline not counted) comes back as its first 200 bytes and its size, the
    rest skipped unkept. After each yield ``fh.tell()`` is the offset past that line (what a resumable reader keeps)."""
    while raw := fh.readline(max_bytes + 1):
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw, len(raw), False
            continue
        head, size = raw[:200], len(raw)
        while raw and not raw.endswith(b"\n"):
            raw = fh.readline(SKIP_BYTES)
            size += len(raw)
        yield head, size - raw.endswith(b"\n"), True


def write_table(table: pa.Table, path: str | Path, *, name: str) -> Path:
    """Validate ``table`` against table ``name`` and write it atomically to ``path``."""
    table = schema(name).validate(table, where=str(path))
    return _atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


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


__all__ = ["REPAIR_HINT", "SHARD_GLOB", "TEMP_GLOB", "DamagedShardError", "DiskFullError", "atomic_path",
           "atomic_write_bytes", "atomic_write_text", "bounded_lines", "check_shard", "check_shards", "claim_table_dir",
           "current_umask", "damaged", "disk_full", "follow_umask", "is_table_shard", "path_in", "read_plain_file",
           "read_shard", "read_table",
           "remove_stale_temps", "replace_dir", "shard_paths", "split_timings", "swap_dirs", "temp_paths", "write_json",
           "write_metrics", "write_table"]
