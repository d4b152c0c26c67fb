"""Problem sources behind one signature, looked up by name.

A source is ``fn(cfg: SourceConfig, *, root: Path) -> Iterator[RawRow | RawReject]``.
It reads and maps; it never validates (the core applies the same rules to every source).

    - name: gsm8k_test
      kind: gsm8k
      path: ../shared/data/gsm8k/test.jsonl
      split: test
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from pipeline.config import ConfigError, Model, SourceConfig, parse_options, unknown_name
from pipeline.ingest.records import RawReject, RawRow

Record = RawRow | RawReject
SourceFn = Callable[..., Iterator[Record]]
SOURCES: dict[str, SourceFn] = {}

PROBLEM_FIELDS = ("id", "question", "answer", "solution", "subject", "level")
GOLD_FROM = ("answer", "gsm8k", "boxed")


def register(name: str) -> Callable[[SourceFn], SourceFn]:
    def deco(fn: SourceFn) -> SourceFn:
        SOURCES[name] = fn
        return fn

    return deco


def get_source(kind: str) -> SourceFn:
    try:
        return SOURCES[kind]
    except KeyError:
        raise unknown_name("source kind", kind, SOURCES) from None


def read_source(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    return get_source(cfg.kind)(cfg, root=root)


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text[:200]


def _resolve(cfg: SourceConfig, root: Path) -> Path:
    if not cfg.path:
        raise ConfigError(f"source {cfg.name!r} ({cfg.kind}) needs a 'path'")
    path = Path(cfg.path)
    path = path if path.is_absolute() else root / path
    if not path.exists():
        raise ConfigError(f"source {cfg.name!r}: file not found: {path}")
    return path


def iter_jsonl(path: Path, *, source: str) -> Iterator[tuple[str, dict[str, Any]] | RawReject]:
    """Yield ``(source_id, object)`` per non-blank line, or a reject for a line that is not
    UTF-8, not JSON or not an object. Reads bytes so one bad line never stops the file."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            sid = f"{path.name}:{lineno}"
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RawReject(source, sid, "not_utf8", str(exc), raw[:200].decode("utf-8", "replace"))
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                yield RawReject(source, sid, "malformed_json", str(exc), line[:200])
                continue
            if not isinstance(obj, dict):
                yield RawReject(source, sid, "not_an_object", f"JSON {type(obj).__name__}, expected an object", line[:200])
                continue
            yield sid, obj


@register("gsm8k")
def gsm8k(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """GSM8K JSONL (``question``, ``answer`` with the gold after ``####``)."""
    for item in iter_jsonl(_resolve(cfg, root), source=cfg.name):
        if isinstance(item, RawReject):
            yield item
            continue
        sid, obj = item
        answer = obj.get("answer")
        yield RawRow(
            cfg.name, sid, obj.get("question"), answer=answer, solution=answer, gold_from="gsm8k",
            split=cfg.split, excerpt=_excerpt(obj.get("question")),
        )


@register("math")
def math(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """MATH JSONL (``problem``, ``solution`` with the gold in the last ``\\boxed{}``, ``level``, ``type``)."""
    for item in iter_jsonl(_resolve(cfg, root), source=cfg.name):
        if isinstance(item, RawReject):
            yield item
            continue
        sid, obj = item
        yield RawRow(
            cfg.name, sid, obj.get("problem"), solution=obj.get("solution"), gold_from="boxed",
            split=cfg.split, subject=obj.get("type", obj.get("subject")), level=obj.get("level"),
            excerpt=_excerpt(obj.get("problem")),
        )


class MappedOptions(Model):
    gold_from: str = Field("answer", description="answer | gsm8k | boxed")
    config: str | None = Field(None, description="hf: dataset config name")
    hf_split: str = Field("train", description="hf: split to load")


def _mapping(cfg: SourceConfig) -> tuple[dict[str, str], MappedOptions]:
    opts = parse_options(MappedOptions, cfg.options, where=f"source {cfg.name!r} options")
    if opts.gold_from not in GOLD_FROM:
        raise ConfigError(f"source {cfg.name!r}: gold_from {opts.gold_from!r} not one of {GOLD_FROM}")
    if unknown := sorted(set(cfg.mapping) - set(PROBLEM_FIELDS)):
        raise ConfigError(f"source {cfg.name!r}: mapping has unknown fields {unknown}; allowed: {PROBLEM_FIELDS}")
    mapping = {f: cfg.mapping.get(f, f) for f in PROBLEM_FIELDS}
    return mapping, opts


def _mapped_row(cfg: SourceConfig, sid: str, obj: dict[str, Any], mapping: dict[str, str], opts: MappedOptions) -> RawRow:
    rid = obj.get(mapping["id"])
    used = set(mapping.values())
    extra = {k: v for k, v in obj.items() if k not in used and isinstance(v, str | int | float | bool | None)}
    return RawRow(
        cfg.name, str(rid) if rid is not None else sid, obj.get(mapping["question"]),
        answer=obj.get(mapping["answer"]), solution=obj.get(mapping["solution"]), gold_from=opts.gold_from,
        split=cfg.split, subject=obj.get(mapping["subject"]), level=obj.get(mapping["level"]),
        metadata=extra, excerpt=_excerpt(obj.get(mapping["question"])),
    )


def _check_columns(cfg: SourceConfig, columns: list[str], mapping: dict[str, str], opts: MappedOptions) -> None:
    needed = [mapping["question"], mapping["solution"] if opts.gold_from == "boxed" else mapping["answer"]]
    if missing := [c for c in needed if c not in columns]:
        raise ConfigError(
            f"source {cfg.name!r}: columns {missing} not found (have {columns}); set 'mapping' in params.yaml"
        )


@register("jsonl")
def jsonl(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """Any JSONL file; ``mapping`` names the columns (question, answer, solution, id, subject, level)."""
    mapping, opts = _mapping(cfg)
    for item in iter_jsonl(_resolve(cfg, root), source=cfg.name):
        if isinstance(item, RawReject):
            yield item
            continue
        sid, obj = item
        yield _mapped_row(cfg, sid, obj, mapping, opts)


@register("parquet")
def parquet(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """A Parquet file (or a directory of them) with a column ``mapping``."""
    import pyarrow.dataset as ds

    mapping, opts = _mapping(cfg)
    path = _resolve(cfg, root)
    dataset = ds.dataset(path, format="parquet")
    _check_columns(cfg, dataset.schema.names, mapping, opts)
    n = 0
    for batch in dataset.to_batches():
        for obj in batch.to_pylist():
            yield _mapped_row(cfg, f"{path.name}:{n}", obj, mapping, opts)
            n += 1


@register("hf")
def hf(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """``datasets.load_dataset(path, options.config, split=options.hf_split)``: a Hub name or a local folder."""
    import datasets

    mapping, opts = _mapping(cfg)
    if not cfg.path:
        raise ConfigError(f"source {cfg.name!r} (hf) needs a 'path': a Hub dataset name or a local folder")
    local = root / cfg.path
    name = str(local) if local.exists() else cfg.path
    try:
        data = datasets.load_dataset(name, opts.config, split=opts.hf_split)
    except Exception as exc:  # datasets raises many types; all mean "could not load"
        raise ConfigError(f"source {cfg.name!r}: load_dataset({name!r}) failed: {exc}") from exc
    _check_columns(cfg, list(data.column_names), mapping, opts)
    for i, obj in enumerate(data):
        yield _mapped_row(cfg, f"{opts.hf_split}:{i}", obj, mapping, opts)


@register("synthetic")
def synthetic(cfg: SourceConfig, *, root: Path) -> Iterator[Record]:
    """Seeded arithmetic of graded difficulty (see :mod:`pipeline.ingest.synthetic`)."""
    from pipeline.ingest.synthetic import SyntheticOptions, generate

    opts = parse_options(SyntheticOptions, cfg.options, where=f"source {cfg.name!r} options")
    for i, item in enumerate(generate(opts)):
        yield RawRow(
            cfg.name, f"{item.level}:{i}", item.question, answer=item.answer, solution=item.solution,
            split=cfg.split, subject=item.skill, level=item.level, excerpt=item.question[:200],
        )
