"""A write removes the temps a killed write left, never the live temp of another process writing the same file (two
vLLM replicas of one rollout stage write one logging config at once: the CI run of 8 Dec 2026 lost a replica to it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.io import atomic_write_text, remove_stale_temps, temp_prefix


def test_a_live_writers_temp_is_kept_and_a_dead_ones_removed(tmp_path: Path) -> None:
    target = tmp_path / "vllm.logging.json"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    try:
        theirs = tmp_path / f".vllm.logging.json.{live.pid}.abc123.tmp"
        killed = tmp_path / f".vllm.logging.json.{int(dead.stdout)}.def456.tmp"
        old_style = tmp_path / ".vllm.logging.json.ghi789.tmp"  # written before temps carried a pid
        mine = tmp_path / f"{temp_prefix(target)}jkl.tmp"  # this process's own, left by an earlier failed write
        for p in (theirs, killed, old_style, mine):
            p.write_text("half")
        atomic_write_text(target, "{}")
        assert target.read_text() == "{}"
        assert theirs.exists() and not killed.exists() and not old_style.exists() and not mine.exists()
    finally:
        live.kill()
        live.wait()
    remove_stale_temps(target)  # its writer gone, the temp is stale
    assert not theirs.exists()


def test_a_temp_names_its_writer() -> None:
    assert temp_prefix(Path("/x/a.parquet")) == f".a.parquet.{os.getpid()}."
