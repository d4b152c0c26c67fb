"""How a source file is read, for the source kinds of :mod:`pipeline.ingest.sources` (one file a kind there).

JSON lines through the bounded line reader (a UTF-16, gzip or Parquet file named for what it is), Parquet in bounded
batches (a column chunk that would decompress into a bomb refused unread), a Hub dataset's Arrow batches, and a
field ``mapping`` (or a preset's) onto problem rows. Every helper yields :class:`RawRow` or :class:`RawReject`; a
file that cannot be read at all is a :class:`SourceError` naming it, raised before anything is written.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import reprlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import Field

from pipeline.config import ConfigError, Model, SourceConfig, parse_options
from pipeline.errors import PassbandError
from pipeline.ingest import arrow_rows, paths
from pipeline.ingest.arrow_rows import ValueCap
from pipeline.ingest.presets import Preset, get_preset
from pipeline.ingest.records import Limits, RawReject, RawRow
from pipeline.io import bounded_lines

Record = RawRow | RawReject


class SourceError(PassbandError):
    """A source file that cannot be read as its kind (nothing has been written when it is raised)."""


PROBLEM_FIELDS = ("id", "question", "answer", "solution", "subject", "level", "source_difficulty")
GOLD_FROM = ("answer", "gsm8k", "boxed")
PARQUET_BATCH_ROWS = 1_024
PARQUET_BATCH_BYTES = 16 << 20  # a Parquet batch's decoded size, from the row group's footer, before decoding
# A column chunk that decompresses past both is refused unread: its pages' size is not in the footer, and one page
# of 384 MB plain values compressed 25,800x into 15 kB (the file) took 650 MB to read ten rows.
BOMB_BYTES, BOMB_RATIO = 256 << 20, 100


_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother, _repr.maxlong = 3, 200, 200, 200


def excerpt(value: Any) -> str:
    """At most 200 characters of a field; a non-string through a bounded repr (never deep, never whole)."""
    text = value[:200] if isinstance(value, str) else _repr.repr(value)
    return text[:200]


def resolve_path(cfg: SourceConfig, root: Path, *, file: bool = False) -> Path:
    if not cfg.path:
        raise ConfigError(f"source {cfg.name!r} ({cfg.kind}) needs a 'path'")
    path = Path(cfg.path)
    path = path if path.is_absolute() else root / path
    if not path.exists():
        raise ConfigError(f"source {cfg.name!r}: file not found: {path}")
    if file and not path.is_file():
        raise ConfigError(f"source {cfg.name!r}: {path} is not a file; give the path of one {cfg.kind} file")
    return path


_FOREIGN = [(codecs.BOM_UTF16_LE, "UTF-16 text (convert it: iconv -f UTF-16 -t UTF-8)"),
            (codecs.BOM_UTF16_BE, "UTF-16 text (convert it: iconv -f UTF-16 -t UTF-8)"),
            (b"\x1f\x8b", "gzip-compressed (decompress it first: gunzip)"),
            (b"PAR1", "a Parquet file (use kind: parquet)")]


def iter_jsonl(path: Path, *, source: str, max_line_bytes: int = Limits.max_line_bytes,
               ) -> Iterator[tuple[str, dict[str, Any]] | RawReject]:
    """Yield ``(source_id, object)`` per non-blank line, or a reject for a line that is too long, not
    UTF-8, not JSON, nested too deep or not an object. Reads bytes in bounded pieces, so one bad or
    huge line never stops the file nor is held whole; a UTF-8 byte-order mark is ignored. A file that
    is compressed, UTF-16 or has no rows is a :class:`SourceError`."""
    rows = 0
    try:
        with path.open("rb") as fh:
            start = fh.read(4)
            for magic, what in _FOREIGN:
                if start.startswith(magic):
                    raise SourceError(f"source {source!r}: {path} is {what}, not JSON lines")
            fh.seek(len(codecs.BOM_UTF8) if start.startswith(codecs.BOM_UTF8) else 0)
            for lineno, (raw, size, too_long) in enumerate(bounded_lines(fh, max_line_bytes), start=1):
                sid = f"{path.name}:{lineno}"
                if too_long:
                    rows += 1
                    yield RawReject(source, sid, "line_too_long",
                                    f"the line has {size:,} bytes (limit ingest.max_line_bytes = {max_line_bytes:,})",
                                    raw.decode("utf-8", "replace"))
                    continue
                if not raw.strip():
                    continue
                rows += 1
                yield _parse(raw, source, sid)
    except OSError as exc:
        raise SourceError(f"source {source!r}: cannot read {path}: {exc.strerror or exc}") from None
    if not rows:
        raise SourceError(f"source {source!r}: {path} has no rows (the file is empty or blank); "
                          "check the path, or remove the source from params.yaml")


def _parse(raw: bytes, source: str, sid: str) -> tuple[str, dict[str, Any]] | RawReject:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RawReject(source, sid, "not_utf8", str(exc), raw[:200].decode("utf-8", "replace"))
    try:
        obj = json.loads(line)
    except RecursionError:
        return RawReject(source, sid, "too_deep", "the JSON nests deeper than the parser's recursion limit", line[:200])
    except ValueError as exc:  # JSONDecodeError, or an integer over 4,300 digits
        return RawReject(source, sid, "malformed_json", str(exc), line[:200])
    if not isinstance(obj, dict):
        return RawReject(source, sid, "not_an_object", f"JSON {type(obj).__name__}, expected an object", line[:200])
    return sid, obj


def mapped_jsonl(cfg: SourceConfig, root: Path, limits: Limits, to_row: Callable[[str, dict], RawRow]
                 ) -> Iterator[Record]:
    """The source's JSON lines file (``path``, under ``limits``' line cap), each object through ``to_row``."""
    return mapped(cfg, iter_jsonl(resolve_path(cfg, root, file=True), source=cfg.name,
                                  max_line_bytes=limits.max_line_bytes), to_row)


def mapped(cfg: SourceConfig, items: Iterator, to_row: Callable[[str, dict], RawRow]) -> Iterator[Record]:
    """``to_row`` on each ``(sid, object)`` of ``items``; a mapping that raises is that row's ``bad_row`` reject."""
    for item in items:
        if isinstance(item, RawReject):
            yield item
            continue
        sid, obj = item
        try:
            row: Record = to_row(sid, obj)
        except Exception as exc:  # RecursionError on a deep value, a huge int's str()...: this row only
            row = RawReject(cfg.name, sid, "bad_row", f"{type(exc).__name__}: {str(exc)[:300]}", "")
        yield row


class MappedOptions(Model):
    gold_from: str = Field("answer", description="answer | gsm8k | boxed")
    config: str | None = Field(None, description="hf: dataset config name")
    hf_split: str = Field("train", description="hf: split to load")


@dataclass(frozen=True)
class Mapping:
    """A mapped source's reading rules: its preset (if any) with the source's own mapping and options over it."""

    fields: dict[str, str]  # problem field -> column path
    opts: MappedOptions
    preset: Preset | None = None

    @property
    def kept(self) -> tuple[str, ...] | None:
        """The column paths kept in metadata (None: every top-level scalar column not mapped)."""
        return self.preset.metadata if self.preset else None


def field_mapping(cfg: SourceConfig) -> Mapping:
    preset = get_preset(cfg.preset) if cfg.preset else None
    options = dict(cfg.options)
    if preset:
        options.setdefault("gold_from", preset.gold_from)
        options.setdefault("hf_split", preset.split)
        if preset.config and not _is_local(cfg):
            options.setdefault("config", preset.config)
    opts = parse_options(MappedOptions, options, where=f"source {cfg.name!r} options")
    if opts.gold_from not in GOLD_FROM:
        raise ConfigError(f"source {cfg.name!r}: gold_from {opts.gold_from!r} not one of {GOLD_FROM}")
    if unknown := sorted(set(cfg.mapping) - set(PROBLEM_FIELDS)):
        raise ConfigError(f"source {cfg.name!r}: mapping has unknown fields {unknown}; allowed: {PROBLEM_FIELDS}")
    given = {**(preset.mapping if preset else {}), **cfg.mapping}
    for path in given.values():
        paths.parse(path)  # a malformed path is a ConfigError before any row is read
    return Mapping({f: given.get(f, f) for f in PROBLEM_FIELDS}, opts, preset)


def _is_local(cfg: SourceConfig) -> bool:
    return cfg.kind != "hf" or bool(cfg.path and not _looks_like_hub_id(cfg.path))


def _looks_like_hub_id(path: str) -> bool:
    return path.count("/") == 1 and not path.startswith((".", "/")) and not Path(path).suffix


def _question_of(obj: dict[str, Any], m: Mapping) -> Any:
    q = paths.get(obj, m.fields["question"])
    if m.preset and isinstance(q, str):
        if m.preset.strip_prefix and q.startswith(m.preset.strip_prefix):
            q = q[len(m.preset.strip_prefix):]
        if m.preset.strip_suffix and q.endswith(m.preset.strip_suffix):
            q = q[:-len(m.preset.strip_suffix)]
    return q


def _answer_of(obj: dict[str, Any], m: Mapping) -> tuple[Any, list | None]:
    """The gold as read, and the other acceptable golds of a preset whose list gold lists alternatives."""
    ans = paths.get(obj, m.fields["answer"])
    if m.preset and m.preset.gold_json and isinstance(ans, str) and ans.lstrip().startswith("["):
        with contextlib.suppress(ValueError):  # not JSON after all: the text is the gold, checked as any other
            ans = json.loads(ans)
    if m.preset and m.preset.gold_list == "alternatives" and isinstance(ans, list) and ans:
        return ans[0], ans[1:] or None  # any one of them is a right answer: the first is the gold
    return ans, None  # a list gold here follows the ingest rules (json_gold): a tuple, or its one element


def _no_gold(ans: Any, m: Mapping) -> bool:
    """Whether ``ans`` is one of the preset's "no gold" markers (NuminaMath's ``proof``, ``notfound``)."""
    return bool(m.preset and isinstance(ans, str) and ans.strip().lower() in m.preset.no_gold)


def mapped_row(cfg: SourceConfig, sid: str, obj: dict[str, Any], m: Mapping) -> Record:
    mapping = m.fields
    rid = paths.get(obj, mapping["id"])
    answer, alternatives = _answer_of(obj, m)
    if _no_gold(answer, m):
        return RawReject(cfg.name, str(rid) if rid is not None else sid, "missing_gold",
                         f"answer {answer.strip()!r} is {m.preset.name}'s marker for an item without a gold",
                         excerpt(_question_of(obj, m)))
    if m.kept is None:
        used = set(mapping.values())
        extra = {k: v for k, v in obj.items() if k not in used and isinstance(v, str | int | float | bool | None)}
    else:
        extra = {p: v for p in m.kept if (v := paths.get(obj, p)) is not None}
    if alternatives:
        extra["gold_alternatives"] = alternatives
    question = _question_of(obj, m)
    difficulty = paths.get(obj, mapping["source_difficulty"])
    return RawRow(
        cfg.name, str(rid) if rid is not None else sid, question,
        answer=answer, solution=paths.get(obj, mapping["solution"]), gold_from=m.opts.gold_from,
        split=cfg.split, subject=paths.get(obj, mapping["subject"]), level=paths.get(obj, mapping["level"]),
        metadata=extra, excerpt=excerpt(question),
        source_difficulty=difficulty,
        source_difficulty_measure=(m.preset.difficulty_measure if m.preset and "source_difficulty" not in cfg.mapping
                                   else mapping["source_difficulty"]) if difficulty is not None else None,
    )


def check_columns(cfg: SourceConfig, columns: list[str], m: Mapping) -> None:
    needed = [m.fields["question"], m.fields["solution"] if m.opts.gold_from == "boxed" else m.fields["answer"]]
    if missing := [c for c in needed if paths.top_key(c, dict.fromkeys(columns)) not in columns]:
        raise ConfigError(
            f"source {cfg.name!r}: columns {missing} not found (have {columns}); set 'mapping' in params.yaml"
            + (f" (preset {cfg.preset!r} expects the layout of {m.preset.hub})" if m.preset else "")
        )


def damaged(cfg: SourceConfig, path: Path, exc: BaseException, n: int) -> SourceError:
    why = " ".join(str(exc).split())
    why = why[:197] + "..." if len(why) > 200 else why
    where = f" after {n:,} rows" if n else ""
    return SourceError(f"source {cfg.name!r}: {path} is not a readable Parquet file{where} ({why}); "
                       "replace it with an intact copy (nothing was written)")


def _caps(m: Mapping, limits: Limits) -> list[ValueCap]:
    """The fields whose cap holds on the raw value, in the core's order (applied where the field's mapping names a
    text column of the batch)."""
    wrapper = len(m.preset.strip_prefix) + len(m.preset.strip_suffix) if m.preset else 0  # stripped before the cap
    rules = [("question", limits.max_question_chars + wrapper, "question_too_long", "max_question_chars"),
             ("solution", limits.max_solution_chars, "solution_too_long", "max_solution_chars"),
             ("id", limits.max_field_chars, "field_too_long", "max_field_chars"),
             ("subject", limits.max_field_chars, "field_too_long", "max_field_chars"),
             ("level", limits.max_field_chars, "field_too_long", "max_field_chars")]
    return [ValueCap(m.fields[f], cap, reason, f, knob) for f, cap, reason, knob in rules]


_SCALARS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_floating,
            pa.types.is_boolean, pa.types.is_null)


def read_columns(schema: pa.Schema, m: Mapping) -> list[str]:
    """The top-level columns a row needs: the mapped ones, and those kept in metadata (without a preset's list:
    every column of a type that becomes a str, int, float, bool or None, the values ``mapped_row`` keeps)."""
    names = schema.names
    mapped = {paths.top_key(p, dict.fromkeys(names)) for p in m.fields.values()}
    if m.kept is None:
        def scalar(t: pa.DataType) -> bool:
            return any(is_(t.value_type if pa.types.is_dictionary(t) else t) for is_ in _SCALARS)
        kept = {f.name for f in schema if scalar(f.type)}
    else:
        kept = {paths.top_key(p, dict.fromkeys(names)) for p in m.kept}
    return [n for n in names if n in mapped | kept]


def record_rows(cfg: SourceConfig, batches: Iterable[pa.RecordBatch], m: Mapping, limits: Limits,
                sid: Callable[[int], str]) -> Iterator[Record]:
    """The rows of ``batches`` through the mapping, each value measured on the Arrow arrays first
    (:mod:`pipeline.ingest.arrow_rows`): one over its cap is a reject before it becomes a Python object."""
    metadata = ValueCap("", limits.max_metadata_chars, "field_too_long", "the extra columns (metadata)",
                        "max_metadata_chars")
    items = arrow_rows.rows(batches, source=cfg.name, sid=sid, caps=_caps(m, limits),
                            max_row_bytes=limits.max_line_bytes, question=m.fields["question"],
                            id_column=m.fields["id"], others=metadata, mapped=frozenset(m.fields.values()))
    return mapped(cfg, items, lambda s, obj: mapped_row(cfg, s, obj, m))


def parquet_batches(cfg: SourceConfig, files: Path | list[str], m: Mapping) -> Iterator[pa.RecordBatch]:
    """The record batches of a Parquet file, folder or file list, row group by row group. Only the columns a row
    needs are read; text columns are read as dictionaries, so a value stored once and repeated is held once
    (decoding a dictionary page densely would copy it into every row). A batch holds at most PARQUET_BATCH_ROWS
    rows and, by the row group's own footer (its columns' uncompressed bytes per row), about
    PARQUET_BATCH_BYTES: the budget is known before anything is decoded, so 256 distinct 1.5 MB values that
    compress to 15 kB are read ten at a time, not 1,024 (1.4 GB)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    found = ds.dataset(files, format="parquet")
    schema = found.schema
    check_columns(cfg, schema.names, m)
    columns = read_columns(schema, m)
    text = [c for c in columns if pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type)
            or pa.types.is_binary(schema.field(c).type)]
    paths_ = list(found.files)

    def batches() -> Iterator[pa.RecordBatch]:
        for path in paths_:
            md = pq.read_metadata(path)
            wanted = [i for i in range(md.num_columns) if md.schema.column(i).path.split(".")[0] in columns]
            chunks = [(md.row_group(g), md.row_group(g).column(i)) for g in range(md.num_row_groups) for i in wanted]
            for _, c in chunks:
                if c.total_uncompressed_size > BOMB_BYTES and c.total_uncompressed_size > BOMB_RATIO * c.total_compressed_size:
                    raise SourceError(
                        f"source {cfg.name!r}: {path}: column {c.path_in_schema!r} decompresses to "
                        f"{c.total_uncompressed_size:,} bytes from {c.total_compressed_size:,} "
                        f"({c.total_uncompressed_size // max(c.total_compressed_size, 1):,}x): refused unread as a "
                        "compression bomb (nothing was written)")
            # as dictionaries only the text columns stored as dictionaries in every row group: a dictionary built
            # from plain pages would hold every distinct value of the row group at once
            stored = {c.path_in_schema for _, c in chunks if not c.has_dictionary_page}
            with pq.ParquetFile(path, read_dictionary=[c for c in text if c not in stored]) as pf:
                for g in range(md.num_row_groups):
                    rg = md.row_group(g)
                    if rg.num_rows == 0:
                        continue
                    size = sum(rg.column(i).total_uncompressed_size for i in wanted)
                    rows = max(1, min(PARQUET_BATCH_ROWS, PARQUET_BATCH_BYTES * rg.num_rows // max(size, 1)))
                    yield from pf.iter_batches(batch_size=rows, row_groups=[g], columns=columns)
    return batches()


def guarded(cfg: SourceConfig, path: Path, batches: Iterator[pa.RecordBatch], counter: list[int],
             ) -> Iterator[pa.RecordBatch]:
    """``batches``, with a read error anywhere (a damaged page) as the source's one-line :class:`SourceError`."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise damaged(cfg, path, exc, counter[0]) from None
        counter[0] += batch.num_rows
        yield batch


