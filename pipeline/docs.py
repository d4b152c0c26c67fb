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
import json
import os
import re
import subprocess
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from pipeline.annotate.detectors import DETECTORS
from pipeline.annotate.flag_runner import DETECTOR_ERROR
from pipeline.annotate.measured import MEASURED
from pipeline.annotate.measured import measured as measured_flags
from pipeline.annotate.quality import FlagQuality
from pipeline.cli import COMMANDS, cli
from pipeline.config import Params, Paths
from pipeline.ingest.presets import PRESETS
from pipeline.io import atomic_write_text
from pipeline.schema import TABLES, schema
from pipeline.verify.policies import POLICIES

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tables.md"

BEGIN = "<!-- tables:begin (generated from schemas/*.yaml by `python -m pipeline.docs`; do not edit) -->"
END = "<!-- tables:end -->"


class DocsError(Exception):
    """A page lacks a generated block's markers."""


# --- the generators: each returns the block's body (Markdown) -------------------------------------------------


def tables_markdown() -> str:
    parts = []
    for name in TABLES:
        s = schema(name)
        parts.append(f"### `{name}`\n\n{s.description} Key: `({', '.join(s.key)})`.\n\n{s.markdown()}\n")
    return "\n".join(parts)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _ratio(x: float | None, ci: tuple[float, float] | None) -> str:
    return "-" if x is None or ci is None else f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def flags_markdown() -> str:
    """Every registered detector (in registry order), then ``detector_error``, with the measured figures."""
    doc = yaml.safe_load(MEASURED.read_text())
    figures = measured_flags()
    lines = [f"Measured on {doc['labelled_rows']} labelled completions (`{MEASURED.relative_to(ROOT)}`; verify agrees "
             f"with the labelled correctness on {doc['verify_agreement']:.3f} of them).", "",
             "| flag | kind | what it says | label | flagged | labelled | both | precision [95 % CI] | recall [95 % CI] |",
             "|---|---|---|---|---:|---:|---:|---|---|"]
    for d in DETECTORS.values():
        what = _cell((d.doc or "").split("\n\n")[0].replace("``", "`"))
        if (f := figures.get(d.name)) is None:
            lines.append(f"| `{d.name}` | {d.kind} | {what} | (not labelled) | - | - | - | - | - |")
            continue
        q = FlagQuality(d.name, d.kind, f["label"], f["flagged"], f["labelled"], f["both"])
        lines.append(f"| `{d.name}` | {d.kind} | {what} | {q.label} | {q.flagged} | {q.labelled} | {q.both} | "
                     f"{_ratio(q.precision, q.precision_ci)} | {_ratio(q.recall, q.recall_ci)} |")
    lines.append(f"| `{DETECTOR_ERROR}` | error | a detector raised on the row (evidence: the detector and the error); "
                 "the row's other flags still ran | (not a flag to measure) | - | - | - | - | - |")
    return "\n".join(lines) + "\n"


POLICY_ROW = re.compile(r"^\| `(\w+)` \|.*\| (\d+) \|$", re.M)


def policies_markdown(page: str) -> str:
    """``POLICIES`` as a table; the cases column keeps the counts the page holds (measured by the slow differential
    test, tests/test_verify_differential.py, which fails when one is wrong); a new policy starts at 0."""
    cases = {name: int(n) for name, n in POLICY_ROW.findall(page)}
    lines = ["| policy | rule | why math-verify is wrong there | cases |", "|---|---|---|---|"]
    for name, (rule, why) in POLICIES.items():
        lines.append(f"| `{name}` | {_cell(rule)} | {_cell(why)} | {cases.get(name, 0)} |")
    return "\n".join(lines) + "\n"


def presets_markdown(_page: str) -> str:
    """The presets, one row each, read from their YAML files (``pipeline/ingest/presets/``)."""
    lines = ["| preset | Hub dataset | license | source_difficulty (what it measures) |", "|---|---|---|---|"]
    for name, p in PRESETS.items():
        difficulty = _cell(p.difficulty_measure) if p.difficulty_measure else "-"
        lines.append(f"| `{name}` | `{p.hub}` | {p.license or 'not recorded (publish.licenses)'} | {difficulty} |")
    return "\n".join(lines) + "\n"


def _type(annotation) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # a checked str (config.Name, ...): its base type
        return _type(args[0])
    if origin is typing.Literal:
        return " \\| ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join("null" if a is type(None) else _type(a) for a in args)
    if origin in (list, tuple):
        inner = ", ".join(_type(a) for a in args if a is not Ellipsis)
        return f"list[{inner}]" if origin is list else f"({inner})"
    if origin is dict:
        return f"map[{_type(args[0])}, {_type(args[1])}]"
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return f"`{json.dumps(value)}`"


def _model_rows(model, prefix: str, *, note: str = "") -> list[str]:
    """One row per key of ``model`` (a pydantic model), nested models walked: ``a.b``, ``a[].b`` for a list of
    models, ``a.<name>.b`` for a map of them, each variant of a union of models under its ``kind``."""
    from pydantic import BaseModel

    def is_model(a) -> bool:
        return isinstance(a, type) and issubclass(a, BaseModel)

    def doc(m) -> str:
        return (m.__doc__ or "").strip().split("\n\n")[0].replace("``", "`")

    rows = []
    for name, field in model.model_fields.items():
        key, ann = f"{prefix}{name}", field.annotation
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if is_model(ann):  # a section: its keys follow
            rows.append(f"| `{key}`{note} | section | - | {_cell(field.description or doc(ann))} |")
            rows += _model_rows(ann, f"{key}.", note=note)
            continue
        models = [a for a in args if is_model(a)] if origin in (typing.Union, types.UnionType) else []
        kind = "one of: " + ", ".join(m.__name__ for m in models) if len(models) > 1 else _type(ann)
        rows.append(f"| `{key}`{note} | {kind} | {_default(field)} | {_cell(field.description or '')} |")
        element = args[-1] if origin in (list, dict) and args else None
        if len(models) == 1:  # an optional model
            rows += _model_rows(models[0], f"{key}.", note=note)
        elif len(models) > 1:  # a union told apart by its `kind` field
            for m in models:
                rows += [r for r in _model_rows(m, f"{key}.", note=f" (kind {m.model_fields['kind'].default})")
                         if not r.startswith(f"| `{key}.kind`")]
        elif is_model(element):
            rows += _model_rows(element, f"{key}{'[]' if origin is list else '.<name>'}.", note=note)
    return rows


def config_markdown() -> str:
    lines = ["| key | type | default | what it sets |", "|---|---|---|---|"]
    return "\n".join(lines + _model_rows(Params, "")) + "\n"


def stages_markdown() -> str:
    """The stages of dvc.yaml in order, ``${paths.*}`` shown as the default paths; a stage's ``desc`` says what it
    writes besides its DVC outputs."""
    paths = Paths().model_dump()

    def resolve(text: str) -> str:
        return re.sub(r"\$\{paths\.(\w+)\}", lambda m: str(paths[m[1]]), text)

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    lines = [f"{len(stages)} stages, in `dvc.yaml`'s order (`dvc repro` runs them as their inputs require):", "",
             "| stage | command | writes | metrics |", "|---|---|---|---|"]
    for name, st in stages.items():
        outs = [resolve(e if isinstance(e, str) else next(iter(e))) for e in st.get("outs", []) + st.get("plots", [])]
        metrics = [resolve(e if isinstance(e, str) else next(iter(e))) for e in st.get("metrics", [])]
        writes = ", ".join(f"`{o}`" for o in outs)
        if st.get("desc"):  # what the stage writes besides its DVC outputs
            writes = f"{writes}; {st['desc']}" if writes else st["desc"]
        lines.append(f"| `{name}` | `{st['cmd']}` | {_cell(writes or '-')} | {', '.join(f'`{m}`' for m in metrics) or '-'} |")
    return "\n".join(lines) + "\n"


def cli_markdown() -> str:
    """``passband --help`` and each subcommand's, rendered at a fixed width."""
    def helptext(cmd: click.Command, name: str, parent: click.Context | None) -> str:
        # the command's own context settings, as `passband ... --help` builds them (make_context): click caches each
        # command's help option on first use, so a bare Context here rendered `--help` or `-h, --help` depending on
        # whether the command had been invoked earlier in the process
        settings = {"terminal_width": 100, "max_content_width": 100, **cmd.context_settings}
        ctx = click.Context(cmd, info_name=name, parent=parent, **settings)
        return ctx, cmd.get_help(ctx).rstrip()

    top, text = helptext(cli, "passband", None)
    parts = ["```", text, "```", ""]
    for name in COMMANDS:
        cmd = cli.get_command(top, name)
        if cmd is None:
            continue
        _, text = helptext(cmd, name, top)
        parts += [f"## `passband {name}`", "", "```", text, "```", ""]
    return "\n".join(parts)


SUITE_TIMES = "benchmarks/suite_times.yaml"


def _suite_times() -> tuple[dict, list[dict]]:
    """The suites and their runs, newest first; each run gains ``superseded`` (a newer run of its suite on as many
    processes, under the same condition, exists): a run with ``beside`` (what loaded the box) is a condition of its
    own, so a run under load never supersedes a quiet one, nor the other way."""
    doc = yaml.safe_load((ROOT / SUITE_TIMES).read_text())
    suites, runs = doc["suites"], sorted(doc["runs"], key=lambda r: r["date"], reverse=True)
    newest: set[tuple[str, int, bool]] = set()
    for r in runs:
        if r["suite"] not in suites:
            raise DocsError(f"{SUITE_TIMES}: a run of unknown suite {r['suite']!r}; known: {', '.join(suites)}")
        key = (r["suite"], r["processes"], "beside" in r)
        r["superseded"] = key in newest
        newest.add(key)
    return suites, runs


def _run_text(r: dict, *, date: bool = True) -> str:
    procs = "one process" if r["processes"] == 1 else f"{r['processes']} processes"
    counts = [f"{r['passed']:,} passed" if "passed" in r else "", f"{r['skipped']:,} skipped" if "skipped" in r else ""]
    beside = f"beside {r['beside']}" if "beside" in r else ""
    detail = "; ".join(x for x in [" ".join(x for x in (r.get("how", ""), beside) if x),
                                   ", ".join(c for c in counts if c), f"{r['date'].day} {r['date']:%b}" if date else ""]
                       if x)
    return f"{r['wall']} on {procs}" + (f" ({detail})" if detail else "")


def suites_markdown() -> str:
    """README's test table: each suite with its newest run on each number of processes (the most processes first),
    a quiet one where there is one, else one under load."""
    suites, runs = _suite_times()
    lines = ["| suite | command | time (2-core box) |", "|---|---|---|"]
    for name, s in suites.items():
        current = [r for r in runs if r["suite"] == name and not r["superseded"]]
        shown = {}
        for r in sorted(current, key=lambda r: "beside" in r):  # the quiet run first: it is the one shown
            shown.setdefault(r["processes"], r)
        times = "; ".join(_run_text(shown[p]) for p in sorted(shown, reverse=True)) or "not measured yet"
        what = f": {_cell(s['what'])}" if s.get("what") else ""
        lines.append(f"| {name} | `{s['command']}`{what} | {_cell(times)} |")
    return "\n".join(lines) + "\n"


def suite_runs_markdown() -> str:
    """Every measured run of a suite, newest first, the superseded ones marked."""
    suites, runs = _suite_times()
    lines = ["| date | suite | command | wall time | |", "|---|---|---|---|---|"]
    for r in runs:
        mark = "superseded by a newer run" if r["superseded"] else "current"
        lines.append(f"| {r['date']} | {r['suite']} | `{suites[r['suite']]['command']}` | "
                     f"{_cell(_run_text(r, date=False))} | {mark} |")
    return "\n".join(lines) + "\n"


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


if __name__ == "__main__":
    sys.exit(main())
