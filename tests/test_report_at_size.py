"""The report's item browser at a job's size: the shown rollouts' text, far above DuckDB's memory limit, goes through
without failing, and the item files are the same whatever the limit and however the shards are ordered (the
rollouts config of publish failed here once: tests/test_publish_rollouts_streaming.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from publish_tables import make_repo
from rollout_tables import LONG, add_rollouts, long_texts

from pipeline.cli import cli
from pipeline.report import queries

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

CAP = 20  # every rollout of a group shown (K + 2 written)


def job(root: Path, *, shuffle: bool) -> Path:
    root = add_rollouts(make_repo(root, max_rollouts_per_item=6))
    long_texts(root, shuffle=shuffle)
    (root / "params.yaml").write_text((root / "params.yaml").read_text()
                                      + f"report: {{max_rollouts_per_item: {CAP}, items_per_file: 4}}\n")
    return root


def item_files(root: Path) -> dict[str, bytes]:
    folder = root / "data/report/items"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.js"))}


def report(root: Path):
    return CliRunner().invoke(cli, ["report", "--params", str(root / "params.yaml")])


def test_shown_text_far_above_duckdbs_limit_gives_the_same_item_files(tmp_path, monkeypatch):
    reference = job(tmp_path / "ref", shuffle=False)
    result = report(reference)
    assert result.exit_code == 0, result.output

    root = job(tmp_path / "small", shuffle=True)
    monkeypatch.setattr(queries, "MEMORY_LIMIT_MB", 64)
    text = LONG * sum(pq.ParquetFile(p).metadata.num_rows for p in root.glob("data/**/rollouts/*.parquet"))
    assert text > 2 * queries.MEMORY_LIMIT_MB * 2**20
    result = report(root)
    assert result.exit_code == 0, result.output

    got = item_files(root)
    assert got == item_files(reference) and len(got) >= 3  # byte for byte: same records, same order
    shown = 0
    for body in got.values():
        records = json.loads(re.fullmatch(r"PB\.items\(\d+, (.*)\);\n", body.decode(), re.S)[1])
        for rec in records:
            for pol in rec["policies"]:
                for r in pol["rollouts"]:
                    assert len(r["final"]) > LONG - 100  # the whole completion, not a snippet
                    shown += len(r["final"])
    assert shown > 1.5 * queries.MEMORY_LIMIT_MB * 2**20  # the shown text itself (110 MB), not only the tables, was large
