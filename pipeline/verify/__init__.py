"""Verify stage: rollouts -> verdicts, incrementally (rollout keys already verified by the same verifier_id are skipped)."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from pipeline.config import Params
from pipeline.io import read_table, write_json, write_table
from pipeline.keys import digest
from pipeline.tablesets import table_set
from pipeline.verify.core import VerifyError, VerifyResult, verifier_id, verify

__all__ = ["VerifyError", "VerifyResult", "run", "verifier_id", "verify"]

KEY = ["problem_id", "policy_id", "sample_idx"]


def pending_rollouts(rollouts: pa.Table, verdicts: pa.Table, vid: str) -> pa.Table:
    """Rollouts with no verdict from verifier ``vid`` yet."""
    done = verdicts.filter(pc.equal(verdicts.column("verifier_id"), vid)).select(KEY)
    if done.num_rows == 0:
        return rollouts
    return rollouts.join(done, keys=KEY, join_type="left anti").sort_by([(k, "ascending") for k in KEY])


def run(params: Params, *, root: Path = Path("."), set_name: str = "main", progress: bool = True) -> VerifyResult:
    """The shell: the set's rollouts and problems in, a new verdicts shard (only the new work) and metrics out."""
    ts = table_set(params, set_name)
    cfg = params.verify
    vid = verifier_id(cfg)
    t0 = time.perf_counter()
    rollouts = read_table(ts.dir("rollouts", root), name="rollouts",
                          columns=["problem_id", "policy_id", "sample_idx", "completion"])
    existing = read_table(ts.dir("verdicts", root), name="verdicts", columns=[*KEY, "verifier_id"])
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
        "seconds": round(seconds, 3),
        "rollouts_per_s": round(todo.num_rows / seconds, 1) if seconds and todo.num_rows else None,
    })
    return result
