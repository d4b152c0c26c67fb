"""Fault injection on every stage, as a table: injected, survived, rows lost, partial reads, shards redone.

    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python benchmarks/faults.py [--points 20] [--seed 0]

A tiny repository (27 synthetic problems, k=4, the fake engine; tests/support/faultkit.py) is built once,
uninterrupted: the reference. Then, for each stage (ingest, rollout, verify, annotate,
reformulate, publish, catalog), each run through the real CLI in a forked child:

- sigkill: ``--points`` SIGKILLs at seeded points, half at a random time within one run's
  duration, half right before or after a random one of the files the run makes visible; every
  kill is followed by a plain re-run. Survived = the re-run ends equal to the reference, with
  no temp file left; partial reads = files visible after the kill that do not read whole;
  shards redone = finished shards a keyed stage (rollout, verify) rewrote on re-run.
- disk full (rlimit): every write past 256 bytes fails (RLIMIT_FSIZE, EFBIG). Survived = a
  one-line error, nothing partial visible, the previous outputs unchanged, and a re-run equal.
- disk full (tmpfs): the repository on a tmpfs filled to the last byte (ENOSPC), same checks;
  only as root (it mounts one), else reported as skipped.
- damaged input: a truncated, zero-byte, wrong-schema and foreign shard in the stage's input
  table. Survived = a one-line error naming the shard and `passband doctor --repair`; for one
  kind per stage also `doctor --repair` plus every stage re-run (what `dvc repro` runs) gives
  all tables equal to the reference.
- readers: `passband sql` (and DuckDB straight on the shards) in a loop while the stage
  writes three times; partial reads = failed reads plus reads of neither the old nor the new
  state (duplicate keys, counts outside the two).
- two writers: two runs of the stage started 50 ms apart from two hosts; survived = the
  outputs equal the reference (the second refused by the lock, or ran after the first).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import faultcases as fc  # noqa: E402
import faultkit as fk  # noqa: E402


def tmpfs_full_disk(host: fk.StageHost, ref: Path, stage: str, *, reference: dict, tally: fc.Tally) -> fc.Tally:
    """The repository on a tmpfs with no byte free: ENOSPC from the kernel, for every writer."""
    mnt = Path(tempfile.mkdtemp(prefix="passband-tmpfs-"))
    size_kb = 4096 + sum(f.stat().st_size for f in ref.rglob("*") if f.is_file()) // 1024 * 2
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        tally.notes.append(f"{stage}: tmpfs skipped (mounting needs root)")
        mnt.rmdir()
        return tally
    try:
        work = fk.copy_repo(ref, mnt / "w")
        if stage in fk.KEYED:
            for shard in sorted(fk.output_paths(work, stage)[0].glob("*.parquet"))[::2]:
                shard.unlink()
        before = fk.snapshot(work, stage)
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as fh:  # fill to the last byte
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
            try:
                while True:
                    fh.write(b"\0")
            except OSError:
                pass
        res = host.run(work, stage)
        tally.injected += 1
        lines = res.error_lines
        one_line = res.rc == 1 and len(lines) == 1 and lines[0].startswith("Error: no space left")
        if not one_line:
            tally.notes.append(f"{stage}: tmpfs full gave rc={res.rc}: {res.stderr.strip()[-300:]}")
        damage = fk.visible_damage(work, stage)
        tally.partial_reads += len(damage)
        intact = fk.snapshot(work, stage) == before
        if not intact:
            tally.notes.append(f"{stage}: previous outputs changed on a full tmpfs")
        filler.unlink()
        again = host.run(work, stage)
        got = fk.snapshot(work, stage) if again.rc == 0 else {}
        tally.rows_lost += fk.lost_rows(reference, got)
        if one_line and intact and not damage and got == reference and not fc.temps_left(work, stage):
            tally.survived += 1
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        shutil.rmtree(mnt, ignore_errors=True)
    return tally


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=20, help="SIGKILL points per stage")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stages", default=",".join(fk.FAULT_STAGES))
    ap.add_argument("--readers-runs", type=int, default=3)
    args = ap.parse_args()
    stages = args.stages.split(",")
    t_all = time.perf_counter()
    rows: list[fc.Tally] = []
    extra: list[str] = []
    with tempfile.TemporaryDirectory(prefix="passband-faults-") as tmp, fk.StageHost() as host, \
            fk.StageHost() as host2:
        tmp = Path(tmp)
        ref = tmp / "ref"
        seconds = fk.build(host, ref)
        references = {st: fk.snapshot(ref, st) for st in fk.FAULT_STAGES}
        print(f"reference build: {sum(seconds.values()):.1f}s "
              f"({', '.join(f'{k} {v:.1f}' for k, v in seconds.items())})", flush=True)
        work = tmp / "work"
        for i, stage in enumerate(stages):
            t0 = time.perf_counter()
            rows.append(fc.sigkill(host, ref, work, stage, points=args.points, seed=args.seed, seconds=None,
                                   reference=references[stage], tally=fc.Tally(stage, "sigkill")))
            rows.append(fc.full_disk(host, ref, work, stage, reference=references[stage],
                                     tally=fc.Tally(stage, "disk full (rlimit)")))
            rows.append(tmpfs_full_disk(host, ref, stage, reference=references[stage],
                                        tally=fc.Tally(stage, "disk full (tmpfs)")))
            if stage in fc.DAMAGE_TARGET:
                dmg = fc.Tally(stage, "damaged input")
                for j, how in enumerate(fc.DAMAGES):
                    recover = j == i % len(fc.DAMAGES)
                    ok = dmg.survived
                    fc.damaged_input(host, ref, work, stage, how, references=references if recover else None,
                                     tally=dmg)
                    if recover:
                        extra.append(f"{stage}: a {how} shard in its input, then doctor --repair and every stage "
                                     f"re-run: {'all tables equal to the reference' if dmg.survived > ok else 'FAILED'}")
                rows.append(dmg)
            rows.append(fc.readers_while_writing(host, ref, work, stage, runs=args.readers_runs,
                                                 tally=fc.Tally(stage, "readers while writing")))
            t, outcome = fc.two_writers((host, host2), ref, work, stage, reference=references[stage],
                                        tally=fc.Tally(stage, "two writers"))
            t.notes.append(f"{stage}: second writer {outcome}")
            rows.append(t)
            print(f"{stage}: {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)

    print()
    head = f"| {'stage':11} | {'fault':22} | injected | survived | rows lost | partial reads | shards redone |"
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for r in rows:
        print(f"| {r.stage:11} | {r.fault:22} | {r.injected:8} | {r.survived:8} | {r.rows_lost:9} | "
              f"{r.partial_reads:13} | {r.redone if r.fault == 'sigkill' and r.stage in fk.KEYED else '':>13} |")
    tot = {k: sum(getattr(r, k) for r in rows) for k in ("injected", "survived", "rows_lost", "partial_reads", "redone")}
    print(f"\ntotal: {tot['injected']} faults injected, {tot['survived']} survived, {tot['rows_lost']} rows lost, "
          f"{tot['partial_reads']} partial reads, {tot['redone']} finished shards redone; "
          f"{time.perf_counter() - t_all:.0f}s on {os.cpu_count()} cores")
    for line in extra:
        print(line)
    notes = [n for r in rows for n in r.notes]
    if notes:
        print("\nnotes:")
        for n in notes:
            print(f"  {n}")


if __name__ == "__main__":
    main()
