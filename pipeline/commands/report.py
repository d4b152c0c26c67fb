"""``passband report``: the thin shell of the report stage."""

from __future__ import annotations

import os

import click

from pipeline.cli_options import with_params
from pipeline.report import run


@click.command()
@with_params
def command(*, params, root) -> None:
    """Write the static report site (paths.report): open its index.html in a browser, no server needed.

    Bands, pass rates with their intervals, flags with their measured precision, suspicious items,
    reformulation, drift between policies, and an item browser with every item's rollouts (at most
    report.max_rollouts_per_item per policy). Everything is local: it opens offline.
    """
    result = run(params, root=root)
    info = result.info
    index = os.path.relpath(result.folder / "index.html")
    click.echo(f"report: {index} ({info['items']} items in {info['item_files']} item files, "
               f"{info['rollouts_shown']} rollouts shown, {info['bytes'] / 1e6:.1f} MB)")
