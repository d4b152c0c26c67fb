"""Incremental annotate: a rerun keeps the stored flags of unchanged groups and detectors, recomputes the rest, and
writes exactly what a run from scratch writes on the same inputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from annotate_job import write_job, write_params

from pipeline.annotate import detector_pool as dp
from pipeline.annotate import run
from pipeline.annotate.incremental import STATE_DIR, STATE_FILE
from pipeline.config import load_params
from pipeline.io import read_table, write_table
from pipeline.schema import schema


def _run(root: Path):
    return run(load_params(root / "params.yaml"), root=root, progress=False, plots=False)


def _outputs(root: Path):
    return read_table(root / "data/flags", name="flags"), read_table(root / "data/difficulty", name="difficulty")


def _fresh(tmp: Path, job: Path, name: str, extra: dict | None = None):
    """The same inputs as ``job``'s, annotated from scratch in a folder of their own."""
    fresh = tmp / name
    write_params(fresh, extra)
    for t in ("problems", "rollouts", "verdicts"):
        shutil.copytree(job / "data" / t, fresh / "data" / t)
    r = _run(fresh)
    assert r.reused_groups == 0
    return _outputs(fresh)


def _same(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.equals(y), (x.num_rows, y.num_rows)


@pytest.fixture
def seen(monkeypatch) -> list[str]:
    """The problem_id of every row a Python detector reads (in the stage's process or a worker's: the detectors
    run in this process for jobs this small)."""
    rows: list[str] = []
    real = dp.run_detectors

    def counting(batches, *a, **k):
        def spy():
            for b in batches:
                rows.extend(b.column("problem_id").to_pylist())
                yield b
        return real(spy(), *a, **k)

    monkeypatch.setattr(dp, "run_detectors", counting)
    return rows


def test_a_rerun_recomputes_only_what_changed(tmp_path, seen):
    job = tmp_path / "job"
    vid = write_params(job)
    write_job(job, range(60), vid)
    first = _run(job)
    assert first.reused_groups == 0 and first.groups == 60
    assert (job / "data/flags" / STATE_DIR / STATE_FILE).is_file()

    # nothing changed: every group reused, the same files
    before = _outputs(job)
    seen.clear()
    again = _run(job)
    assert not seen
    assert again.reused_groups == 60 and again.rerun_detectors == []
    _same(_outputs(job), before)

    # +5 problems in a new shard: only they are new; the outputs are a fresh run's
    write_job(job, range(60, 65), vid, shard=1)
    seen.clear()
    grown = _run(job)
    assert seen and set(seen) <= {f"p{i:04d}" for i in range(60, 65)}  # the detectors read the new groups only
    assert grown.reused_groups == 60 and grown.groups == 65
    flags, _ = _outputs(job)
    assert flags.num_rows > 300 and len(set(flags.column("flag").to_pylist())) >= 5
    _same(_outputs(job), _fresh(tmp_path, job, "fresh-grown"))
    assert grown.flag_rates == _run(tmp_path / "fresh-grown").flag_rates

    # one verdict of one group changes: that group only is recomputed
    verdicts = read_table(job / "data/verdicts", name="verdicts").to_pylist()
    hit = next(r for r in verdicts if r["problem_id"] == "p0003" and r["status"] == "incorrect")
    hit["status"] = "correct"
    for p in (job / "data/verdicts").glob("*.parquet"):
        p.unlink()
    write_table(schema("verdicts").from_rows(verdicts), job / "data/verdicts/part-0.parquet", name="verdicts")
    changed = _run(job)
    assert changed.reused_groups == 64
    _same(_outputs(job), _fresh(tmp_path, job, "fresh-verdict"))

    # one detector's knob changes: that detector alone reruns, on every group
    extra = {"annotate": {"options": {"repetition_loop": {"min_words": 200}}}}
    write_params(job, extra)
    knob = _run(job)
    assert knob.reused_groups == 65 and knob.rerun_detectors == ["repetition_loop"]
    after = _outputs(job)
    assert "repetition_loop" not in set(after[0].column("flag").to_pylist())  # the knob silenced it
    _same(after, _fresh(tmp_path, job, "fresh-knob", extra))

    # a detector dropped from annotate.flags: its stored rows go, nothing else reruns
    extra = {"annotate": {"options": {"repetition_loop": {"min_words": 200}},
                          "flags": ["truncated", "answer_flip", "multiple_answers"]}}
    write_params(job, extra)
    fewer = _run(job)
    assert fewer.reused_groups == 65 and fewer.rerun_detectors == []
    _same(_outputs(job), _fresh(tmp_path, job, "fresh-fewer", extra))


def test_flags_not_matching_their_fingerprints_are_recomputed(tmp_path):
    job = tmp_path / "job"
    vid = write_params(job)
    write_job(job, range(20), vid)
    _run(job)
    # the flags file replaced after the fingerprints were written (a kill between the writes, a checkout of the
    # flags alone): its digest no longer matches, nothing is reused
    flags_file = job / "data/flags/part-0.parquet"
    t = pq.read_table(flags_file)
    pq.write_table(t.slice(0, t.num_rows // 2), flags_file)
    assert _run(job).reused_groups == 0
    _same(_outputs(job), _fresh(tmp_path, job, "fresh"))
    # switched off: every row recomputed
    write_params(job, {"annotate": {"incremental": False}})
    assert _run(job).reused_groups == 0


def test_duckdb_out_of_its_memory_limit_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    """DuckDB past ``annotate.memory_limit_mb`` (at 240,000 rollouts under 256 MB, before the group fingerprints kept
    only digests) came out as its traceback; it is one line through the CLI, with the setting to raise."""
    import duckdb
    from click.testing import CliRunner

    from pipeline.annotate import incremental
    from pipeline.cli import cli

    vid = write_params(tmp_path)
    write_job(tmp_path, range(4), vid)

    def out_of_memory(con, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 2.0 KiB "
                                          "(248.8 MiB/244.1 MiB used)\n\nPossible solutions: ...")

    monkeypatch.setattr(incremental, "group_fingerprints", out_of_memory)
    res = CliRunner().invoke(cli, ["annotate", "--params", str(tmp_path / "params.yaml"), "--no-progress", "--no-plots"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1] == (
        "Error: annotate: DuckDB needed more than annotate.memory_limit_mb = 512 (Out of Memory Error: failed to "
        "allocate data of size 2.0 KiB (248.8 MiB/244.1 MiB used)); raise it in params.yaml")


def test_a_rewritten_rollouts_shard_recomputes_the_groups_it_holds(tmp_path, seen):
    """A rollout's columns enter a group's fingerprint as the digest of the shard holding it: a completion changed
    in one shard recomputes that shard's groups, and only those (the other shard's text is not read again)."""
    job = tmp_path / "job"
    vid = write_params(job)
    write_job(job, range(20), vid)
    write_job(job, range(20, 25), vid, shard=1)
    assert _run(job).reused_groups == 0
    shard = job / "data/rollouts/part-1.parquet"
    rows = pq.read_table(shard).to_pylist()
    target = next(r for r in rows if r["problem_id"] == "p0022")
    target["completion"] = "So the answer is 7. The answer is 7. The answer is 7. The answer is 7. \\boxed{7}"
    write_table(schema("rollouts").from_rows(rows), shard, name="rollouts")
    seen.clear()
    changed = _run(job)
    assert changed.reused_groups == 20
    assert seen and set(seen) <= {f"p{i:04d}" for i in range(20, 25)}
    _same(_outputs(job), _fresh(tmp_path, job, "fresh-rollout"))


def test_a_rerun_where_most_groups_are_new_scans_them_all_and_equals_a_fresh_run(tmp_path, seen):
    """Fewer groups reused than new: the candidate scan reads every group (no copy of the new ones' text first)
    and drops the reused groups' keys; the result is still a fresh run's."""
    job = tmp_path / "job"
    vid = write_params(job)
    write_job(job, range(8), vid)
    _run(job)
    write_job(job, range(8, 30), vid, shard=1)
    seen.clear()
    grown = _run(job)
    assert grown.reused_groups == 8 and grown.groups == 30
    assert seen and set(seen) <= {f"p{i:04d}" for i in range(8, 30)}
    _same(_outputs(job), _fresh(tmp_path, job, "fresh"))


def test_a_detector_fingerprint_covers_every_module_of_the_shared_packages(monkeypatch):
    """pipeline.arith is a package: its statements reader lives in arith/text.py, not in its __init__. A change there
    (or to the answer reading in pipeline/verify/answer_text.py) must recompute every detector's rows, not reuse them."""
    from pipeline.annotate import incremental
    from pipeline.annotate.detectors import get_detectors

    arith = incremental._source("pipeline.arith")
    assert b"def statements(" in arith and b"def evaluate(" in arith  # arith/text.py and arith/evaluate.py
    assert b"def stated_value(" in b"".join(incremental._source(m) for m in incremental.SHARED_MODULES)
    real = incremental._source

    def edited(module: str) -> bytes:  # the same tree with one line of arith/text.py changed
        got = real(module)
        return got.replace(b"def statements(", b"def statements_(") if module == "pipeline.arith" else got

    dets = get_detectors(None)
    before = incremental.detector_fingerprints(dets)
    monkeypatch.setattr(incremental, "_source", edited)
    after = incremental.detector_fingerprints(dets)
    assert all(before[name] != after[name] for name in before)
