"""Option bundles shared by every subcommand (as decorators, like sqlite-utils)."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from pipeline.locks import WRITERS, hold, lock_name
from pipeline.params_loader import load_params


def with_params(fn):
    """Add ``--params`` (default params.yaml); pass ``params`` and ``root`` (the params file's folder).

    A stage command (``pipeline.locks.WRITERS``) runs holding its stage's lock, so a second
    writer of the same stage and table set refuses instead of interleaving shards.
    """

    @click.option(
        "--params", "params_path", default="params.yaml", show_default=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Parameters file; every path in it is relative to its folder.",
    )
    @functools.wraps(fn)
    def wrapper(*args, params_path: Path, **kwargs):
        params = load_params(params_path)
        root = params_path.resolve().parent
        command = click.get_current_context().info_name
        if command not in WRITERS:
            return fn(*args, params=params, root=root, **kwargs)
        with hold(root, lock_name(command, kwargs.get("set_name"))):
            return fn(*args, params=params, root=root, **kwargs)

    return wrapper


def progress_option(fn):
    return click.option("--progress/--no-progress", default=True, show_default=True,
                        help="Show progress bars on stderr.")(fn)


__all__ = ["progress_option", "with_params"]
