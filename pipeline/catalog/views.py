"""The catalog's views over the Parquet tables (one a table, ``flag_kinds``, ``bands`` and the SELECTs of
``pipeline/views/``), and the catalog file ``passband catalog`` writes (views only, each marked as passband's).
"""


from __future__ import annotations

import os
import tempfile
from pathlib import Path

import duckdb

from pipeline.annotate.detectors import flag_kinds_sql
from pipeline.bands import sql_values
from pipeline.config import Params
from pipeline.errors import PassbandError
from pipeline.io import SHARD_GLOB, check_shards, follow_umask, remove_stale_temps, shard_paths, temp_prefix
from pipeline.ownership import check_file_target
from pipeline.schema import TABLES, schema
from pipeline.sqltext import VIEWS_DIR, sql_list, sql_literal
from pipeline.tablesets import SET_TABLES, SETS, features_dir, table_set


class CatalogError(PassbandError):
    pass


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
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
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
