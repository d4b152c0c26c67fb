"""Verify stage: rollouts -> verdicts, incrementally (rollout keys already verified by the same verifier_id are skipped).

With ``retry_failed``, rollouts whose verdict from the current verifier is ``timeout`` or ``error``
are verified again (a worker lost to the machine's OOM killer, a starved machine past the wall
limit). Their old verdicts are first removed from the shards that hold them (each shard rewritten
atomically), then the new ones are written: a crash in between leaves those rollouts without a
verdict, which the next run verifies; never two verdicts for one key.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from pipeline.config import Params
from pipeline.io import read_shard, read_table, shard_paths, write_json, write_table
from pipeline.keys import digest
from pipeline.tablesets import table_set
from pipeline.verify.core import VerifyError, VerifyResult, verifier_id, verify

__all__ = ["VerifyError", "VerifyResult", "run", "verifier_id", "verify"]

KEY = ["problem_id", "policy_id", "sample_idx"]
FAILED = ("timeout", "error")


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


def run(params: Params, *, root: Path = Path("."), set_name: str = "main", progress: bool = True,
        retry_failed: bool = False) -> VerifyResult:
    """The shell: the set's rollouts and problems in, a new verdicts shard (only the new work) and metrics out."""
    ts = table_set(params, set_name)
    cfg = params.verify
    vid = verifier_id(cfg)
    t0 = time.perf_counter()
    rollouts = read_table(ts.dir("rollouts", root), name="rollouts",
                          columns=["problem_id", "policy_id", "sample_idx", "completion"])
    existing = read_table(ts.dir("verdicts", root), name="verdicts", columns=[*KEY, "verifier_id", "status"])
    retried = 0
    if retry_failed:
        failed = existing.filter(pc.and_(pc.equal(existing.column("verifier_id"), vid),
                                         pc.is_in(existing.column("status"), pa.array(FAILED)))).select(KEY)
        if failed.num_rows:
            retried = _drop_verdicts(ts.dir("verdicts", root), failed, vid)
            existing = existing.join(failed, keys=KEY, join_type="left anti")
    todo = pending_rollouts(rollouts, existing, vid)
    problems = read_table(ts.dir("problems", root), name="problems", columns=["problem_id", "answer"])
    with tqdm(total=todo.num_rows, desc=f"verify[{set_name}]", unit=" rollouts", disable=not progress,
              mininterval=1.0) as bar:
        result = verify(todo, problems, config=cfg, on_done=bar.update)
    seconds = time.perf_counter() - t0
    if result.verdicts.num_rows:
        keys = "\n".join(f"{a}|{b}|{c}" for a, b, c in zip(*(result.verdicts.column(k).to_pylist() for k in KEY), strict=True))
        shard = f"{vid.split('/')[-1]}-{digest(keys, length=12)}.parquet"
        write_table(result.verdicts, ts.dir("verdicts", root) / shard, name="verdicts")
    write_json(ts.metrics_file("verify", root), {
        **result.metrics(), "rollouts": rollouts.num_rows, "skipped_already_verified": rollouts.num_rows - todo.num_rows,
        "retried_failed": retried,
        "seconds": round(seconds, 3),
        "rollouts_per_s": round(todo.num_rows / seconds, 1) if seconds and todo.num_rows else None,
    })
    return result
