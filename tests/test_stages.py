"""pipeline/stages.py declares every command once; the CLI, the locks and dvc.yaml agree with it."""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import pytest
import yaml

from pipeline.config import Params
from pipeline.errors import MissingExtra
from pipeline.stages import COMMANDS, PER_SET, entries, writers

REPO = Path(__file__).resolve().parents[1]


def test_the_cli_and_the_locks_read_the_declaration():
    from pipeline.cli import COMMANDS as CLI_COMMANDS
    from pipeline.locks import WRITERS

    assert entries() == CLI_COMMANDS and writers() == WRITERS
    assert len({c.name for c in COMMANDS}) == len(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_each_declared_command_is_a_click_command_with_its_section(command):
    module, attr = command.entry.split(":")
    try:
        cmd = getattr(importlib.import_module(module), attr)
    except MissingExtra as exc:  # the probe's extra (torch): declared, and says which extra to install
        pytest.skip(str(exc))
    assert isinstance(cmd, click.Command)
    assert command.section is None or command.section in Params.model_fields
    takes_set = any("--set" in p.opts for p in cmd.params if isinstance(p, click.Option))
    if command.lock == PER_SET:  # a lock per table set is a --set command's (drift reads a set but writes no table)
        assert takes_set, command.name


def test_every_dvc_stage_runs_a_declared_writer():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    declared = {c.name: c for c in COMMANDS}
    for name, stage in stages.items():
        words = stage["cmd"].split()
        assert words[0] == "passband" and words[1] in declared, (name, stage["cmd"])
        assert declared[words[1]].lock or words[1] == "drift", (name, "a DVC stage writes: its command holds a lock")
