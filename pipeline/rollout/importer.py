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

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config import MAX_K, ConfigError
from pipeline.io import write_table
from pipeline.rollout.dump_rows import DumpError, Matcher, dump_rows
from pipeline.rollout.import_state import STATE_VERSION, carry_shards, drop_version, earlier_version, read_state, write_state
from pipeline.rollout.layout import DumpRecord, Layout, LayoutError, get_layout
from pipeline.rollout.policy import Policy
from pipeline.schema import schema
from pipeline.tablesets import UPSTREAM

SHARD_ROWS = 50_000
SHARD_BYTES = 64 << 20
PROBE_ROWS = 200  # none of the first rows readable as the layout: the wrong layout, an error before any write
UPSTREAM_DIR = UPSTREAM
IMPORTS_DIR = "imports"




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


# --- matching ------------------------------------------------------------------------------------------


# --- state ----------------------------------------------------------------------------------------------------


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
    state = read_state(state_path) or {"version": STATE_VERSION, "policy": policy.name,
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
    if state["offset"] == 0 and state["seq"] == 0 and (old := earlier_version(imports, policy, dump)) is not None:
        folders = {"rollouts": out, "upstream": upstream_dir, "rejects": rejects_dir}
        stats.carried = carry_shards(old, policy, prefix=prefix, folders=folders)
        state.update(offset=old["offset"], line=old["line"], seen=old["seen"], counters=old["counters"], seq=old["seq"],
                     stats={"samples": stats.carried})
        write_state(state_path, state, dump)
        drop_version(old, folders, imports)  # after the new state: a crash in between leaves both versions, never neither
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
        write_state(state_path, state, dump, whole=policy.identity["dump"]["sha256"])
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


__all__ = ["DumpError", "ImportStats", "Matcher", "dump_rows", "import_dump"]
