"""``passband catalog`` and ``passband sql``."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import polars as pl

from pipeline.catalog import build_catalog, query
from pipeline.errors import PassbandError
from pipeline.options import with_params

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
@click.option("--max-rows", type=int, default=50, show_default=True, help="Rows shown by --format table.")
@with_params
def sql(sql: str, *, fmt: str, output: Path | None, max_rows: int, params, root) -> None:
    """Run SQL over the tables (problems, rejects, policies, rollouts, verdicts, flags, difficulty, ...).

    \b
    passband sql "SELECT source, count(*) FROM problems GROUP BY 1"
    passband sql "SELECT * FROM rejects" --format csv -o rejects.csv
    """
    df = query(params, sql, root=root)
    if df is None:
        return
    if fmt == "parquet" and output is None:
        raise PassbandError("--format parquet needs --output FILE")
    if fmt == "table":
        with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                       tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
            text = str(df)
    elif fmt == "csv":
        text = df.write_csv()
    elif fmt == "json":
        text = df.write_json()
    else:
        df.write_parquet(output)
        return
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text)
