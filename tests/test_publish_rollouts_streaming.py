"""Publish's rollouts config is built without the job's text in memory: DuckDB sorts keys only, the completions are
gathered shard by shard into small buckets; the files are the same whatever the buckets, the shards' order and
DuckDB's memory limit. A failure of DuckDB while building it is one line, not a traceback."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from publish_tables import make_repo
from rollout_tables import LONG, add_rollouts, long_texts  # LONG: 160 MB of text, far above DuckDB's limit below

from pipeline.cli import cli
from pipeline.publish import rollouts as ro

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)



def publish(root: Path):
    return CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")])


def config_files(root: Path) -> dict[str, bytes]:
    folder = root / "data/published/data/rollouts"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The config built the default way (one bucket, one shard a set) from long completions."""
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("ref") / "repo", max_rollouts_per_item=6))
    long_texts(root, shuffle=False)
    result = publish(root)
    assert result.exit_code == 0, result.output
    return config_files(root)


def test_small_buckets_a_tiny_memory_limit_and_shuffled_shards_publish_the_same_files(reference, tmp_path,
                                                                                     monkeypatch):
    root = add_rollouts(make_repo(tmp_path / "repo", max_rollouts_per_item=6))
    long_texts(root, shuffle=True)
    text = LONG * sum(pq.ParquetFile(p).metadata.num_rows for p in root.glob("data/**/rollouts/*.parquet"))
    monkeypatch.setattr(ro, "MEMORY_LIMIT_MB", 64)
    assert text > 2 * ro.MEMORY_LIMIT_MB * 2**20  # the text could not pass through DuckDB's sort in memory
    monkeypatch.setattr(ro, "BUCKET_BYTES", 3 * LONG)  # a bucket: ~3 completions
    buckets: set[int] = set()
    real = ro.scatter

    def counting(con, places, spill):
        real(con, places, spill)
        buckets.update(int(p.stem.split("-")[1]) for p in spill.glob("bucket-*.arrow"))

    monkeypatch.setattr(ro, "scatter", counting)
    result = publish(root)
    assert result.exit_code == 0, result.output
    assert len(buckets) > 20  # the text went through many buckets, one at a time
    got = config_files(root)
    assert list(got) == list(reference) and len(got) >= 2
    assert got == reference  # byte for byte
    gens = pq.read_table(root / "data/published/data/rollouts" / next(iter(got)), columns=["generations"])
    assert pc.unique(pc.utf8_length(pc.list_flatten(gens["generations"]))).to_pylist() == [LONG]


def test_a_duckdb_failure_is_one_line(tmp_path, monkeypatch):
    root = add_rollouts(make_repo(tmp_path / "repo"))

    def fail(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to pin block of size 256.0 KiB")

    monkeypatch.setattr(ro, "scatter", fail)
    result = publish(root)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: publish: building the rollouts config failed (OutOfMemoryException: Out of Memory Error: failed to pin "
        "block of size 256.0 KiB); publish.rollouts: false builds the folder without it"]
    assert not (root / "data/published").exists()  # nothing half-written left visible
