"""``passband band-value``: the band-value experiment's stages (experiments/band_value/dvc.yaml). Thin shells."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import click

from pipeline.options import progress_option, with_params


def with_config(fn):
    """Add ``--config`` (default: band_value.yaml beside the params file) and pass ``cfg``."""

    @click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
                  help="Experiment config [default: band_value.yaml beside --params].")
    @functools.wraps(fn)
    def wrapper(*args, config_path: Path | None, root: Path, **kwargs):
        from pipeline.train.band_value import load_config

        cfg = load_config(config_path or root / "band_value.yaml")
        return fn(*args, cfg=cfg, root=root, **kwargs)

    return wrapper


@click.group("band-value")
def band_value() -> None:
    """The band-value experiment: GRPO arms drawn by band, measured on held-out items by passband."""


@band_value.command()
@with_params
@with_config
def arms(*, params, cfg, root) -> None:
    """Draw the arms (equal size, disjoint) from the published folder, loaded with datasets.load_dataset."""
    from pipeline.train.band_value import write_arms

    sizes = write_arms(params, cfg, root=root)
    click.echo("arms: " + ", ".join(f"{a} {n}" for a, n in sizes.items()) + f" items -> {cfg.arms_dir}/")


@band_value.command()
@with_params
@with_config
@click.option("--arm", required=True, help="Arm name (band_value.yaml arms).")
@click.option("--seed", type=int, required=True, help="GRPO seed.")
def train(*, params, cfg, root, arm: str, seed: int) -> None:
    """Train the base policy on one arm with TRL's GRPOTrainer; write its checkpoint."""
    from pipeline.train.band_value import train as run

    res = run(params, cfg, root=root, arm=arm, seed=seed)
    rewards = [r["reward"] for r in res.log]
    click.echo(f"train[{arm}, seed {seed}]: {len(res.log)} steps in {res.seconds:.0f}s, reward first "
               f"{rewards[0]:.3f} last {rewards[-1]:.3f} mean {sum(rewards) / len(rewards):.3f}; "
               f"{res.checkpoint} {res.revision[:19]}")


@band_value.command()
@with_params
@with_config
@progress_option
def measure(*, params, cfg, root, progress: bool) -> None:
    """Measure the base policy and every checkpoint on the held-out source with passband's own stages."""
    from pipeline.train.band_value import measure as run

    t0 = time.perf_counter()
    path = run(params, cfg, root=root, progress=progress)
    click.echo(f"measure: {path} ({time.perf_counter() - t0:.0f}s)")


@band_value.command()
@with_params
@with_config
def report(*, params, cfg, root) -> None:
    """The arms' table (markdown, JSON) and PNG from the measurement and the training logs."""
    from pipeline.train.band_value import report as run

    out = run(params, cfg, root=root)
    click.echo((out / "band_value.md").read_text(), nl=False)
    click.echo()
    click.echo((out / "band_value_arms.md").read_text(), nl=False)
    click.echo(f"report: {out}/band_value.{{md,json,png}}, band_value_arms.md")
