"""Everything in the repository that is generated, not written: ``python -m pipeline.docs`` (or ``--write``)
regenerates it, ``python -m pipeline.docs --check`` exits 1 naming every target that disagrees with its source
(``.ci/run`` runs the check before the tests; tests/test_docs_generated.py shows that a hand edit of each fails it).
``--only NAME`` limits either to some targets. The targets are the generated blocks of the pages (below) and the
generators that live beside what they generate, each a script with its own ``--check`` and ``--write``
(:data:`SCRIPTS`): the measured flag quality, the test fixtures, the code deps of the dvc.yaml files and the
checked command outputs of README.md and docs/*.md (README's ``passband summary``). ``--write`` runs them in
:data:`TARGETS`' order, so what a later target reads (the flag quality a page quotes) is already new.

A generated block sits between two HTML comments, ``<!-- generated:NAME begin ... -->`` and
``<!-- generated:NAME end -->`` (docs/tables.md keeps its older ``tables:begin``/``tables:end`` pair); the
text around it is hand-written and left alone. The blocks and their sources:

- ``tables`` (docs/tables.md): the column tables, from schemas/*.yaml;
- ``flags`` (docs/flags.md): every registered flag with its kind, what it says and its precision and recall
  measured on the labelled set (pipeline/annotate/flag_quality.yaml, written by benchmarks/flag_quality.py);
- ``policies`` (docs/verifier.md): the verifier policies' rule text (``POLICIES`` in pipeline/verify/policies.py);
  the cases column is the measured count the page already holds, which tests/test_verify_differential.py checks;
- ``config`` (docs/configuration.md): every params.yaml key, from the pydantic models of pipeline/config/
  (type, default, the field's description);
- ``stages`` (docs/stages.md): every stage of dvc.yaml with its command and what it writes;
- ``cli`` (docs/cli.md): each subcommand's ``--help`` (``COMMANDS`` in pipeline/cli.py);
- ``suites`` (README.md) and ``suite_runs`` (benchmarks/RESULTS.md): the test suites' wall times, from
  benchmarks/suite_times.yaml (README shows each suite's newest run, RESULTS.md every run, the older marked).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.docs.blocks import (
    BEGIN,
    END,
    PAGE,
    ROOT,
    SUITE_TIMES,
    DocsError,
    cli_markdown,
    config_markdown,
    flags_markdown,
    policies_markdown,
    presets_markdown,
    stages_markdown,
    suite_runs_markdown,
    suites_markdown,
    tables_markdown,
)
from pipeline.io import atomic_write_text

# --- the blocks -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    name: str
    page: str  # relative to the repository root
    source: str  # what the block is generated from (named in its begin marker)
    make: Callable[[str], str]  # the page's current text -> the block's body

    @property
    def begin(self) -> str:
        if self.name == "tables":
            return BEGIN
        return f"<!-- generated:{self.name} begin (from {self.source} by `python -m pipeline.docs`; do not edit) -->"

    @property
    def end(self) -> str:
        return END if self.name == "tables" else f"<!-- generated:{self.name} end -->"


BLOCKS: list[Block] = [
    Block("tables", "docs/tables.md", "schemas/*.yaml", lambda _: tables_markdown()),
    Block("flags", "docs/flags.md", "pipeline/annotate/detectors/ and flag_quality.yaml", lambda _: flags_markdown()),
    Block("policies", "docs/verifier.md", "pipeline/verify/policies.py", policies_markdown),
    Block("config", "docs/configuration.md", "pipeline/config/", lambda _: config_markdown()),
    Block("stages", "docs/stages.md", "dvc.yaml", lambda _: stages_markdown()),
    Block("presets", "docs/stages.md", "pipeline/ingest/presets/*.yaml", presets_markdown),
    Block("cli", "docs/cli.md", "pipeline/cli.py's --help", lambda _: cli_markdown()),
    Block("suites", "README.md", SUITE_TIMES, lambda _: suites_markdown()),
    Block("suite_runs", "benchmarks/RESULTS.md", SUITE_TIMES, lambda _: suite_runs_markdown()),
]


@dataclass(frozen=True)
class Script:
    """A generator that lives beside what it generates (tests/, benchmarks/): ``python PATH --check`` exits 1 when
    its output disagrees with what is committed, ``python PATH --write`` rewrites it. It runs in a subprocess with
    the root first on ``PYTHONPATH``, so a copy of the repository checks its own code."""

    name: str
    path: str  # relative to the repository root
    writes: str

    def start(self, root: Path, mode: str) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        return subprocess.Popen([sys.executable, str(root / self.path), mode], cwd=root, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


SCRIPTS: list[Script] = [
    Script("flag_quality", "benchmarks/flag_quality.py", "pipeline/annotate/flag_quality.yaml (the labelled set's "
           "precision and recall, which the flags block and `passband summary` quote)"),
    Script("preset_fixtures", "tests/support/make_preset_fixtures.py", "tests/data/presets/ (one Parquet file per preset)"),
    Script("thinking_cases", "tests/support/make_thinking_cases.py", "tests/data/thinking_cases.jsonl (needs ../shared/data)"),
    Script("dvc_deps", "tests/test_dvc_deps.py", "the code deps of dvc.yaml and experiments/band_value/dvc.yaml"),
    Script("outputs", "tests/test_docs.py", "the outputs of the `<!-- check: output -->` blocks of README.md and "
           "docs/*.md (README's band counts, on the embedded completions)"),
]

# in the order --write runs them: the flag quality first (the flags block and the summary quote it), the outputs last
TARGETS: list[Block | Script] = [SCRIPTS[0], *SCRIPTS[1:4], *BLOCKS, SCRIPTS[4]]


def render_block(page: str, block: Block) -> str:
    """``page`` with ``block``'s generated part rewritten (the tables block is appended when the page lacks it)."""
    body = block.make(page)
    whole = f"{block.begin}\n\n{body}\n{block.end}"
    prefix = block.begin.split(" (")[0] if block.name != "tables" else BEGIN  # found by name, whatever its source
    start = page.find(prefix)
    end = page.find(block.end, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        if block.name == "tables":
            return page.rstrip("\n") + "\n\n" + whole + "\n"
        raise DocsError(f"{block.page}: no `{prefix} ...` / `{block.end}` pair; add them where the block belongs")
    return page[:start] + whole + page[end + len(block.end):]


def render(page: str) -> str:
    """docs/tables.md's text with its column tables rewritten (kept for callers of the first version)."""
    return render_block(page, BLOCKS[0])


def _targets(only: list[str] | None) -> list[Block | Script]:
    if only is None:
        return TARGETS
    names = [t.name for t in TARGETS]
    if bad := [n for n in only if n not in names]:
        raise DocsError(f"unknown target {bad[0]!r}; known: {', '.join(names)}")
    return [t for t in TARGETS if t.name in only]


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    """The exit status and the last line the script printed (on stderr, else stdout)."""
    out, err = proc.communicate()
    lines = (err.strip() or out.strip()).splitlines()
    return proc.returncode, lines[-1] if lines else f"exit {proc.returncode}"


def stale(root: Path = ROOT, only: list[str] | None = None) -> list[str]:
    """``page: block`` for every generated block that disagrees with its source under ``root``, ``script: name (what
    it said)`` for every generator whose check fails; ``only``: just these targets."""
    targets = _targets(only)
    # the checks only read, so the scripts run side by side (each is one process, mostly one core)
    running = {t.name: t.start(root, "--check") for t in targets if isinstance(t, Script) and (root / t.path).is_file()}
    out = []
    for t in targets:
        if isinstance(t, Script):
            if t.name not in running:
                out.append(f"{t.path}: {t.name} (the script is missing)")
            elif (said := _finish(running[t.name]))[0] != 0:
                out.append(f"{t.path}: {t.name} ({said[1]})")
            continue
        path = root / t.page
        text = path.read_text() if path.is_file() else ""
        try:
            if render_block(text, t) != text:
                out.append(f"{t.page}: {t.name}")
        except DocsError as exc:
            out.append(str(exc))
    return out


def write(root: Path = ROOT, only: list[str] | None = None) -> list[str]:
    """Regenerate every target under ``root`` (``only``: just these); the pages that changed and the generators run."""
    changed = []
    for t in _targets(only):
        if isinstance(t, Script):
            if (said := _finish(t.start(root, "--write")))[0] != 0:
                raise DocsError(f"{t.path} --write failed: {said[1]}")
            changed.append(f"{t.path}: {t.name} ({t.writes})")
            continue
        path = root / t.page
        text = path.read_text() if path.is_file() else ""
        new = render_block(text, t)
        if new != text:
            atomic_write_text(path, new)
            changed.append(f"{t.page}: {t.name}")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository whose docs/ to check or write")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a generated block is out of date")
    mode.add_argument("--write", action="store_true", help="regenerate every target (the default)")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help=f"only this target (repeatable): {', '.join(t.name for t in TARGETS)}")
    args = ap.parse_args(argv)
    try:
        if args.check:
            if bad := stale(args.root, args.only):
                print("generated files out of date (run: python -m pipeline.docs --write):\n  " + "\n  ".join(bad),
                      file=sys.stderr)
                return 1
            return 0
        for what in write(args.root, args.only):
            print(f"wrote {what}")
    except DocsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "BEGIN",
    "BLOCKS",
    "END",
    "PAGE",
    "ROOT",
    "SCRIPTS",
    "TARGETS",
    "Block",
    "DocsError",
    "Script",
    "cli_markdown",
    "config_markdown",
    "flags_markdown",
    "main",
    "policies_markdown",
    "presets_markdown",
    "render",
    "stages_markdown",
    "stale",
    "suite_runs_markdown",
    "suites_markdown",
    "tables_markdown",
    "write",
]
