"""Import a policy's completions from a dump: the rollout stage's path for a policy with ``dump`` in params.yaml.

The dump is streamed (JSON lines in bounded pieces, Parquet in batches), never held whole; each row goes through
its layout (:mod:`pipeline.rollout.layout`) into records, each record is matched to one of the selected problems
(by normalised question text, passband problem id or source id: ``dump.match``) and its samples are numbered
0, 1, ... in the dump's order. What cannot be read or matched is a reject row of the rollout stage with its
reason (``no_match``, ``duplicate``, ``missing_field``, ``too_many_samples``, ``empty``, ``not_utf8`` ...), never
dropped; rows a layout leaves out on purpose (another policy's, another step's) are counted as ``skipped``.

Written like generated rollouts, shard by shard (``imp-<policy_id>-<seq>.parquet``, at most ``SHARD_ROWS``
samples or ``SHARD_BYTES`` of text each), with the dump's own correctness of each sample in the rollouts'
``upstream/`` table and the import's state (where in the file it is, the problems matched so far) in
``imports/<policy_id>.json``, written after each shard. So an import that is stopped resumes after its last
shard (a shard written after the last state is an orphan, removed), a finished one is not read again, and a dump
that grew by appending (its old bytes unchanged: the state's prefix digest) is read for its new rows only: its
policy_id changes with its digest, so the earlier rows' shards are copied under the new id, not parsed again, and
the superseded version's shards are removed (their verdicts are graded again under the new id).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import keys
from pipeline.config import MAX_K, ConfigError
from pipeline.errors import PassbandError
from pipeline.io import atomic_write_text, bounded_lines, read_shard, shard_paths, write_table
from pipeline.rollout.layout import DumpRecord, Layout, LayoutError, get_layout
from pipeline.rollout.policy import Policy
from pipeline.schema import schema
from pipeline.tablesets import UPSTREAM

SHARD_ROWS = 50_000
SHARD_BYTES = 64 << 20
PARQUET_BATCH_BYTES = 16 << 20
PROBE_ROWS = 200  # none of the first rows readable as the layout: the wrong layout, an error before any write
STATE_VERSION = 1
UPSTREAM_DIR = UPSTREAM
IMPORTS_DIR = "imports"


class DumpError(PassbandError):
    """A dump that cannot be imported as declared (nothing of this import has been written when it is raised)."""


@dataclass
class ImportStats:
    policy: str
    path: str
    rows: int = 0
    records: int = 0
    samples: int = 0
    skipped_rows: int = 0
    rejects: Counter = field(default_factory=Counter)
    problems: int = 0
    upstream: int = 0
    shards: int = 0
    resumed_at: int = 0
    carried: int = 0  # samples of an earlier, shorter version of the dump, copied under the new policy_id
    up_to_date: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "path": self.path, "rows": self.rows, "records": self.records,
                "samples": self.samples, "skipped_rows": self.skipped_rows, "rejects": dict(sorted(self.rejects.items())),
                "problems": self.problems, "upstream": self.upstream, "shards": self.shards,
                "resumed_at": self.resumed_at, "carried": self.carried, "up_to_date": self.up_to_date,
                "seconds": round(self.seconds, 3)}


# --- reading rows ----------------------------------------------------------------------------------

def _jsonl_rows(path: Path, *, start: int, line: int, max_bytes: int) -> Iterator[tuple[int, int, Any]]:
    """``(offset after the row, line number, object | (reason, detail, excerpt))`` per non-blank line from byte
    ``start``; a line is read in bounded pieces (one over ``max_bytes`` is a reject, the rest skipped unkept)."""
    with path.open("rb") as fh:
        if start == 0:
            head = fh.read(4)
            if head.startswith(b"\x1f\x8b"):
                raise DumpError(f"{path} is gzip-compressed; decompress it first (gunzip)")
            if head.startswith(b"PAR1"):
                raise DumpError(f"{path} is a Parquet file; this layout reads JSON lines")
            fh.seek(3 if head.startswith(b"\xef\xbb\xbf") else 0)
        else:
            fh.seek(start)
        for raw, size, too_long in bounded_lines(fh, max_bytes):
            line += 1
            offset = fh.tell()
            if too_long:
                yield offset, line, ("line_too_long", f"the line has {size:,} bytes (dump.max_row_mb: "
                                                      f"{max_bytes >> 20} MB)", "")
                continue
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    yield offset, line, ("not_utf8", str(bad), raw[:200].decode("utf-8", "replace"))
                    continue
                yield offset, line, ("malformed_json", str(exc), raw[:200].decode("utf-8", "replace"))
                continue
            if not isinstance(obj, dict):
                yield offset, line, ("not_an_object", f"JSON {type(obj).__name__}, expected an object", "")
                continue
            yield offset, line, obj


def _parquet_rows(path: Path, *, start: int) -> Iterator[tuple[int, int, Any]]:
    """``(rows read after this one, row number, object)`` per row from row ``start``, in batches of about
    PARQUET_BATCH_BYTES decoded (from each row group's footer), never the whole file."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DumpError(f"{path}: not a readable Parquet file ({exc})") from None
    seen = 0
    for g in range(pf.metadata.num_row_groups):
        rg = pf.metadata.row_group(g)
        if seen + rg.num_rows <= start:
            seen += rg.num_rows
            continue
        per_row = max(1, rg.total_byte_size // max(1, rg.num_rows))
        batch = max(1, min(rg.num_rows, PARQUET_BATCH_BYTES // per_row))
        for b in pf.iter_batches(batch_size=batch, row_groups=[g]):
            for obj in b.to_pylist():
                seen += 1
                if seen > start:
                    yield seen, seen, obj


def dump_rows(path: Path, fmt: str, *, start: int = 0, line: int = 0, max_bytes: int = 64 << 20):
    if fmt == "parquet":
        return _parquet_rows(path, start=start)
    return _jsonl_rows(path, start=start, line=line, max_bytes=max_bytes)


# --- matching ------------------------------------------------------------------------------------------

class Matcher:
    """A record's problem among the selected ones (``dump.match``): its problem_id, or why none."""

    def __init__(self, problems: pa.Table, how: str) -> None:
        self.how = how
        ids = problems.column("problem_id").to_pylist()
        self.ids = set(ids)
        self.by_source: dict[str, str | None] = {}
        if how == "source_id":
            for pid, sid in zip(ids, problems.column("source_id").to_pylist(), strict=True):
                self.by_source[sid] = None if sid in self.by_source else pid  # None: two problems share it

    def __call__(self, rec: DumpRecord) -> str:
        value = rec.match_value(self.how)
        if value is None:
            raise LayoutError("missing_field", f"the row gives no {self.how} to match on (dump.match: {self.how})")
        if self.how == "question":
            pid = keys.problem_id(value)
        elif self.how == "problem_id":
            pid = value
        else:
            if value in self.by_source and self.by_source[value] is None:
                raise LayoutError("ambiguous", f"source_id {value!r} names two selected problems; match on question")
            pid = self.by_source.get(value, "")
        if pid not in self.ids:
            raise LayoutError("no_match", f"no selected problem (ingested, in rollout.sources) has this {self.how}")
        return pid


# --- state ----------------------------------------------------------------------------------------------------

def _prefix_sha256(path: Path, size: int) -> str:
    h = hashlib.sha256()
    left = size
    with path.open("rb") as fh:
        while left > 0 and (block := fh.read(min(1 << 20, left))):
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else None


def _earlier_version(imports: Path, policy: Policy, dump: Path) -> dict[str, Any] | None:
    """The state of a finished import of this policy name from a shorter version of the same file (its bytes a
    prefix of the dump's now, same layout, options and match)."""
    size = dump.stat().st_size
    same = {k: v for k, v in policy.identity["dump"].items() if k != "sha256"}
    for p in sorted(imports.glob("*.json")):
        st = _read_state(p)
        if (not st or st.get("policy") != policy.name or st["policy_id"] == policy.policy_id or not st.get("done")
                or st.get("dump") != same or st.get("format") == "parquet" or not 0 < st["offset"] <= size):
            continue
        if _prefix_sha256(dump, st["offset"]) == st["prefix_sha256"]:
            return st
    return None


# --- the import ---------------------------------------------------------------------------------------------

class _Buffer:
    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in ("problem_id", "sample_idx", "completion", "n_tokens",
                                                      "finish_reason", "upstream")}
        self.rejects: list[dict[str, Any]] = []
        self.text_bytes = 0

    def __len__(self) -> int:
        return len(self.cols["problem_id"])


def _count_tokens(tokenizer: Any, texts: list[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def import_dump(policy: Policy, problems: pa.Table, *, out: Path, rejects_dir: Path, progress: Any = None,
                shard_rows: int = SHARD_ROWS, shard_bytes: int = SHARD_BYTES) -> ImportStats:
    """Import ``policy``'s dump into the rollouts folder ``out`` (see the module doc). ``progress``: a tqdm bar
    updated with bytes (JSON lines) or rows (Parquet) read."""
    t0 = time.perf_counter()
    cfg, dump = policy.dump, policy.dump_path
    if cfg is None or dump is None:
        raise ConfigError(f"policy {policy.name!r} has no dump to import")
    layout: Layout = get_layout(cfg.layout)(cfg.options, where=f"policies.{policy.name}.dump.options")
    fmt = layout.file_format
    stats = ImportStats(policy=policy.name, path=str(dump))
    upstream_dir, imports = out / UPSTREAM_DIR, out / IMPORTS_DIR
    for d in (upstream_dir, imports, rejects_dir):
        d.mkdir(parents=True, exist_ok=True)
    state_path = imports / f"{policy.policy_id}.json"
    prefix = f"imp-{policy.policy_id}-"
    state = _read_state(state_path) or {"version": STATE_VERSION, "policy": policy.name,
                                        "policy_id": policy.policy_id, "format": fmt,
                                        "dump": {k: v for k, v in policy.identity["dump"].items() if k != "sha256"},
                                        "offset": 0, "line": 0, "seq": 0, "seen": {}, "counters": {},
                                        "done": False, "stats": {}}
    # shards past the state are an interrupted import's: written, never recorded; they are written again
    for d in (out, upstream_dir, rejects_dir):
        for p in d.glob(f"{prefix}*.parquet"):
            if int(p.stem.rsplit("-", 1)[1]) >= state["seq"]:
                p.unlink()
    if state["done"]:
        stats.up_to_date = True
        stats.samples = state["stats"].get("samples", 0)
        stats.seconds = time.perf_counter() - t0
        return stats
    if state["offset"] == 0 and state["seq"] == 0 and (old := _earlier_version(imports, policy, dump)) is not None:
        folders = {"rollouts": out, "upstream": upstream_dir, "rejects": rejects_dir}
        stats.carried = _carry(old, policy, prefix=prefix, folders=folders)
        state.update(offset=old["offset"], line=old["line"], seen=old["seen"], counters=old["counters"], seq=old["seq"],
                     stats={"samples": stats.carried})
        _write_state(state_path, state, dump)
        _drop(old, folders, imports)  # after the new state: a crash in between leaves both versions, never neither
    stats.resumed_at = state["offset"]
    matcher = Matcher(problems, cfg.match)
    tokenizer = None
    if cfg.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer, local_files_only=True)
    seen: dict[str, int] = state["seen"]  # grouped layouts: problem_id -> the row that matched it
    counters: dict[str, int] = state["counters"]  # problem_id -> samples so far
    buf = _Buffer()
    readable = 0
    last = state["offset"]
    where = dump.name

    def reject(row: int, reason: str, detail: str, excerpt: str = "") -> None:
        stats.rejects[reason] += 1
        buf.rejects.append({"stage": "rollout", "source": f"dump:{policy.name}", "source_id": f"{where}:{row}",
                            "reason": reason, "detail": f"policy {policy.name}: {detail}"[:1000],
                            "excerpt": excerpt[:200]})

    def flush(offset: int, line: int, *, done: bool = False) -> None:
        seq = state["seq"]
        n = len(buf)
        if n:
            c = buf.cols
            counts = c["n_tokens"]
            if tokenizer is not None:
                missing = [i for i, v in enumerate(counts) if v is None]
                for i, k in zip(missing, _count_tokens(tokenizer, [c["completion"][i] for i in missing]), strict=True):
                    counts[i] = k
            table = pa.table({
                "problem_id": pa.array(c["problem_id"], pa.string()),
                "policy_id": pa.array([policy.policy_id] * n, pa.string()),
                "sample_idx": pa.array(c["sample_idx"], pa.int64()),
                "seed": pa.nulls(n, pa.int64()),  # passband did not sample these
                "completion": pa.array(c["completion"], pa.string()),
                "n_tokens": pa.array(counts, pa.int64()),
                "finish_reason": pa.array(c["finish_reason"], pa.string()),
            })
            write_table(table, out / f"{prefix}{seq:06d}.parquet", name="rollouts")
            up = pa.array(c["upstream"], pa.bool_())
            if up.null_count < n:
                keep = pc.is_valid(up)
                write_table(pa.table({"problem_id": table["problem_id"], "policy_id": table["policy_id"],
                                      "sample_idx": table["sample_idx"], "upstream_correct": up}).filter(keep),
                            upstream_dir / f"{prefix}{seq:06d}.parquet", name="upstream")
                stats.upstream += n - up.null_count
            stats.shards += 1
        if buf.rejects:
            write_table(schema("rejects").from_rows(buf.rejects), rejects_dir / f"{prefix}{seq:06d}.parquet",
                        name="rejects")
        if n or buf.rejects:
            state["seq"] = seq + 1
        state.update(offset=offset, line=line, done=done)
        state["stats"] = {"samples": state["stats"].get("samples", 0) + n}
        _write_state(state_path, state, dump, whole=policy.identity["dump"]["sha256"])
        buf.__init__()

    line = state["line"]
    for offset, line, obj in dump_rows(dump, fmt, start=state["offset"], line=state["line"],
                                       max_bytes=cfg.max_row_mb << 20):
        stats.rows += 1
        if progress is not None:
            progress.update(offset - last)
        last = offset
        if isinstance(obj, tuple):
            reject(line, *obj)
        else:
            try:
                records = list(layout.read(obj))
            except LayoutError as exc:
                if exc.reason.startswith("several_"):
                    raise DumpError(f"policy {policy.name!r}: {dump}: {exc}") from None
                reject(line, exc.reason, str(exc), _excerpt(obj))
                records = None
            except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a layout surprised by a value
                reject(line, "bad_row", f"{type(exc).__name__}: {str(exc)[:300]}", _excerpt(obj))
                records = None
            if records is not None:
                readable += 1
                if not records:
                    stats.skipped_rows += 1
                for rec in records:
                    _add(rec, line, matcher=matcher, layout=layout, seen=seen, counters=counters, buf=buf,
                         stats=stats, reject=reject)
        if stats.rows == PROBE_ROWS and readable == 0 and state["seq"] == 0 and state["offset"] == 0:
            first = next(iter(buf.rejects), {"detail": ""})["detail"]
            raise DumpError(f"policy {policy.name!r}: none of the first {PROBE_ROWS} rows of {dump} reads as layout "
                            f"{cfg.layout!r} (first: {first}); is dump.layout right?")
        if len(buf) >= shard_rows or buf.text_bytes >= shard_bytes:
            flush(offset, line)
    if stats.rows and stats.rows < PROBE_ROWS and readable == 0 and state["seq"] == 0 and state["offset"] == 0:
        first = next(iter(buf.rejects), {"detail": ""})["detail"]
        raise DumpError(f"policy {policy.name!r}: no row of {dump} reads as layout {cfg.layout!r} (first: {first}); "
                        f"is dump.layout right?")
    if stats.rows == 0 and state["offset"] == 0 and not stats.carried:
        raise DumpError(f"policy {policy.name!r}: {dump} holds no rows")
    flush(last, line, done=True)
    stats.problems = len(counters)
    stats.seconds = time.perf_counter() - t0
    return stats


def _add(rec: DumpRecord, line: int, *, matcher: Matcher, layout: Layout, seen: dict[str, int],
         counters: dict[str, int], buf: _Buffer, stats: ImportStats, reject) -> None:
    stats.records += 1
    excerpt = (rec.question or rec.problem_id or rec.source_id or "")[:200]
    try:
        pid = matcher(rec)
    except LayoutError as exc:
        reject(line, exc.reason, str(exc), excerpt)
        return
    if layout.grouped:
        if pid in seen and not layout.repeats:
            reject(line, "duplicate", f"problem {pid} was matched by an earlier row (line {seen[pid]}); one row a "
                                      "problem in this layout (a dataset repeated N times: options.repeated_rows)",
                   excerpt)
            return
        if not rec.samples:
            reject(line, "empty", "the row lists no completions", excerpt)
            return
        seen.setdefault(pid, line)
    start, k = counters.get(pid, 0), len(rec.samples)
    if start + k > MAX_K:
        reject(line, "too_many_samples", f"{start + k:,} samples for one problem (at most {MAX_K:,})", excerpt)
        return
    counters[pid] = start + k
    c = buf.cols
    texts, finish, n_tokens, upstream = zip(*rec.samples, strict=True) if k else ((), (), (), ())  # Sample order
    c["problem_id"] += [pid] * k
    c["sample_idx"] += range(start, start + k)
    c["completion"] += texts
    c["n_tokens"] += n_tokens
    c["finish_reason"] += finish
    c["upstream"] += upstream
    buf.text_bytes += sum(map(len, texts))
    stats.samples += k


def _excerpt(obj: Any) -> str:
    try:
        return orjson.dumps(obj)[:200].decode("utf-8", "replace")
    except (TypeError, orjson.JSONEncodeError):
        return repr(obj)[:200]


def _write_state(path: Path, state: dict[str, Any], dump: Path, whole: str | None = None) -> None:
    """Write the state; a finished import of JSON lines records the digest of the bytes it read (``whole``: the
    file's own digest, when it read all of it), which a longer version of the file is checked against."""
    if state["done"] and state.get("format") != "parquet":
        read_all = whole is not None and state["offset"] == dump.stat().st_size
        state["prefix_sha256"] = whole if read_all else _prefix_sha256(dump, state["offset"])
    atomic_write_text(path, orjson.dumps(state, option=orjson.OPT_SORT_KEYS).decode())


def _carry(old: dict[str, Any], policy: Policy, *, folders: dict[str, Path], prefix: str) -> int:
    """Copy an earlier version's shards (rollouts, upstream, rejects), one at a time, under ``policy``'s id and the
    same sequence numbers; returns the samples copied."""
    old_prefix = f"imp-{old['policy_id']}-"
    n = 0
    for name, folder in folders.items():
        for p in shard_paths(folder):
            if not p.name.startswith(old_prefix):
                continue
            t = read_shard(p, name=name)
            if "policy_id" in t.column_names:
                t = t.set_column(t.schema.get_field_index("policy_id"), "policy_id",
                                 pa.array([policy.policy_id] * t.num_rows, pa.string()))
            if name == "rollouts":
                n += t.num_rows
            write_table(t, folder / f"{prefix}{p.stem.rsplit('-', 1)[1]}.parquet", name=name)
    return n


def _drop(old: dict[str, Any], folders: dict[str, Path], imports: Path) -> None:
    """Remove a superseded version's shards and state (its rows now live under the longer dump's policy_id)."""
    old_prefix = f"imp-{old['policy_id']}-"
    for folder in folders.values():
        for p in shard_paths(folder):
            if p.name.startswith(old_prefix):
                p.unlink()
    (imports / f"{old['policy_id']}.json").unlink(missing_ok=True)


__all__ = ["DumpError", "ImportStats", "Matcher", "dump_rows", "import_dump"]
