"""``passband ingest``: the thin shell of the ingest stage."""

from __future__ import annotations

import click

from pipeline.cli_options import progress_option, with_params
from pipeline.ingest import run


@click.command()
@with_params
@progress_option
def command(*, params, root, progress: bool) -> None:
    """Read every source in params.yaml (ingest.sources) into the problems and rejects tables.

    Questions are normalised and keyed (problem_id = hash of the normalised text), golds are
    extracted (GSM8K '####', MATH last \\boxed{}) and checked with math-verify, duplicates
    are folded and counted, and every row that does not become a problem lands in rejects
    with its reason. Rows read = problems + rejects + duplicates, checked at the end.
    Rows stream through in bounded memory; caps on line bytes and every text field
    (ingest.max_*) make an oversized row a reject.
    """
    result = run(params, root=root, progress=progress)
    click.echo(
        f"ingest: {result.rows_read} rows read -> {result.problems} problems, "
        f"{result.rejects} rejects, {result.duplicates} duplicates"
    )
    for reason, n in sorted(result.reasons.items(), key=lambda kv: -kv[1]):
        click.echo(f"  reject {reason}: {n}")
    for source, issues in result.gold_issues.items():  # the gold lint's findings, per source (docs/stages.md)
        found = ", ".join(f"{name} {n}" for name, n in issues.items()) or "none"
        click.echo(f"  gold issues {source}: {found}")
