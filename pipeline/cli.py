"""The ``passband`` command: one group, one subcommand per stage. Wiring only.

Each subcommand is a click command of :mod:`pipeline.commands` (a module per command group) and is
imported only when it runs, so ``passband sql`` never pays for importing vLLM.
Library errors (:class:`~pipeline.errors.PassbandError`) and the OS errors a user can act on
(a full disk: :func:`~pipeline.errors.explain`) become one line and exit 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click

from pipeline import __version__
from pipeline.errors import MissingExtra, PassbandError, explain
from pipeline.stages import entries

# name -> "module:attribute" of a click.Command: pipeline/stages.py declares every command once
COMMANDS: dict[str, str] = entries()


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n in COMMANDS if self._available(n)]

    @staticmethod
    def _available(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        try:
            return importlib.util.find_spec(module) is not None
        except MissingExtra:  # listed: running it says which extra to install
            return True
        except ModuleNotFoundError:
            return False

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not self._available(name):
            return None
        module, attr = COMMANDS[name].split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except MissingExtra as exc:
            return _needs_extra(name, exc)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except PassbandError as exc:
            raise click.ClickException(str(exc)) from None
        except Exception as exc:
            if (line := explain(exc)) is None:
                raise
            raise click.ClickException(line) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="passband")
@click.option("--verbose", "-v", is_flag=True, help="Engine logs on the terminal too (same as PASSBAND_LOG_LEVEL=DEBUG).")
def cli(verbose: bool) -> None:
    """passband: model-relative difficulty annotation for RLVR datasets.

    Each subcommand is one DVC stage (see dvc.yaml) and reads params.yaml. Run the whole
    pipeline with `dvc repro`; query the tables with `passband sql "SELECT ..."`.
    Engine logs go to a file under data/logs/ (each stage's result line names it).
    """
    if verbose:
        os.environ["PASSBAND_LOG_LEVEL"] = "DEBUG"  # read by the engines, inherited by their workers


def _needs_extra(name: str, exc: MissingExtra) -> click.Command:
    """A stand-in for a command whose optional extra is not installed: listed in ``passband --help`` with the
    extra to install, and any invocation of it (``--help`` and subcommands included) is that one line, exit 1."""

    def fail(args: tuple[str, ...]) -> None:
        raise click.ClickException(str(exc))

    return click.Command(name, callback=fail, params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
                         help=str(exc), short_help=f"(needs the '{exc.extra}' extra: pip install 'passband[{exc.extra}]')",
                         add_help_option=False, context_settings={"ignore_unknown_options": True})


def main() -> None:
    cli(prog_name="passband")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
