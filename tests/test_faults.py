"""Faults on every stage, driven through the CLI on the fake engine (tests/support/faultkit.py, faultcases.py): kills, full disk,
damaged inputs, concurrent readers and writers, file modes under two umasks. The benchmark
(benchmarks/faults.py) runs the same experiments with 20 kill points per stage and prints the table.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import faultcases as fc
import faultkit as fk
import pyarrow as pa
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.io import DamagedShardError, DiskFullError, read_shard, read_table, write_table
from pipeline.schema import schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def host():
    with fk.StageHost() as h:
        yield h


@pytest.fixture(scope="module")
def ref(host, tmp_path_factory) -> Path:
    """The whole tiny pipeline, uninterrupted: what every faulted run must end equal to."""
    root = tmp_path_factory.mktemp("reference")
    fk.build(host, root)
    return root


@pytest.fixture(scope="module")
def references(ref) -> dict[str, dict]:
    return {st: fk.snapshot(ref, st) for st in fk.FAULT_STAGES}


def _clean(t: fc.Tally) -> None:
    assert t.partial_reads == 0 and t.rows_lost == 0 and t.redone == 0, t.notes
    assert t.survived == t.injected, t.notes


# --- SIGKILL ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", fk.FAULT_STAGES)
def test_sigkill_at_seeded_points_then_rerun_equals_an_uninterrupted_run(host, ref, references, tmp_path, stage):
    t = fc.sigkill(host, ref, tmp_path / "w", stage, points=3, seed=1, seconds=None, reference=references[stage],
                   tally=fc.Tally(stage, "sigkill"))
    assert t.injected == 3, t.notes  # (benchmarks/faults.py: 20 per stage)
    _clean(t)


# --- full disk ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", fk.FAULT_STAGES)
def test_full_disk_is_one_line_leaves_nothing_partial_and_keeps_the_previous_outputs(host, ref, references, tmp_path,
                                                                                      stage):
    t = fc.full_disk(host, ref, tmp_path / "w", stage, reference=references[stage], tally=fc.Tally(stage, "disk"))
    _clean(t)


def test_enospc_on_write_is_a_disk_full_error_and_the_old_shard_stays(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    t = schema("rejects").from_rows([{"stage": "ingest", "source": "s", "source_id": "1", "reason": "r",
                                      "detail": None, "excerpt": None}])
    path = write_table(t, tmp_path / "rej" / "a.parquet", name="rejects")
    old = path.read_bytes()

    def full(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(DiskFullError, match=r"no space left on the device writing .*a\.parquet"):
        write_table(pa.concat_tables([t, t]), path, name="rejects")
    assert path.read_bytes() == old and list((tmp_path / "rej").iterdir()) == [path]


# --- damaged inputs -------------------------------------------------------------------------------

@pytest.mark.parametrize("how", fc.DAMAGES)
@pytest.mark.parametrize("stage", list(fc.DAMAGE_TARGET))
def test_a_damaged_input_shard_is_one_line_naming_it_and_the_fix(host, ref, tmp_path, stage, how):
    t = fc.damaged_input(host, ref, tmp_path / "w", stage, how, references=None, tally=fc.Tally(stage, how))
    assert t.survived == 1, t.notes


def test_truncated_rollout_shard_verify_doctor_repair_rerun_equals_undamaged(host, ref, references, tmp_path):
    """The issue's case: verify dies on a truncated shard; doctor --repair and a re-run give the tables back."""
    t = fc.damaged_input(host, ref, tmp_path / "w", "verify", "truncated", references=references,
                         tally=fc.Tally("verify", "truncated"))
    assert t.survived == 1 and t.rows_lost == 0, t.notes
    moved = list((tmp_path / "w" / ".passband/quarantine").rglob("*.parquet"))
    assert len(moved) == 1 and moved[0].parent.name == "rollouts"  # moved aside, never deleted


def test_read_shard_names_each_kind_of_damage(tmp_path):
    t = schema("rejects").from_rows([{"stage": "ingest", "source": "s", "source_id": "1", "reason": "r",
                                      "detail": None, "excerpt": None}])
    good = write_table(t, tmp_path / "a.parquet", name="rejects")
    cases = {"zero": b"", "half": good.read_bytes()[:40]}
    for name, data in cases.items():
        (tmp_path / f"{name}.parquet").write_bytes(data)
        with pytest.raises(DamagedShardError) as exc:
            read_shard(tmp_path / f"{name}.parquet", name="rejects")
        line = str(exc.value)
        assert "\n" not in line and f"{name}.parquet" in line and "passband doctor --repair" in line
    with pytest.raises(DamagedShardError, match="holds table rejects, not problems"):
        read_shard(good, name="problems")
    with pytest.raises(DamagedShardError, match="damaged shard of table rejects"):
        read_table(tmp_path, name="rejects")


# --- concurrent use -------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", fk.FAULT_STAGES)
def test_readers_in_a_loop_while_the_stage_writes_never_fail_or_see_half(host, ref, tmp_path, stage):
    t = fc.readers_while_writing(host, ref, tmp_path / "w", stage, runs=1, tally=fc.Tally(stage, "readers"))
    _clean(t)


@pytest.fixture(scope="module")
def second_host():
    with fk.StageHost() as h:
        yield h


@pytest.mark.parametrize("stage", ["rollout", "verify", "annotate"])
def test_two_writers_of_one_stage_never_interleave(host, second_host, ref, references, tmp_path, stage):
    t, outcome = fc.two_writers((host, second_host), ref, tmp_path / "w", stage, reference=references[stage],
                                tally=fc.Tally(stage, "writers"))
    _clean(t)
    assert outcome == "refused", t.notes  # these stages run long enough to overlap


@pytest.mark.parametrize("command", ["ingest", "rollout", "verify", "annotate", "reformulate", "publish", "catalog"])
def test_a_second_writer_is_refused_with_the_holder_named(ref, command):
    from pipeline.locks import hold, lock_name

    args = [command, "--params", str(ref / "params.yaml")]
    if command in ("rollout", "verify", "annotate"):
        args += ["--set", "main"]
    with hold(ref, lock_name(command, "main")):
        res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    line = res.output.strip()
    assert "\n" not in line and "is already running" in line and f"pid {os.getpid()}" in line


def test_doctor_repair_refuses_while_a_stage_runs(ref):
    from pipeline.locks import hold

    with hold(ref, "verify-main"):
        res = CliRunner().invoke(cli, ["doctor", "--repair", "--params", str(ref / "params.yaml")])
    assert res.exit_code == 1 and "already running" in res.output


# --- doctor -------------------------------------------------------------------------------------

def test_doctor_finds_each_kind_of_damage_and_repair_moves_it_aside(ref, tmp_path):
    work = fk.copy_repo(ref, tmp_path / "w")
    runner = CliRunner()
    p = ["--params", str(work / "params.yaml")]
    res = runner.invoke(cli, ["doctor", *p])
    assert res.exit_code == 0 and "nothing to repair" in res.output, res.output

    truncated = fc.damage_shard(work, "main", "rollouts", "truncated")
    foreign = fc.damage_shard(work, "main", "verdicts", "other_table")
    zero = fc.damage_shard(work, "reformulated", "problems", "zero_bytes")
    dup_src = sorted((work / "data/rollouts").glob("*.parquet"))[-1]
    dup = work / "data/rollouts" / "zz-copy.parquet"
    dup.write_bytes(dup_src.read_bytes())
    stale = work / "data/verdicts" / ".x.parquet.abc.tmp"
    stale.write_bytes(b"half")
    contents = {q: q.read_bytes() for q in (truncated, foreign, zero, dup, stale)}

    res = runner.invoke(cli, ["doctor", *p])
    assert res.exit_code == 1
    out = res.output
    for q in (truncated, foreign, zero, dup, stale):
        assert str(q.relative_to(work)) in out, (q, out)
    assert "repeat keys" in out and "holds table" in out and "temp file" in out
    assert out.strip().splitlines()[-1] == "Error: 5 problems found: run `passband doctor --repair`, then `dvc repro`"

    res = runner.invoke(cli, ["doctor", "--repair", *p])
    assert res.exit_code == 0 and "moved 5 paths" in res.output, res.output
    quarantine = next((work / ".passband/quarantine").iterdir())
    for q, data in contents.items():
        assert not q.exists() and (quarantine / q.relative_to(work)).read_bytes() == data  # moved, byte for byte
    res = runner.invoke(cli, ["doctor", *p])
    assert res.exit_code == 0, res.output
    assert "verdicts without a rollout" in res.output  # the truncated shard's verdicts wait for their rollouts


def test_sql_on_a_damaged_shard_is_one_line(ref, tmp_path):
    work = fk.copy_repo(ref, tmp_path / "w")
    shard = fc.damage_shard(work, "main", "rollouts", "truncated")
    res = CliRunner().invoke(cli, ["sql", "SELECT count(*) FROM problems", "--params", str(work / "params.yaml")])
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and shard.name in res.output and "doctor --repair" in res.output


# --- file modes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_every_file_passband_writes_follows_the_umask(host, tmp_path, umask):
    fk.build(host, tmp_path, umask=umask)
    data = tmp_path / "data"
    files = [q for q in data.rglob("*") if q.is_file()]
    dirs = [q for q in data.rglob("*") if q.is_dir()]
    assert len(files) > 30 and any(q.suffix == ".duckdb" for q in files) and any(q.suffix == ".png" for q in files)
    wrong = {str(q.relative_to(tmp_path)): oct(stat.S_IMODE(q.stat().st_mode)) for q in files
             if stat.S_IMODE(q.stat().st_mode) != 0o666 & ~umask}
    wrong |= {str(q.relative_to(tmp_path)): oct(stat.S_IMODE(q.stat().st_mode)) for q in dirs
              if stat.S_IMODE(q.stat().st_mode) != 0o777 & ~umask}
    assert not wrong


def test_model_checkpoint_modes_follow_the_umask(tmp_path):
    from pipeline.model import _relax_permissions

    d = tmp_path / "ckpt"
    d.mkdir(mode=0o700)
    (d / "w.safetensors").write_bytes(b"x")
    os.chmod(d / "w.safetensors", 0o600)
    old = os.umask(0o027)
    try:
        _relax_permissions(d)
    finally:
        os.umask(old)
    assert stat.S_IMODE(d.stat().st_mode) == 0o750 and stat.S_IMODE((d / "w.safetensors").stat().st_mode) == 0o640

