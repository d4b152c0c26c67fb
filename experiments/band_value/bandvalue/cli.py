"""``python -m bandvalue``: the band-value experiment's stages (dvc.yaml beside this package). Thin shells.

Run from experiments/band_value (or with it on ``sys.path``): ``python -m bandvalue arms|train|measure|report``,
each reading ``params.yaml`` (``--params``) and ``band_value.yaml`` beside it (``--config``). The experiment's
pinned stages ran the same commands as ``passband band-value`` of the pinned commit, before they moved here.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import click

from bandvalue.experiment import load_config, write_arms
from bandvalue.experiment import measure as measure_policy
from bandvalue.experiment import report as write_report
from bandvalue.experiment import train as train_arm
from pipeline.cli_options import progress_option, with_params
from pipeline.errors import PassbandError, explain


class _Group(click.Group):
    """passband's errors (bad config, missing tables) and the OS errors a user can act on as one line and exit 1,
    as ``passband`` prints them."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PassbandError as exc:
            raise click.ClickException(str(exc)) from None
        except Exception as exc:  # a full disk, a read-only folder: one line too
            if (line := explain(exc)) is None:
                raise
            raise click.ClickException(line) from None


def with_config(fn):
    """Add ``--config`` (default: band_value.yaml beside the params file) and pass ``cfg``."""

    @click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                  help="Experiment config [default: band_value.yaml beside --params].")
    @functools.wraps(fn)
    def wrapper(*args, config_path: Path | None, root: Path, **kwargs):
        cfg = load_config(config_path or root / "band_value.yaml")
        return fn(*args, cfg=cfg, root=root, **kwargs)

    return wrapper


@click.group("band-value", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def band_value() -> None:
    """The band-value experiment: GRPO arms drawn by band, measured on held-out items by passband."""


@band_value.command()
@with_params
@with_config
def arms(*, params, cfg, root) -> None:
    """Draw the arms once per draw from the published folder, loaded with datasets.load_dataset."""
    for draw, sizes in write_arms(params, cfg, root=root).items():
        click.echo(f"arms, draw {draw}: " + ", ".join(f"{a} {n}" for a, n in sizes.items())
                   + f" items -> {cfg.arms_dir}/d{draw}/")


@band_value.command()
@with_params
@with_config
@click.option("--arm", required=True, help="Arm name (band_value.yaml arms).")
@click.option("--draw", type=int, required=True, help="Item draw (band_value.yaml draws).")
@click.option("--seed", type=int, required=True, help="GRPO seed.")
def train(*, params, cfg, root, arm: str, draw: int, seed: int) -> None:
    """Train the base policy on one arm's draw with TRL's GRPOTrainer; write its checkpoint and recorded groups."""
    res, (groups, signal) = train_arm(params, cfg, root=root, arm=arm, draw=draw, seed=seed)
    rewards = [r["reward"] for r in res.log]
    click.echo(f"train[{arm}, draw {draw}, seed {seed}]: {len(res.log)} steps in {res.seconds:.0f}s, reward first "
               f"{rewards[0]:.3f} last {rewards[-1]:.3f} mean {sum(rewards) / len(rewards):.3f}; groups with a signal "
               f"{signal} / {groups}; {res.checkpoint} {res.revision[:19]}")


@band_value.command()
@with_params
@with_config
@click.option("--policy", "name", required=True, metavar="NAME",
              help="What to measure: 'base' (the base policy) or a run, ARM-d<DRAW>-s<SEED> (e.g. learnable-d0-s0).")
@progress_option
def measure(*, params, cfg, root, name: str, progress: bool) -> None:
    """Measure one policy on the held-out (and OOD) source with passband's own stages: samples in
    measure/NAME/, its tables (and a run's training log) in results/NAME/, which the report reads."""
    t0 = time.perf_counter()
    out = measure_policy(params, cfg, root=root, name=name, progress=progress)
    click.echo(f"measure[{name}]: {out} ({time.perf_counter() - t0:.0f}s)")


@band_value.command()
@with_params
@with_config
def report(*, params, cfg, root) -> None:
    """The arms' table (markdown, JSON) and PNG from results/: the measured tables and the training logs."""
    out = write_report(params, cfg, root=root)
    click.echo((out / "band_value.md").read_text(), nl=False)
    click.echo()
    click.echo((out / "band_value_arms.md").read_text(), nl=False)
    click.echo(f"report: {out}/band_value.{{md,json,png}}, band_value_arms.md")
