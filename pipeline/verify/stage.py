"""The verify stage's shell and helpers; :mod:`pipeline.verify` describes the stage and re-exports its public names."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.config import Params
from pipeline.io import claim_table_dir, damaged, read_shard, read_table, shard_paths, write_metrics, write_table
from pipeline.keys import digest
from pipeline.run_metrics import RunStats
from pipeline.schema import schema
from pipeline.tablesets import table_set
from pipeline.thinking import thinking_of
from pipeline.verify.core import VerifyError, VerifyResult, gold_digest, verifier_id, verify
from pipeline.verify.judge import Judgement, judge, judge_many
from pipeline.verify.on_ray import verify_on_ray

__all__ = ["Judgement", "VerifyError", "VerifyResult", "gold_digest", "judge", "judge_many", "run", "verifier_id",
           "verify"]

KEY = list(schema("rollouts").key)  # a verdict is keyed by its rollout's key (and verifier_id)
FAILED = ("timeout", "error")


# columns verdicts gained after their first shards were written: older shards get them as nulls
LATER_COLUMNS = ("gold_digest", "thinking_chars", "thinking_closed")


def _add_later_columns(directory: Path) -> int:
    """Give shards written before verdicts recorded :data:`LATER_COLUMNS` those columns (null); shards upgraded."""
    upgraded = 0
    declared = schema("verdicts").arrow
    for path in shard_paths(directory):
        try:
            names = pq.read_schema(path).names
        except (pa.ArrowException, OSError) as exc:
            raise damaged(path, "verdicts", exc) from None
        missing = [c for c in LATER_COLUMNS if c not in names]
        if not missing:
            continue
        table = pq.read_table(path)
        for c in missing:
            table = table.append_column(c, pa.nulls(table.num_rows, declared.field(c).type))
        write_table(table, path, name="verdicts")
        upgraded += 1
    return upgraded


def policy_modes(policies: pa.Table) -> dict[str, str]:
    """policy_id -> its own thinking mode, from the policies table's identity (policies without one: absent)."""
    modes = {}
    for pid, ident in zip(policies.column("policy_id").to_pylist(), policies.column("identity").to_pylist(), strict=True):
        mode = thinking_of(ident)
        if mode is not None:
            modes[pid] = mode
    return modes


def stale_verdicts(verdicts: pa.Table, problems: pa.Table, vid: str) -> pa.Table:
    """Keys of verifier ``vid``'s verdicts graded against another gold than the problem's current one."""
    mine = verdicts.filter(pc.equal(verdicts.column("verifier_id"), vid)).select([*KEY, "gold_digest"])
    if mine.num_rows == 0:
        return mine.select(KEY)
    pids = problems.column("problem_id").to_pylist()
    current = pa.table({"problem_id": pa.array(pids, pa.string()),
                        "current": pa.array([gold_digest(a) for a in problems.column("answer").to_pylist()], pa.string())})
    joined = mine.join(current, keys="problem_id", join_type="inner")
    changed = pc.fill_null(pc.not_equal(joined.column("gold_digest"), joined.column("current")), True)
    return joined.filter(changed).select(KEY)


def in_scope(rollouts: pa.Table, problems: pa.Table) -> tuple[pa.Table, int]:
    """The rollouts whose problem is in ``problems``, and how many were left out."""
    keep = pc.is_in(rollouts.column("problem_id"), value_set=problems.column("problem_id"))
    kept = rollouts.filter(keep)
    return kept, rollouts.num_rows - kept.num_rows


def pending_rollouts(rollouts: pa.Table, verdicts: pa.Table, vid: str) -> pa.Table:
    """Rollouts with no verdict from verifier ``vid`` yet."""
    done = verdicts.filter(pc.equal(verdicts.column("verifier_id"), vid)).select(KEY)
    if done.num_rows == 0:
        return rollouts
    return rollouts.join(done, keys=KEY, join_type="left anti").sort_by([(k, "ascending") for k in KEY])


def _drop_verdicts(directory: Path, keys: pa.Table, vid: str) -> int:
    """Remove verifier ``vid``'s verdicts for ``keys`` from every shard under ``directory``; rows removed."""
    removed = 0
    for path in shard_paths(directory):
        table = read_shard(path, name="verdicts")
        mine = pc.equal(table.column("verifier_id"), vid)
        kept = table.filter(mine).join(keys, keys=KEY, join_type="left anti").select(table.schema.names).cast(table.schema)
        dropped = (pc.sum(mine).as_py() or 0) - kept.num_rows
        if not dropped:
            continue
        rest = pa.concat_tables([table.filter(pc.invert(mine)), kept]).sort_by([(k, "ascending") for k in KEY])
        if rest.num_rows:
            write_table(rest, path, name="verdicts")
        else:
            path.unlink()
        removed += dropped
    return removed


# rollouts verified and written as one verdicts shard: the text in memory stays this size whatever the job's size,
# and a stage killed mid-run keeps every chunk it finished
CHUNK_ROWS = 8192


def pending_shards(rollouts_dir: Path, problems: pa.Table, done: pa.Table
                   ) -> tuple[list[tuple[Path, pa.Table | None, int]], int, int]:
    """Each rollouts shard with rollouts to verify (in scope, no verdict in ``done``), their keys (None: every
    in-scope row of the shard, when nothing is done yet) and how many; the rollouts read; those out of scope. Reads only the
    keys (no completion text) and matches them against ``problems`` and ``done`` once, whatever the number of shards
    (a join per shard built ``done``'s hash table again for each: 5 s of a 6 s rerun at 248 shards)."""
    paths = shard_paths(rollouts_dir)
    parts = []
    for i, path in enumerate(paths):
        keys = read_shard(path, name="rollouts", columns=KEY)
        parts.append(keys.append_column("_shard", pa.repeat(pa.scalar(i, pa.int32()), keys.num_rows)))
    if not parts:
        return [], 0, 0
    keys = pa.concat_tables(parts)
    scoped, out_of_scope = in_scope(keys, problems)
    if done.num_rows == 0:
        counts = pc.value_counts(scoped.column("_shard")).to_pylist()
        return ([(paths[c["values"]], None, c["counts"]) for c in sorted(counts, key=lambda c: c["values"])],
                keys.num_rows, out_of_scope)
    pending = scoped.join(done, keys=KEY, join_type="left anti").sort_by([("_shard", "ascending")])
    shard_of = pending.column("_shard").to_numpy()
    todo = []
    for i in pc.unique(pending.column("_shard")).to_pylist():
        lo, hi = (int(x) for x in shard_of.searchsorted([i, i + 1]))
        todo.append((paths[i], pending.slice(lo, hi - lo).select(KEY), hi - lo))
    return todo, keys.num_rows, out_of_scope


def pending_chunks(shards: list[tuple[Path, pa.Table | None, int]], problems: pa.Table, *,
                   chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """The pending rollouts with their text, shard by shard, in tables of about ``chunk_rows`` (whole shards): a
    shard's in-scope rows in its own order when nothing was done, else its pending keys' rows in key order."""
    parts, n = [], 0
    for path, keys, _ in shards:
        table = read_shard(path, name="rollouts", columns=[*KEY, "completion", "finish_reason"])
        if keys is None:
            table, _ = in_scope(table, problems)
        else:
            table = table.join(keys, keys=KEY, join_type="left semi").sort_by([(k, "ascending") for k in KEY])
        parts.append(table)
        n += table.num_rows
        if n >= chunk_rows:
            yield pa.concat_tables(parts)
            parts, n = [], 0
    if parts:
        yield pa.concat_tables(parts)


def _merge(results: list[VerifyResult], vid: str) -> VerifyResult:
    """One result for the chunks' results (their verdicts concatenated: no completion text, small)."""
    statuses, extractors = Counter(), Counter()
    for r in results:
        statuses.update(r.statuses)
        extractors.update(r.extractors)
    verdicts = pa.concat_tables([r.verdicts for r in results]) if results else schema("verdicts").empty()
    return VerifyResult(verdicts=verdicts, verifier_id=vid, checks=sum(r.checks for r in results),
                        restarts=sum(r.restarts for r in results), statuses=dict(statuses), extractors=dict(extractors))


def run(params: Params, *, root: Path = Path("."), set_name: str = "main", progress: bool = True,
        retry_failed: bool = False) -> VerifyResult:
    """The shell: the set's rollouts and problems in, new verdicts shards (only the new work) and metrics out.

    The rollouts are read shard by shard, their keys first (what is pending), then the pending ones' text in
    chunks of :data:`CHUNK_ROWS`, each verified and written as its own shard before the next is read."""
    ts = table_set(params, set_name)
    cfg = params.verify
    vid = verifier_id(cfg)
    t0 = time.perf_counter()
    # verify rewrites and removes verdict shards: only in a folder it can prove is the verdicts table's, never a user's
    claim_table_dir(ts.dir("verdicts", root), name="verdicts")
    _add_later_columns(ts.dir("verdicts", root))
    existing = read_table(ts.dir("verdicts", root), name="verdicts", columns=[*KEY, "verifier_id", "status", "gold_digest"])
    problems = read_table(ts.dir("problems", root), name="problems", columns=["problem_id", "answer"])
    # each policy's thinking mode is part of its policy_id; the rollout stage wrote its row before its rollouts
    modes = policy_modes(read_table(ts.dir("policies", root), name="policies", columns=["policy_id", "identity"]))
    stale = stale_verdicts(existing, problems, vid)
    regraded = 0
    if stale.num_rows:
        regraded = _drop_verdicts(ts.dir("verdicts", root), stale, vid)
        existing = existing.join(stale, keys=KEY, join_type="left anti")
    retried = 0
    if retry_failed:
        failed = existing.filter(pc.and_(pc.equal(existing.column("verifier_id"), vid),
                                         pc.is_in(existing.column("status"), pa.array(FAILED)))).select(KEY)
        if failed.num_rows:
            retried = _drop_verdicts(ts.dir("verdicts", root), failed, vid)
            existing = existing.join(failed, keys=KEY, join_type="left anti")
    done = existing.filter(pc.equal(existing.column("verifier_id"), vid)).select(KEY)
    # rollouts and verdicts are caches kept across problem selections: a rollout of a problem no longer in the
    # problems table (a narrowed source, a changed filter) is out of scope, skipped and counted, never an error
    shards, n_rollouts, out_of_scope = pending_shards(ts.dir("rollouts", root), problems, done)
    n_todo = sum(n for _, _, n in shards)
    results = []
    with tqdm(total=n_todo, desc=f"verify[{set_name}]", unit=" rollouts", disable=not progress, mininterval=1.0) as bar:
        # on Ray one chunk: each verify_on_ray call starts and stops its own Ray, which costs seconds
        chunk_rows = CHUNK_ROWS if cfg.executor == "local" else max(n_todo, 1)
        for todo in pending_chunks(shards, problems, chunk_rows=chunk_rows):
            if cfg.executor == "ray":
                result = verify_on_ray(todo, problems, config=cfg, chunk_rows=cfg.ray_chunk_rows, address=cfg.ray_address,
                                       on_done=bar.update, modes=modes)
            else:
                result = verify(todo, problems, config=cfg, on_done=bar.update, modes=modes)
            del todo
            if result.verdicts.num_rows:
                keys = "\n".join(f"{a}|{b}|{c}" for a, b, c in zip(*(result.verdicts.column(k).to_pylist() for k in KEY),
                                                                   strict=True))
                shard = f"{vid.split('/')[-1]}-{digest(keys, length=12)}.parquet"
                write_table(result.verdicts, ts.dir("verdicts", root) / shard, name="verdicts")
            results.append(result)
    result = _merge(results, vid)
    seconds = time.perf_counter() - t0
    stats = RunStats.of({
        **result.metrics(), "rollouts": n_rollouts,
        "skipped_already_verified": n_rollouts - out_of_scope - n_todo, "skipped_not_in_problems": out_of_scope,
        "retried_failed": retried, "reverified_changed_gold": regraded,
    })
    stats.add_time("seconds", seconds)
    stats.rate("rollouts_per_s", "verdicts", "seconds", digits=1, empty=None)  # one verdict per rollout verified
    write_metrics(ts.metrics_file("verify", root), stats, root=root)
    return result
