"""Values in SQL text: bound parameters where DuckDB takes them, else the one quoting helper here.

DuckDB binds ``?`` in a SELECT (``read_parquet(?)``), in ``COPY ... TO ?`` and in ``SET name = ?``; use that.
A view's definition cannot hold a parameter (the catalog file stores it as text), so a path or value in a
view, or in a SELECT the code composes from parts, goes through :func:`sql_literal`::

    sql_literal("o'q/data/problems/*.parquet")  ->  'o''q/data/problems/*.parquet'

Never an f-string with ``'{path}'``: a folder named ``o'q`` breaks it, and one named
``';COPY (SELECT 1) TO '/tmp/x.csv';SELECT '`` runs the COPY.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

VIEWS_DIR = Path(__file__).parent / "views"  # the catalog's views, one SELECT a file (pipeline/catalog/views.py)


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal: single quotes doubled (DuckDB's strings take no backslash escapes)."""
    if "\x00" in text:
        raise ValueError(f"a NUL character cannot be in a SQL string: {text!r}")
    return "'" + text.replace("'", "''") + "'"


def sql_list(texts: Iterable[str]) -> str:
    """A list literal of strings, e.g. the globs of ``read_parquet([...])``."""
    return "[" + ", ".join(sql_literal(t) for t in texts) + "]"


def view_sql(name: str) -> str:
    """The SELECT of the catalog view ``name`` (``pipeline/views/<name>.sql``), for code that runs it over its own
    tables (annotate's metrics over the difficulty file it just wrote) instead of keeping a copy."""
    return (VIEWS_DIR / f"{name}.sql").read_text()
