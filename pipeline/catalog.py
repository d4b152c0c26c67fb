"""The DuckDB catalog: views over the Parquet tables, and read-only SQL over them.

Views use paths relative to the repository root, so ``data/passband.duckdb`` keeps working
when the repository is moved or cloned (open it from the root: ``duckdb data/passband.duckdb``).
``passband sql`` builds the same views in memory, with absolute paths, so it always sees the current
shards, on a locked-down connection (:func:`connect`): one read-only statement, file access only to the
table folders and the published dataset, no extensions loaded or installed, configuration locked.
A user's query (:class:`Limits`) runs in a helper thread under a wall-clock limit (``interrupt()`` at
the deadline, or at Ctrl-C: DuckDB does not look at signals while it computes), DuckDB's memory limit,
and a private spill folder (``mkdtemp``, 0700, removed afterwards; DuckDB lets queries read its spill
folder, so it must be one nobody else can plant a link in) capped in size; the table view fetches only
the rows it shows. Extra views live as ``pipeline/views/<name>.sql`` files (one SELECT each) and are created
after the tables, in name order. ``flag_kinds`` (flag, kind, description, measured precision, recall) comes from the flag
detector registry, so views and queries select e.g. the shortcut flags without naming them;
``bands`` (band, band_order, colour, hard) comes from pipeline/bands.py, so views order and
group bands without naming them. Paths enter SQL only bound (``SET ... = ?``) or through
:func:`pipeline.sqltext.sql_literal` (a view's text cannot hold a parameter).
"""

from __future__ import annotations

import contextlib
import os
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

from pipeline.annotate.detectors import flag_kinds_sql
from pipeline.bands import sql_values
from pipeline.config import Params
from pipeline.errors import PassbandError
from pipeline.io import SHARD_GLOB, check_shards, follow_umask, remove_stale_temps, shard_paths
from pipeline.ownership import check_file_target
from pipeline.schema import TABLES, schema
from pipeline.sqltext import VIEWS_DIR, sql_list, sql_literal
from pipeline.tablesets import SET_TABLES, SETS, features_dir, table_set

# what `passband sql` runs: DuckDB's parser says SELECT for SELECT, WITH, FROM-first, VALUES, DESCRIBE, SHOW, SUMMARIZE
READ_ONLY = (duckdb.StatementType.SELECT,)
READ_ONLY_WORDS = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW or SUMMARIZE"


class CatalogError(PassbandError):
    pass


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
_SLACK_MB = 128  # the data limit over DuckDB's memory limit and the result's budget: buffers DuckDB does not count


def table_dirs(params: Params) -> dict[str, list[str]]:
    """Every directory whose shards make up each table: one per table set (see tablesets)."""
    sets = [table_set(params, s) for s in SETS]
    dirs = {t: [getattr(ts, t) for ts in sets] for t in TABLES if t in SET_TABLES}
    dirs["features"] = [features_dir(params)]  # the probe's table (pipeline/probe): main set only
    dirs["rejects"] += [ts.rollout_rejects for ts in sets]  # problems a policy's engine could not take
    dirs["upstream"] = [ts.upstream for ts in sets]  # imported dumps' own verdicts
    return dirs


def rollout_files(params: Params, *, root: Path) -> list[str]:
    """Every set's rollouts shards (the files the ``rollouts`` view reads), absolute."""
    return [str(p) for d in table_dirs(params)["rollouts"] for p in shard_paths(Path(root).resolve() / d)]


def _abs_dir(root: Path, d: str) -> str:
    return os.path.normpath(root / d)


def _table_sql(name: str, dirs: list[str], root: Path, *, absolute: bool = False) -> str:
    """The table's view: its shards' columns, from every set's folder that has shards (else typed and empty)."""
    base = [_abs_dir(root, d) if absolute else d for d in dirs if shard_paths(root / d)]
    if not base:
        return schema(name).empty_select()
    cols = ", ".join(schema(name).names)
    distinct = "DISTINCT " if name == "policies" else ""  # every set records the same policy
    globs = [f"{b}/{SHARD_GLOB}" for b in base]
    return f"SELECT {distinct}{cols} FROM read_parquet({sql_list(globs)})"


def extra_views() -> list[tuple[str, str]]:
    return [(f.stem, f.read_text()) for f in sorted(VIEWS_DIR.glob("*.sql"))]


def create_views(con: duckdb.DuckDBPyConnection, params: Params, *, root: Path, absolute: bool = False) -> None:
    """Every table's view, ``flag_kinds``, ``bands`` and the ``pipeline/views`` views; ``absolute``: shard paths
    absolute (an in-memory connection) rather than relative to ``root`` (the catalog file)."""
    for name, dirs in table_dirs(params).items():
        try:  # binding the view reads every shard's footer
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {_table_sql(name, dirs, root, absolute=absolute)}")
        except duckdb.Error:
            for d in dirs:  # a damaged shard: its one-line DamagedShardError, not DuckDB's message
                check_shards(root / d, name=name)
            raise

    con.execute(f"CREATE OR REPLACE VIEW flag_kinds AS {flag_kinds_sql()}")
    con.execute(f"CREATE OR REPLACE VIEW bands AS {sql_values()}")
    for name, sql in extra_views():
        try:
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        except duckdb.Error as exc:
            raise CatalogError(f"view {name} (pipeline/views/{name}.sql): {exc}") from exc
def open_views(params: Params, *, root: Path, temp_dir: Path, memory_limit_mb: int) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the catalog's views over every set's tables (absolute paths), its memory capped at
    ``memory_limit_mb`` and spilling to ``temp_dir`` past it: for stages that join the tables, not for users."""
    con = duckdb.connect(":memory:", config={"memory_limit": f"{memory_limit_mb}MB", "temp_directory": str(temp_dir)})
    try:
        create_views(con, params, root=Path(root).resolve(), absolute=True)
    except BaseException:
        con.close()
        raise
    return con




def allowed_directories(params: Params, *, root: Path) -> list[str]:
    """The only folders a :func:`connect` connection may read: passband's Parquet, i.e. every table's folder and
    the published dataset (``paths.published``), with a trailing slash (``data/problems/`` does not admit
    ``data/problems_old``). Not params.yaml, the models, the logs, nor anything else.

    Each folder twice: absolute, and as params.yaml gives it. A relative path in a query is read from the
    project folder (``file_search_path``), but DuckDB checks it as written, against the working folder; run
    from the project folder (the usual case) the two forms are the same folders."""
    dirs = [d for ds in table_dirs(params).values() for d in ds] + [params.paths.published]
    absolute = {_abs_dir(root, d).rstrip("/") + "/" for d in dirs}
    relative = {os.path.normpath(d) + "/" for d in dirs if not os.path.isabs(d)}
    return sorted(absolute | relative)


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


# The comment on every view passband writes into the catalog file: with "views only", its proof of ownership.
VIEW_COMMENT = "passband catalog view (rebuilt by passband catalog; the data is in the Parquet tables)"


def _catalog_objects(path: Path) -> list[tuple[str, str, str | None]] | None:
    """(kind, name, comment) of everything a user can create in the DuckDB file ``path``; None if it is none."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():  # open for writing in another process: it cannot be read, so not proved
            raise CatalogError(f"{path} (paths.catalog) is open for writing in another process, so passband cannot "
                               "check it is its own catalog: close that session (or open it read-only), then re-run"
                               ) from None
        return None
    except duckdb.Error:
        return None
    try:
        here = "database_name = current_database()"
        return con.execute(
            f"SELECT 'view', view_name, comment FROM duckdb_views() WHERE NOT internal AND {here} "
            f"UNION ALL SELECT 'table', table_name, NULL FROM duckdb_tables() WHERE {here} "
            f"UNION ALL SELECT 'schema', schema_name, NULL FROM duckdb_schemas() WHERE NOT internal AND {here} "
            f"UNION ALL SELECT 'sequence', sequence_name, NULL FROM duckdb_sequences() WHERE {here} "
            f"UNION ALL SELECT 'macro', function_name, NULL FROM duckdb_functions() WHERE NOT internal AND {here} "
            f"UNION ALL SELECT 'type', type_name, NULL FROM duckdb_types() WHERE NOT internal AND {here}"
        ).fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()


def catalog_names(params: Params) -> set[str]:
    """The names of every view :func:`create_views` makes."""
    return {*table_dirs(params), "flag_kinds", "bands", *(name for name, _ in extra_views())}


def catalog_proof(path: Path) -> bool:
    """``path`` is a catalog passband wrote: a DuckDB database holding views and nothing else, each with
    :data:`VIEW_COMMENT`, passband's marker. Names prove nothing: a user's file of views named ``difficulty`` and
    ``flags`` (as :func:`catalog_names`) is theirs, as is any file with a table, a macro or a view of their own."""
    objects = _catalog_objects(path)
    if not objects or any(kind != "view" for kind, _, _ in objects):
        return False
    return all(comment == VIEW_COMMENT for _, _, comment in objects)


def build_catalog(params: Params, *, root: Path = Path(".")) -> Path:
    """Write ``paths.catalog`` atomically: a temp database renamed into place, over an existing file only when
    it is passband's own catalog (:func:`catalog_proof`): a user's DuckDB file there is refused, left as it is."""
    root = Path(root).resolve()
    if "," in str(root):  # DuckDB's file_search_path is a comma-separated list: the views could not bind
        raise CatalogError(f"the repository folder {str(root)!r} has a comma in its path, which DuckDB's "
                           "file_search_path cannot hold; move it to a folder without one "
                           "(`passband sql` and `passband summary` work without the catalog file)")
    target = root / params.paths.catalog

    def check() -> None:
        check_file_target(target, owned=catalog_proof, what="the catalog",
                          proof="passband's catalog holds only views, each with its comment (a catalog written "
                                "before 26 Nov has none: delete it once and re-run)", key="catalog")

    check()  # before any work: a user's DuckDB file is refused, untouched
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)  # a killed build's temp database (and its .wal)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    os.unlink(tmp)  # duckdb wants to create the file itself
    try:
        con = duckdb.connect(tmp)
        con.execute("SET file_search_path = ?", [str(root)])  # the relative shard paths bind against the root
        create_views(con, params, root=root)
        for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
            con.execute(f"COMMENT ON VIEW {name} IS {sql_literal(VIEW_COMMENT)}")
        con.close()
        follow_umask(tmp)
        check()  # again, just before the rename: a file may have appeared there meanwhile
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp + ".wal").unlink(missing_ok=True)
    return target


def check_tables(params: Params, *, root: Path = Path(".")) -> None:
    """Check every shard's footer and columns; raise the one-line DamagedShardError of the first damaged one."""
    for name, dirs in table_dirs(params).items():
        for d in dirs:
            check_shards(Path(root) / d, name=name)


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
    reader = rel.to_arrow_reader(1024)
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
