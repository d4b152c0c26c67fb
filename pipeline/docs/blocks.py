"""The generators of :mod:`pipeline.docs`: each returns a generated block's body (Markdown) from its source."""

from __future__ import annotations

import json
import re
import types
import typing
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
from pipeline.schema import TABLES, schema
from pipeline.verify.policies import POLICIES

ROOT = Path(__file__).resolve().parents[2]


PAGE = ROOT / "docs" / "tables.md"


BEGIN = "<!-- tables:begin (generated from schemas/*.yaml by `python -m pipeline.docs`; do not edit) -->"


END = "<!-- tables:end -->"


class DocsError(Exception):
    """A page lacks a generated block's markers."""


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
