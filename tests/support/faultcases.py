"""The fault experiments on the stage host of :mod:`faultkit`, shared by tests/test_faults.py and benchmarks/faults.py.

Each experiment adds what it saw to a :class:`Tally` (one row of the benchmark's table).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from faultkit import (
    KEYED,
    ORDER,
    RunResult,
    StageHost,
    _params,
    catalog_counts,
    copy_repo,
    lost_rows,
    output_paths,
    remove_outputs,
    shard_stamps,
    snapshot,
    visible_damage,
)


@dataclass
class Tally:
    """One row of the benchmark's table: a stage and a fault kind."""

    stage: str
    fault: str
    injected: int = 0          # faults that actually hit a run (a kill that came after the end does not count)
    survived: int = 0          # re-run (or the clean error + re-run) ended equal to the uninterrupted run
    rows_lost: int = 0         # reference rows missing after the re-run
    partial_reads: int = 0     # reads that failed or saw half a write / a half-written file visible to readers
    redone: int = 0            # finished shards a keyed stage rewrote on re-run (target 0)
    notes: list[str] = None

    def __post_init__(self):
        self.notes = self.notes or []


def temps_left(root: Path, stage: str) -> list[Path]:
    out = []
    for p in output_paths(root, stage):
        base = p if p.is_dir() else p.parent
        if base.is_dir():
            out += [f for f in base.rglob(".*") if f.name.endswith(".tmp") or ".tmp-" in f.name]
    return out


def sigkill(host: StageHost, ref: Path, work: Path, stage: str, *, points: int, seed: int, seconds: float | None,
            reference: dict, tally: Tally) -> Tally:
    """``points`` SIGKILLs that land, at seeded random points (half by time, half at a seeded write), each re-run."""
    import random

    rng = random.Random(f"{seed}:{stage}")
    copy_repo(ref, work)
    remove_outputs(work, stage)
    clean = host.run(work, stage)  # an uninterrupted run: how long it takes, how many files it makes visible
    writes = max(clean.replaces or 1, 1)
    seconds = seconds or clean.seconds
    attempts = 0
    while tally.injected < points and attempts < 3 * points:  # a kill timed after the run's end does not count
        i, attempts = attempts, attempts + 1
        copy_repo(ref, work)
        todo = writes
        if stage in KEYED:  # a keyed stage resumes: start with some of its shards there, as after an earlier kill
            removed = 0
            for j, shard in enumerate(sorted(output_paths(work, stage)[0].glob("*.parquet"))):
                if rng.random() < 0.7 or j == 0:
                    shard.unlink()
                    removed += 1
            todo = min(writes, removed + 2)  # the missing shards (verify: one), its policies row, its metrics
        else:
            remove_outputs(work, stage)
        if i % 2 == 0:
            res = host.run(work, stage, kill_after_s=rng.uniform(0.0, 0.9 * seconds))
        else:
            res = host.run(work, stage, kill_at_replace=rng.randint(1, todo), kill_phase=rng.choice(["before", "after"]))
        if not res.killed:
            if res.rc != 0:
                tally.notes.append(f"{stage}: a run failed without a kill: {res.stderr.strip()[-300:]}")
            continue
        tally.injected += 1
        damage = visible_damage(work, stage)
        tally.partial_reads += len(damage)
        tally.notes += [f"{stage}: visible after kill: {d}" for d in damage]
        before = shard_stamps(work, stage) if stage in KEYED else {}
        again = host.run(work, stage)
        got = snapshot(work, stage) if again.rc == 0 else {}
        if again.rc != 0:
            tally.notes.append(f"{stage}: re-run failed: {again.stderr.strip()[-300:]}")
        tally.rows_lost += lost_rows(reference, got)
        after = shard_stamps(work, stage) if stage in KEYED else {}
        tally.redone += sum(1 for f, st in before.items() if after.get(f) != st)
        left = temps_left(work, stage)
        if left:
            tally.notes.append(f"{stage}: temp files left after the re-run: {[str(p) for p in left]}")
        if again.rc == 0 and got == reference and not left:
            tally.survived += 1
    return tally


def full_disk(host: StageHost, ref: Path, work: Path, stage: str, *, reference: dict, tally: Tally,
              limit: int = 256) -> Tally:
    """A write that fails for lack of space: one line, nothing partial, the previous outputs intact; then a re-run."""
    copy_repo(ref, work)
    if stage in KEYED:  # leave work to do
        for shard in sorted(output_paths(work, stage)[0].glob("*.parquet"))[::2]:
            shard.unlink()
    before = snapshot(work, stage)
    res = host.run(work, stage, fsize_limit=limit)
    tally.injected += 1
    lines = res.error_lines
    one_line = res.rc == 1 and len(lines) == 1 and lines[0].startswith("Error: no space left")
    if not one_line:
        tally.notes.append(f"{stage}: full disk gave rc={res.rc}: {res.stderr.strip()[-400:]}")
    damage = visible_damage(work, stage)
    tally.partial_reads += len(damage)
    intact = snapshot(work, stage) == before
    if not intact:
        tally.notes.append(f"{stage}: the previous outputs changed under a full disk")
    left = temps_left(work, stage)
    if left:
        tally.notes.append(f"{stage}: temp files left by the failed write: {[str(p) for p in left]}")
    again = host.run(work, stage)
    got = snapshot(work, stage) if again.rc == 0 else {}
    tally.rows_lost += lost_rows(reference, got)
    if one_line and intact and not damage and not left and got == reference:
        tally.survived += 1
    return tally


# input table a stage reads -> (set, table) it is damaged in
DAMAGE_TARGET = {"rollout": ("main", "problems"), "verify": ("main", "rollouts"), "annotate": ("main", "verdicts"),
                 "reformulate": ("main", "difficulty"), "publish": ("main", "difficulty"),
                 "catalog": ("main", "rollouts")}
DAMAGES = ("truncated", "zero_bytes", "wrong_schema", "other_table")


def damage_shard(root: Path, set_name: str, table: str, how: str) -> Path:
    """Damage the first shard of a table in one of the ways a disk, a copy or a person does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.io import shard_paths
    from pipeline.tablesets import table_set

    params = _params(root)
    shard = shard_paths(table_set(params, set_name).dir(table, root))[0]
    data = shard.read_bytes()
    if how == "truncated":
        shard.write_bytes(data[: len(data) // 2])
    elif how == "zero_bytes":
        shard.write_bytes(b"")
    elif how == "wrong_schema":
        t = pq.read_table(shard)
        pq.write_table(t.drop_columns([t.column_names[-1]]).append_column("surprise", pa.array([1] * t.num_rows)), shard)
    elif how == "other_table":
        other = "rejects" if table != "rejects" else "problems"
        src = shard_paths(table_set(params, "main").dir(other, root)) or shard_paths(
            table_set(params, "reformulated").dir(other, root))
        shutil.copy(src[0], shard.parent / "copied-in.parquet")
        return shard.parent / "copied-in.parquet"
    return shard


def damaged_input(host: StageHost, ref: Path, work: Path, stage: str, how: str, *, references: dict[str, dict] | None,
                  tally: Tally) -> Tally:
    """A damaged input shard: the stage stops with one line naming it and the fix; doctor --repair, re-runs: equal."""
    copy_repo(ref, work)
    set_name, table = DAMAGE_TARGET[stage]
    shard = damage_shard(work, set_name, table, how)
    remove_outputs(work, stage)
    res = host.run(work, stage)
    tally.injected += 1
    lines = res.error_lines
    rel = shard.name
    ok = res.rc == 1 and len(lines) == 1 and rel in lines[0] and "passband doctor --repair" in lines[0]
    if not ok:
        tally.notes.append(f"{stage}/{how}: rc={res.rc}: {res.stderr.strip()[-400:]}")
        return tally
    if references is None:  # the error only
        tally.survived += 1
        return tally
    repaired = recover(host, work)
    got = {st: snapshot(work, st) for st in references}
    tally.rows_lost += sum(lost_rows(references[st], got[st]) for st in references)
    if repaired and got == references:
        tally.survived += 1
    else:
        tally.notes.append(f"{stage}/{how}: doctor --repair and the re-run did not give the reference tables back")
    return tally


def recover(host: StageHost, work: Path) -> bool:
    """``passband doctor --repair``, then every stage in order (what `dvc repro` runs): True if doctor is clean after."""
    from click.testing import CliRunner

    from pipeline.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["doctor", "--repair", "--params", str(work / "params.yaml")])
    if res.exit_code != 0:
        return False
    for stage in ORDER:
        if host.run(work, stage).rc != 0:
            return False
    return runner.invoke(cli, ["doctor", "--params", str(work / "params.yaml")]).exit_code == 0


# --- concurrent use ---------------------------------------------------------------------------------

# stage -> the SQL a reader runs while it writes: rows, distinct keys (equal unless two versions interleave)
READ_SQL = {
    "ingest": "SELECT count(*), count(DISTINCT problem_id) FROM problems",
    "rollout": "SELECT count(*), count(DISTINCT (problem_id, policy_id, sample_idx)) FROM rollouts",
    "verify": "SELECT count(*), count(DISTINCT (problem_id, policy_id, sample_idx, verifier_id)) FROM verdicts",
    "annotate": "SELECT count(*), count(DISTINCT (problem_id, policy_id, verifier_id)) FROM difficulty",
    "reformulate": "SELECT count(*), count(DISTINCT problem_id) FROM problems",
    "publish": "SELECT count(*), count(DISTINCT problem_id) FROM read_parquet('data/published/data/default/*.parquet')",
    "catalog": None,  # read through the catalog file itself
}


def read_once(root: Path, stage: str, *, raw: bool = False) -> tuple[int, int]:
    """One reader's read, as `passband sql` (or `duckdb data/passband.duckdb` for the catalog) does it.

    ``raw``: DuckDB straight on the stage's shard glob, no retry (a tighter loop than `passband sql`).
    """
    if stage == "catalog":
        counts = catalog_counts(root)
        if counts is None:
            raise FileNotFoundError("the catalog file is missing")
        return counts["rollouts"], counts["rollouts"]
    if raw:
        import duckdb

        sql = READ_SQL[stage]
        if stage != "publish":
            table = sql.rsplit("FROM ", 1)[1]
            folder = output_paths(root, stage)[0 if stage != "annotate" else 1]
            if not list(folder.glob("*.parquet")):  # an empty table (the keyed stages only ever add shards)
                return 0, 0
            glob = folder / "*.parquet"
            sql = sql.replace(f"FROM {table}", f"FROM read_parquet('{glob}')")
        else:
            sql = sql.replace("'data/", f"'{root}/data/")
        return tuple(int(x) for x in duckdb.connect().execute(sql).fetchone())
    from pipeline.catalog import query

    df = query(_params(root), READ_SQL[stage], root=root)
    return tuple(int(x) for x in df.row(0))


def readers_while_writing(host: StageHost, ref: Path, work: Path, stage: str, *, runs: int, tally: Tally) -> Tally:
    """Readers in a loop while the stage writes ``runs`` times: zero failed reads, zero reads of half a write."""
    import threading

    copy_repo(ref, work)
    expected = {raw: read_once(ref, stage, raw=raw) for raw in (False, True)}
    reads = 0
    for _ in range(runs):
        if stage in KEYED:  # give it work: the reader sees the table grow shard by shard
            for shard in sorted(output_paths(work, stage)[0].glob("*.parquet"))[::2]:
                shard.unlink()
        low = {raw: read_once(work, stage, raw=raw) for raw in (False, True)}
        done: list = []
        writer = threading.Thread(target=lambda d=done: d.append(host.run(work, stage)))
        writer.start()
        tally.injected += 1
        while writer.is_alive() or len(done) == 0:
            reads += 1
            raw = reads % 4 != 0
            try:
                n, distinct = read_once(work, stage, raw=raw)
            except Exception as exc:
                tally.partial_reads += 1
                tally.notes.append(f"{stage}: failed read: {str(exc).splitlines()[0][:200]}")
                continue
            lo, hi = sorted((low[raw][0], expected[raw][0]))
            if n != distinct or not lo <= n <= hi:
                tally.partial_reads += 1
                tally.notes.append(f"{stage}: read {n} rows / {distinct} keys, not between {lo} and {hi}")
        writer.join()
        if done[0].rc != 0:
            tally.notes.append(f"{stage}: writer failed: {done[0].stderr.strip()[-300:]}")
        elif read_once(work, stage) == expected[False]:
            tally.survived += 1
    tally.notes.append(f"{stage}: {reads} reads during {runs} writes")
    return tally


def two_writers(hosts: tuple[StageHost, StageHost], ref: Path, work: Path, stage: str, *, reference: dict,
                tally: Tally, stagger_s: float = 0.05) -> tuple[Tally, str]:
    """Two runs of the same stage at once: the second refuses (the lock) or runs after; never interleaved shards.

    Returns the tally and what happened: "refused" (the second got the lock's one-line error) or "serial".
    """
    import threading

    copy_repo(ref, work)
    remove_outputs(work, stage)
    results: dict[int, RunResult] = {}

    def go(i: int) -> None:
        results[i] = hosts[i].run(work, stage)

    first = threading.Thread(target=go, args=(0,))
    first.start()
    time.sleep(stagger_s)
    go(1)
    first.join()
    tally.injected += 1
    a, b = results[0], results[1]
    outcome = "serial"
    if a.rc == 0 and b.rc == 0:
        pass
    elif {a.rc, b.rc} == {0, 1}:
        loser = a if a.rc == 1 else b
        lines = loser.error_lines
        if len(lines) == 1 and "already running" in lines[0]:
            outcome = "refused"
        else:
            tally.notes.append(f"{stage}: second writer failed without the lock message: {loser.stderr[-300:]}")
    else:
        tally.notes.append(f"{stage}: writers ended {a.rc}/{b.rc}: {a.stderr[-200:]} {b.stderr[-200:]}")
    got = snapshot(work, stage)
    tally.rows_lost += lost_rows(reference, got)
    if got == reference and not visible_damage(work, stage):
        tally.survived += 1
    return tally, outcome
