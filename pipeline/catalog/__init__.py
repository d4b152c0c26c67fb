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

from pipeline.catalog.query import READ_ONLY, READ_ONLY_WORDS, SQL_LIMITS, Limits, connect, query, read_only_statement, session
from pipeline.catalog.views import (
    VIEW_COMMENT,
    CatalogError,
    allowed_directories,
    build_catalog,
    catalog_names,
    catalog_proof,
    check_tables,
    create_views,
    extra_views,
    open_views,
    rollout_files,
    table_dirs,
)

__all__ = ["READ_ONLY", "READ_ONLY_WORDS", "SQL_LIMITS", "VIEW_COMMENT", "CatalogError", "Limits", "allowed_directories",
           "build_catalog", "catalog_names", "catalog_proof", "check_tables", "connect", "create_views", "extra_views",
           "open_views", "query", "read_only_statement", "rollout_files", "session", "table_dirs"]
