"""``passband annotate``: the thin shell of the annotate stage."""

from __future__ import annotations

import click

from pipeline.annotate import run
from pipeline.cli_options import progress_option, with_params
from pipeline.tablesets import SETS


@click.command()
@click.option("--set", "set_name", type=click.Choice(SETS), default="main", show_default=True,
              help="Table set: the main problems or the reformulated ones.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write plot data and PNGs under paths.plots.")
@with_params
@progress_option
def command(*, params, root, set_name: str, plots: bool, progress: bool) -> None:
    """Turn verdicts into the difficulty table (pass rate, 95 % Jeffreys interval, pass@k, band) and per-rollout flags.

    Uses the verdicts of the current verifier_id (from the verify section of params.yaml).
    Bands come from annotate.bands; flag detectors from annotate.flags (all when unset).
    """
    r = run(params, root=root, set_name=set_name, progress=progress, plots=plots)
    click.echo(f"annotate[{set_name}]: {r.groups} problem x policy groups from {r.samples} rollouts, "
               f"{r.flags} flags ({r.verifier_id}); mean pass rate "
               + (f"{r.mean_pass_rate:.3f}" if r.mean_pass_rate is not None else "n/a"))
    click.echo("  bands: " + ", ".join(f"{band} {n}" for band, n in r.bands.items()))
    fired = {k: v for k, v in r.flag_rates.items() if v}
    if fired:
        click.echo("  flag rates: " + ", ".join(f"{k} {v:.1%}" for k, v in fired.items()))
    if r.detector_errors:  # each a detector_error flag on its row (docs/flags.md)
        click.echo("  detector errors (rows flagged detector_error): "
                   + ", ".join(f"{k} {n}" for k, n in r.detector_errors.items()))
