"""Read-only SQL over the catalog's views, bounded: one read-only statement on a locked-down connection, under a
wall-clock limit, DuckDB's memory limit, a private capped spill folder and a cap on the result's size.
"""


from __future__ import annotations

import contextlib
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.catalog.views import CatalogError, allowed_directories, check_tables, create_views
from pipeline.config import Params

# what `passband sql` runs: DuckDB's parser says SELECT for SELECT, WITH, FROM-first, VALUES, DESCRIBE, SHOW, SUMMARIZE
READ_ONLY = (duckdb.StatementType.SELECT,)


READ_ONLY_WORDS = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW or SUMMARIZE"


@dataclass(frozen=True)
class Limits:
    """Bounds of one query: wall-clock seconds, DuckDB's memory and spill (MiB), rows fetched (None: every row), and
    the result's size (MiB of Arrow data, None: unbounded). With ``memory_mb`` set, the process's data segment is
    also capped while the query runs (:func:`_data_limit`): DuckDB builds a chunk's values (2,048 rows) outside its
    own memory limit, which alone let 51 rows of 50 MB reach 2.3 GB."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    spill_mb: int = 4096
    max_rows: int | None = None
    max_result_mb: int | None = None


# what `passband sql` gives a query unless told otherwise (its --help shows them)
SQL_LIMITS = Limits(timeout_s=30.0, memory_mb=1024, spill_mb=4096, max_result_mb=256)


RESULT_BATCH_ROWS = 8192
_SLACK_MB = 128  # the data limit over DuckDB's memory limit and the result's budget: buffers DuckDB does not count


def connect(params: Params, *, root: Path = Path("."), limits: Limits = Limits(),
            spill_dir: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with every view, locked down for SQL from users.

    Extension autoload and autoinstall off; external access off except the table folders and the published
    dataset (:func:`allowed_directories`, so ``read_text('/etc/hostname')`` and ``COPY ... TO '/tmp/x'`` are refused);
    then ``lock_configuration``, so no statement can turn any of it back on. No database file is opened:
    the views are built here, over the shards as they are now. :func:`query` also refuses any statement
    but one read-only query, since DuckDB lets a COPY write into an allowed folder.

    DuckDB admits its spill folder to every query (by default ``.tmp/`` in the working folder): ``spill_dir``
    must be a private folder of the caller's (:func:`session` makes one); without it nothing spills.
    ``limits``: DuckDB's memory limit and the spill's size cap.
    """
    root = Path(root).resolve()
    config = {"autoload_known_extensions": False, "autoinstall_known_extensions": False,
              "temp_directory": spill_dir or ""}
    if spill_dir:
        config["max_temp_directory_size"] = f"{limits.spill_mb}MiB"
    if limits.memory_mb is not None:
        config["memory_limit"] = f"{limits.memory_mb}MiB"
    con = duckdb.connect(":memory:", config=config)
    try:
        # DuckDB takes allowed_directories only on a started database, and only while external access is on
        con.execute("SET allowed_directories = ?", [allowed_directories(params, root=root)])
        if "," not in str(root):  # a query's relative paths: from the project folder (the setting is a comma list)
            con.execute("SET file_search_path = ?", [str(root)])
        con.execute("SET enable_external_access = false")
        create_views(con, params, root=root, absolute=True)
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


@contextlib.contextmanager
def session(params: Params, *, root: Path = Path("."), limits: Limits = Limits()) -> Iterator[duckdb.DuckDBPyConnection]:
    """:func:`connect` with a spill folder of its own: ``mkdtemp`` (0700, a fresh name, so no other user can
    have planted anything in it or read what spills), removed with everything in it when the block ends."""
    spill = tempfile.mkdtemp(prefix="passband-sql-")
    try:
        con = connect(params, root=root, limits=limits, spill_dir=spill)
        try:
            yield con
        finally:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _detached(exc: BaseException) -> BaseException:
    """``exc`` without its tracebacks (and its chained exceptions'): their frames hold the query's open result,
    and DuckDB refuses to close a connection while one is alive."""
    seen, stack = set(), [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = None
        stack += [e.__cause__, e.__context__]
    return exc


def _stop(con: duckdb.DuckDBPyConnection, done: threading.Event) -> None:
    """Interrupt until the query has stopped: an interrupt that lands before it starts executing is lost."""
    while not done.is_set():
        con.interrupt()
        done.wait(0.05)


def _bounded(con: duckdb.DuckDBPyConnection, fetch, *, timeout_s: float | None):
    """``fetch()`` in a helper thread, the caller waiting: at the deadline or at Ctrl-C the query is interrupted
    (DuckDB looks at signals only between calls: a ^C during a long query waited for its end). The caller waits
    on an Event, not ``Thread.join``: a ^C inside Python 3.11's ``join`` marks a running thread as finished."""
    out: list = []
    done = threading.Event()

    def work() -> None:
        try:
            out.append((True, fetch()))
        except BaseException as exc:  # handed to the caller's thread
            out.append((False, _detached(exc)))
        finally:
            done.set()

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    threading.Thread(target=work, name="passband-sql", daemon=True).start()
    try:
        while not done.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                _stop(con, done)
                out.clear()
                raise CatalogError(f"SQL error: the query ran past its time limit of {timeout_s:g} s and was stopped; "
                                   "narrow it (WHERE, LIMIT) or give it more time (--timeout)")
            done.wait(0.1 if left is None else min(0.1, left))
    except KeyboardInterrupt:
        _stop(con, done)
        out.clear()
        raise CatalogError("interrupted (Ctrl-C): the query was stopped") from None
    ok, value = out.pop()
    if not ok:
        raise value
    return value


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(statement: duckdb.Statement) -> str:
    """The statement's type as DuckDB's parser names it (INSTALL and LOAD are both its LOAD)."""
    return "INSTALL/LOAD" if statement.type == duckdb.StatementType.LOAD else statement.type.name


def read_only_statement(sql: str) -> duckdb.Statement:
    """The one read-only statement of ``sql``, as DuckDB's own parser reads it; else a one-line CatalogError.

    More than one statement, or one of another type (COPY, ATTACH, INSTALL/LOAD, PRAGMA, SET, CREATE,
    INSERT/UPDATE/DELETE, EXPORT, CALL, ...), is refused before any connection is opened."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
    if not statements:
        raise CatalogError("SQL error: no statement given; pass one query, e.g. \"SELECT * FROM difficulty LIMIT 5\"")
    if len(statements) > 1:
        kinds = ", ".join(_kind(s) for s in statements)
        raise CatalogError(f"passband sql runs exactly one statement, got {len(statements)} ({kinds}): "
                           "run one read-only query at a time")
    st = statements[0]
    if st.type not in READ_ONLY:
        hint = (" (to save a result, use --output FILE with --format csv, json or parquet)"
                if st.type in (duckdb.StatementType.COPY, duckdb.StatementType.EXPORT) else "")
        raise CatalogError(f"passband sql only reads the tables: {_kind(st)} statement refused "
                           f"({_one_line(st.query)!r}); use {READ_ONLY_WORDS}{hint}")
    return st


def _collect(rel: duckdb.DuckDBPyRelation, limits: Limits) -> pa.Table:
    """The relation's rows as Arrow, streamed; past ``limits.max_result_mb`` the query stops with one line."""
    budget = None if limits.max_result_mb is None else limits.max_result_mb << 20
    batches, size = [], 0
    # 8,192 rows a batch: 1,024 cost about 75 MB more (each batch its own allocations) at a 256 MB result, and the
    # budget is looked at after each batch; a batch of wide rows is bounded by DuckDB's memory limit, not by this
    reader = rel.to_arrow_reader(RESULT_BATCH_ROWS)
    for batch in reader:
        size += batch.nbytes
        if budget is not None and size > budget:
            raise CatalogError(f"SQL error: the result is over its size limit of {limits.max_result_mb} MiB and was "
                               "stopped; narrow it (WHERE, LIMIT, fewer or shorter columns) or raise --max-result-mb")
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def _vm_data_bytes() -> int | None:
    """This process's data segment now (``VmData``: what RLIMIT_DATA counts), or None where /proc has no such line."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextlib.contextmanager
def _data_limit(limits: Limits) -> Iterator[None]:
    """While the query runs, cap the process's data segment (RLIMIT_DATA) at what it holds now plus DuckDB's memory
    limit, the result's budget and some slack; DuckDB then fails the allocation ("Out of Memory") instead of growing
    past its limit. Nothing is capped without a memory limit, or where the platform has no RLIMIT_DATA."""
    now = _vm_data_bytes()
    if limits.memory_mb is None or now is None or not hasattr(resource, "RLIMIT_DATA"):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = now + ((limits.memory_mb + (limits.max_result_mb or 0) + _SLACK_MB) << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def query(params: Params, sql: str, *, root: Path = Path("."), attempts: int = 5, limits: Limits = Limits()):
    """Run one read-only query ``sql`` over the catalog (:func:`session`) and return a polars DataFrame;
    any other statement, and every DuckDB error, becomes one line (a CatalogError). ``limits``: its time,
    memory and spill bounds, and at most how many rows to fetch (the rest are never computed if the plan
    allows: DuckDB pushes the LIMIT down).

    A file error is retried a few times with fresh views (a writer may have replaced or removed
    a shard between DuckDB's listing and its read); if it persists, the shards are checked so a
    damaged one is named with what to do, rather than reported as DuckDB's error.
    """
    statement = read_only_statement(sql)
    for attempt in range(attempts):
        try:
            # views are bound when the session opens: a shard's footer is read now
            with session(params, root=root, limits=limits) as con, _data_limit(limits):
                def fetch(con=con):
                    rel = con.sql(statement.query)
                    return _collect(rel if limits.max_rows is None else rel.limit(limits.max_rows), limits)
                return pl.from_arrow(_bounded(con, fetch, timeout_s=limits.timeout_s), rechunk=False)
        except (duckdb.OutOfMemoryException, MemoryError) as exc:
            memory = "DuckDB's default" if limits.memory_mb is None else f"{limits.memory_mb} MiB"
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}; the query needs more than its memory limit "
                               f"({memory}) and spill ({limits.spill_mb} MiB): narrow it, or raise --memory-mb") from None
        except (duckdb.IOException, duckdb.InvalidInputException, OSError) as exc:
            if "Out of Memory" in str(exc):  # DuckDB's, raised through pyarrow's stream reader as an OSError
                raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}; the query needs more memory than its "
                                   "limit (--memory-mb): narrow it") from None
            if not isinstance(exc, duckdb.Error):
                raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
            if attempt + 1 < attempts:
                time.sleep(0.05 * (attempt + 1))
                continue
            check_tables(params, root=root)
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
        except duckdb.PermissionException as exc:
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}; passband sql reads only the table folders "
                               "and the published dataset (query the views: problems, difficulty, ...)") from None
        except duckdb.Error as exc:
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")  # the last attempt returns or raises
