"""``passband catalog`` and ``passband sql``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import click
import polars as pl

from pipeline.catalog import SQL_LIMITS, Limits, allowed_directories, build_catalog, query
from pipeline.cli_options import with_params
from pipeline.errors import PassbandError

FORMATS = ("table", "csv", "json", "parquet")


@click.command()
@with_params
def catalog(*, params, root) -> None:
    """(Re)build the DuckDB catalog (paths.catalog): one view per table, plus pipeline/views/*.sql."""
    path = build_catalog(params, root=root)
    click.echo(f"catalog: {path}")


@click.command()
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format. parquet needs --output.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout.")
@click.option("--max-rows", type=click.IntRange(min=1), default=50, show_default=True,
              help="Rows shown by --format table; only these are fetched (the other formats fetch every row).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, max=86400, min_open=True),
              default=SQL_LIMITS.timeout_s, show_default=True,
              help="Stop the query after this many seconds (wall clock) with a one-line error.")
@click.option("--memory-mb", type=click.IntRange(min=64), default=SQL_LIMITS.memory_mb, show_default=True,
              help="DuckDB's memory limit; past it the query spills to a private temp folder.")
@click.option("--spill-mb", type=click.IntRange(min=0), default=SQL_LIMITS.spill_mb, show_default=True,
              help="At most this much spilled to disk (a private mkdtemp folder, removed afterwards).")
@click.option("--max-result-mb", type=click.IntRange(min=1, max=1 << 20), default=SQL_LIMITS.max_result_mb,
              show_default=True, help="Stop the query, with a one-line error, once its result holds more than this.")
@click.option("--overwrite", is_flag=True,
              help="Let --output replace an existing file (never a link, params.yaml, dvc.yaml or dvc.lock).")
@with_params
def sql(sql: str, *, fmt: str, output: Path | None, max_rows: int, timeout_s: float, memory_mb: int, spill_mb: int,
        max_result_mb: int, overwrite: bool, params, root) -> None:
    """Run one read-only query over the tables (problems, rejects, policies, rollouts, verdicts, flags, difficulty, ...).

    SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW or SUMMARIZE only: COPY, ATTACH, INSTALL, SET, CREATE and other
    statements are refused, and no file outside the table folders and the published dataset can be read
    (save a result with --output: a new file, or an existing one with --overwrite). A query is bounded:
    --timeout, --memory-mb (with the result's budget, the process's data while it runs), --spill-mb,
    --max-result-mb; Ctrl-C stops it. Control characters in text shown on a terminal are escaped (\\x1b).

    \b
    passband sql "SELECT source, count(*) FROM problems GROUP BY 1"
    passband sql "SELECT * FROM rejects" --format csv -o rejects.csv
    """
    try:
        _sql(sql, fmt=fmt, output=output, max_rows=max_rows, params=params, root=root, overwrite=overwrite,
             limits=Limits(timeout_s=timeout_s, memory_mb=memory_mb, spill_mb=spill_mb, max_result_mb=max_result_mb))
    except KeyboardInterrupt:  # a ^C before the query runs (one during it is the query's own one-line error)
        raise PassbandError("interrupted (Ctrl-C)") from None


def _sql(sql: str, *, fmt: str, output: Path | None, max_rows: int, params, root: Path, limits: Limits,
         overwrite: bool = False) -> None:
    if output is not None:
        _check_output(output, params, root=root, overwrite=overwrite)
    if fmt == "parquet" and output is None:
        raise PassbandError("--format parquet needs --output FILE")
    # the table view fetches one row more than it shows, to say that there are more
    if fmt == "table":
        limits = dataclasses.replace(limits, max_rows=max_rows + 1)
    try:
        df = query(params, sql, root=root, limits=limits)
    except pl.exceptions.PolarsError as exc:  # a DuckDB type polars cannot take (INTERVAL, UNION)
        raise PassbandError(f"SQL error: the result has a column of a type passband sql cannot show "
                            f"({_first_line(exc)}); cast it in the query, e.g. CAST(x AS VARCHAR)") from None
    try:
        terminal = output is None and sys.stdout.isatty()
        if fmt == "table" or (fmt == "csv" and terminal):
            df = escape_controls(df)  # a value's ESC or OSC sequence would drive the terminal
        if fmt == "table":
            more = df.height > max_rows
            with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                           tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
                text = str(df.head(max_rows))
            if more:
                text += f"\n(the first {max_rows} rows; more not shown: --max-rows N, or --format csv -o FILE for all)"
        elif fmt == "csv":
            text = as_text_columns(df, nested=True).write_csv()
        elif fmt == "json":
            text = as_text_columns(df, nested=False).write_json()
        else:
            _write_atomic(output, df.write_parquet)
            return
    except pl.exceptions.PolarsError as exc:
        raise PassbandError(f"cannot write the result as {fmt} ({_first_line(exc)}); try another --format, or cast "
                            "the column in the query, e.g. CAST(x AS VARCHAR)") from None
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        _write_atomic(output, lambda tmp: Path(tmp).write_text(text))


_CONTROLS = "[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but tab and newline, DEL, C1 (ESC, CSI, OSC, ...)


def escape_controls(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with every control character of its text columns (tab and newline aside) shown as ``\\xNN``."""
    def shown(col: pl.Expr) -> pl.Expr:
        return col.map_elements(lambda v: re.sub(_CONTROLS, lambda m: f"\\x{ord(m[0]):02x}", v), return_dtype=pl.String)

    text = [name for name, dtype in df.schema.items() if dtype == pl.String]
    flagged = [n for n in text if df[n].str.contains(_CONTROLS).any()]
    return df.with_columns(shown(pl.col(n)) for n in flagged) if flagged else df


def _write_atomic(output: Path, write) -> None:
    """``write(tmp)`` to a new file beside ``output``, then renamed over it: a link at ``output`` is replaced, never
    written through, and a failed write leaves what was there."""
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, output)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _json_value(value):
    return value.hex() if isinstance(value, bytes) else str(value)


def as_text_columns(df: pl.DataFrame, *, nested: bool) -> pl.DataFrame:
    """``df`` with the columns a text format cannot hold as they are made text: bytes as hex (CSV and JSON), and
    with ``nested`` (CSV) every list, array, struct and map as its JSON (``[1, 2]``, ``{"a": 1}``), one cell each
    (in JSON too, a nested value holding bytes, which polars' JSON writer cannot take)."""
    columns = []
    for name, dtype in df.schema.items():
        if dtype == pl.Binary:
            columns.append(df[name].bin.encode("hex"))
        elif dtype.is_nested() and (nested or "Binary" in str(dtype)):
            columns.append(pl.Series(name, [None if v is None else json.dumps(v, default=_json_value, ensure_ascii=False)
                                            for v in df[name].to_list()], dtype=pl.String))
    return df.with_columns(columns) if columns else df


def _check_output(output: Path, params, *, root: Path, overwrite: bool = False) -> None:
    """--output is a new file, or with ``overwrite`` an existing regular file; never a link, a folder, the project's
    own files (params, dvc.yaml, dvc.lock), a shard or the catalog: a one-line error naming it."""
    if os.path.islink(output):
        raise PassbandError(f"--output {output} is a link: passband writes no result through a link; name a file")
    if not output.parent.is_dir():
        raise PassbandError(f"--output {output}: the folder {output.parent} does not exist")
    target = output.resolve()
    owned = [(Path(d), "output folder") for d in allowed_directories(params, root=root) if Path(d).is_absolute()]
    owned.append(((root / params.paths.catalog).resolve(), "catalog file"))
    for path, what in owned:
        if target == path or target.is_relative_to(path):
            raise PassbandError(f"--output {output} would overwrite passband's own {what} ({path}); "
                                "write the result to a file outside it")
    if output.exists():
        if not output.is_file():
            raise PassbandError(f"--output {output} exists and is not a regular file")
        if output.resolve() in {(root / name).resolve() for name in ("params.yaml", "dvc.yaml", "dvc.lock")}:
            raise PassbandError(f"--output {output} is the project's own file: write the result elsewhere")
        if not overwrite:
            raise PassbandError(f"--output {output} exists: pass --overwrite to replace it, or name a new file")
