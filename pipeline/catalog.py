"""The DuckDB catalog: views over the Parquet tables, and SQL over them.

Views use paths relative to the repository root, so ``data/passband.duckdb`` keeps working
when the repository is moved or cloned (open it from the root: ``duckdb data/passband.duckdb``).
``passband sql`` builds the same views in memory, so it always sees the current shards.
Extra views live as ``pipeline/views/<name>.sql`` files (one SELECT each) and are created
after the tables, in name order. ``flag_kinds`` (flag, kind, description, measured precision, recall) comes from the flag
detector registry, so views and queries select e.g. the shortcut flags without naming them;
``bands`` (band, band_order, colour, hard) comes from pipeline/bands.py, so views order and
group bands without naming them.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import duckdb

from pipeline.config import Params
from pipeline.errors import PassbandError
from pipeline.io import SHARD_GLOB, check_shards, follow_umask, remove_stale_temps, shard_paths
from pipeline.schema import TABLES, schema
from pipeline.tablesets import SETS, table_set

VIEWS_DIR = Path(__file__).parent / "views"


class CatalogError(PassbandError):
    pass


def table_dirs(params: Params) -> dict[str, list[str]]:
    """Every directory whose shards make up each table: one per table set (see tablesets)."""
    sets = [table_set(params, s) for s in SETS]
    dirs = {t: [getattr(ts, t) for ts in sets] for t in TABLES}
    dirs["rejects"] += [ts.rollout_rejects for ts in sets]  # problems a policy's engine could not take
    return dirs


def _table_sql(name: str, dirs: list[str], root: Path) -> str:
    globs = [f"{d}/{SHARD_GLOB}" for d in dirs if shard_paths(root / d)]
    if not globs:
        return schema(name).empty_select()
    cols = ", ".join(schema(name).names)
    files = ", ".join(f"'{g}'" for g in globs)
    distinct = "DISTINCT " if name == "policies" else ""  # every set records the same policy
    return f"SELECT {distinct}{cols} FROM read_parquet([{files}])"


def extra_views() -> list[tuple[str, str]]:
    return [(f.stem, f.read_text()) for f in sorted(VIEWS_DIR.glob("*.sql"))]


def create_views(con: duckdb.DuckDBPyConnection, params: Params, *, root: Path) -> None:
    for name, dirs in table_dirs(params).items():
        try:  # binding the view reads every shard's footer
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {_table_sql(name, dirs, root)}")
        except duckdb.Error:
            for d in dirs:  # a damaged shard: its one-line DamagedShardError, not DuckDB's message
                check_shards(root / d, name=name)
            raise
    from pipeline.annotate.flags import flag_kinds_sql
    from pipeline.bands import sql_values

    con.execute(f"CREATE OR REPLACE VIEW flag_kinds AS {flag_kinds_sql()}")
    con.execute(f"CREATE OR REPLACE VIEW bands AS {sql_values()}")
    for name, sql in extra_views():
        try:
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        except duckdb.Error as exc:
            raise CatalogError(f"view {name} (pipeline/views/{name}.sql): {exc}") from exc


def connect(params: Params, *, root: Path = Path(".")) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with every view, resolving paths against ``root``."""
    root = Path(root).resolve()
    con = duckdb.connect(":memory:")
    con.execute(f"SET file_search_path = '{root}'")
    create_views(con, params, root=root)
    return con


def build_catalog(params: Params, *, root: Path = Path(".")) -> Path:
    """Write ``paths.catalog`` atomically: a temp database renamed into place."""
    root = Path(root).resolve()
    target = root / params.paths.catalog
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)  # a killed build's temp database (and its .wal)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    os.unlink(tmp)  # duckdb wants to create the file itself
    try:
        con = duckdb.connect(tmp)
        con.execute(f"SET file_search_path = '{root}'")
        create_views(con, params, root=root)
        con.close()
        follow_umask(tmp)
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


def query(params: Params, sql: str, *, root: Path = Path("."), attempts: int = 5):
    """Run ``sql`` over the catalog and return a polars DataFrame; DuckDB errors become one line.

    A file error is retried a few times with fresh views (a writer may have replaced or removed
    a shard between DuckDB's listing and its read); if it persists, the shards are checked so a
    damaged one is named with what to do, rather than reported as DuckDB's error.
    """
    for attempt in range(attempts):
        con = None
        try:
            con = connect(params, root=root)  # views are bound here: a shard's footer is read now
            return con.sql(sql).pl()
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            if attempt + 1 < attempts:
                time.sleep(0.05 * (attempt + 1))
                continue
            check_tables(params, root=root)
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
        except duckdb.Error as exc:
            raise CatalogError(f"SQL error: {str(exc).splitlines()[0]}") from None
        except AttributeError:  # a statement with no result (e.g. SET)
            return None
        finally:
            if con is not None:
                con.close()
