"""Every ``passband`` subcommand, declared once: its name, its click command, the lock it holds when it writes tables,
and the params.yaml section that configures it. The CLI (:mod:`pipeline.cli`: which module to import for a name), the
locks (:mod:`pipeline.locks`: which commands write, and whether per table set), ``passband doctor --repair`` (every
writer's lock) and the docs generator (docs/cli.md, every command's ``--help``) read this table; a new stage starts
with a row here (docs/stages.md, "Adding a stage").

    >>> [c.name for c in COMMANDS if c.lock == PER_SET]
    ['rollout', 'verify', 'annotate']
"""

from __future__ import annotations

from dataclasses import dataclass

ONE, PER_SET = "one", "per_set"  # a writer's lock: one for the command, or one per table set (``--set``)


@dataclass(frozen=True)
class Command:
    name: str  # the subcommand: ``passband <name>``
    entry: str  # ``module:attribute`` of its click command, imported only when it runs (``passband sql`` never
    # pays for vLLM)
    lock: str | None = None  # ONE or PER_SET for a command that writes its outputs (a second writer is refused)
    section: str | None = None  # its params.yaml section (a field of pipeline.config.Params), None for none of its own


COMMANDS: tuple[Command, ...] = (
    Command("ingest", "pipeline.commands.ingest:command", ONE, "ingest"),
    Command("prepare-model", "pipeline.commands.rollout:prepare_model", ONE, "paths"),
    Command("rollout", "pipeline.commands.rollout:command", PER_SET, "rollout"),
    Command("verify", "pipeline.commands.verify:command", PER_SET, "verify"),
    Command("annotate", "pipeline.commands.annotate:command", PER_SET, "annotate"),
    Command("reformulate", "pipeline.commands.reformulate:command", ONE, "reformulate"),
    Command("reformulate-report", "pipeline.commands.reformulate:report", ONE, "reformulate"),
    Command("publish", "pipeline.commands.publish:command", ONE, "publish"),
    Command("push", "pipeline.commands.publish:push", None, "publish"),
    Command("catalog", "pipeline.commands.catalog:catalog", ONE, "paths"),
    Command("sql", "pipeline.commands.catalog:sql"),
    Command("summary", "pipeline.commands.summary:summary"),
    Command("golds", "pipeline.commands.golds:golds", None, "annotate"),
    Command("doctor", "pipeline.commands.doctor:doctor"),
    Command("drift", "pipeline.commands.drift:command", None, "drift"),
    Command("report", "pipeline.commands.report:command", ONE, "report"),
    Command("probe", "pipeline.commands.probe:command"),
)
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}


def entries() -> dict[str, str]:
    """name -> ``module:attribute`` of every command, in the order ``passband --help`` lists them."""
    return {c.name: c.entry for c in COMMANDS}


def writers() -> dict[str, bool]:
    """name -> whether its lock is per table set, for every command that writes tables."""
    return {c.name: c.lock == PER_SET for c in COMMANDS if c.lock}


__all__ = ["BY_NAME", "COMMANDS", "ONE", "PER_SET", "Command", "entries", "writers"]
