"""The generated blocks of docs/*.md (pipeline/docs.py) agree with their sources, and the check sees a hand edit.

``python -m pipeline.docs --write`` rewrites them; this is the CI check. Each block is edited by hand in a copy of
the docs, and the check must name it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pipeline import docs

REPO = Path(__file__).resolve().parent.parent


def test_every_generated_block_is_up_to_date():
    assert docs.stale() == [], "run: python -m pipeline.docs --write"


def _copy_docs(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    return tmp_path


@pytest.mark.parametrize("block", docs.BLOCKS, ids=lambda b: b.name)
def test_a_hand_edit_inside_a_block_fails_the_check(tmp_path, block, capsys):
    root = _copy_docs(tmp_path)
    page = root / block.page
    text = page.read_text()
    start = text.index(block.begin.split(" (")[0])
    end = text.index(block.end, start)
    inside = text[start:end]
    digit = re.search(r"\d", inside[len(block.begin):])  # change one figure (or, without one, one word)
    at = start + len(block.begin) + (digit.start() if digit else inside[len(block.begin):].index(" ") + 1)
    page.write_text(text[:at] + ("7" if text[at] != "7" else "8") + text[at + 1:])
    assert docs.main(["--check", "--root", str(root)]) == 1
    assert f"{block.page}: {block.name}" in capsys.readouterr().err
    assert docs.main(["--write", "--root", str(root)]) == 0  # --write restores it
    assert page.read_text() == text
    assert docs.main(["--check", "--root", str(root)]) == 0


def test_an_edit_outside_the_blocks_is_left_alone(tmp_path):
    root = _copy_docs(tmp_path)
    page = root / "docs/flags.md"
    page.write_text(page.read_text().replace("# Flags you can trust", "# Flags you can trust (edited)"))
    assert docs.stale(root) == []


def test_a_page_without_its_markers_is_reported(tmp_path):
    root = _copy_docs(tmp_path)
    page = root / "docs/cli.md"
    page.write_text("# Command-line reference\n")
    assert docs.stale(root) == ["docs/cli.md: no `<!-- generated:cli begin ...` / `<!-- generated:cli end -->` pair; "
                                "add them where the block belongs"]


def test_the_flags_table_lists_every_flag_with_the_measured_figures():
    import yaml

    from pipeline.annotate.detectors import DETECTORS
    from pipeline.annotate.flag_runner import DETECTOR_ERROR

    body = docs.flags_markdown()
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `(\w+)` \|.*$", body, flags=re.M)}
    assert set(rows) == set(DETECTORS) | {DETECTOR_ERROR}
    measured = yaml.safe_load((REPO / "pipeline/annotate/flag_quality.yaml").read_text())["flags"]
    for flag, f in measured.items():
        assert f"| {f['precision']:.2f} [" in rows[flag] and f"| {f['recall']:.2f} [" in rows[flag], flag


def test_every_config_key_is_listed_with_a_description():
    body = docs.config_markdown()
    rows = re.findall(r"^\| `([^`]+)`[^|]*\| [^|]*(?:\\\|[^|]*)* \| [^|]* \| (.*) \|$", body, flags=re.M)
    keys = {k for k, _ in rows}
    assert {"drift.pairs", "verify.executor", "paths.catalog", "rollout.budget.min_k",
            "policies.<name>.sampling.temperature", "ingest.sources[].kind"} <= keys
    assert [k for k, d in rows if not d.strip()] == [], "give these fields a description in pipeline/config.py"


def test_the_stage_list_has_every_dvc_stage():
    import yaml

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    body = docs.stages_markdown()
    assert re.findall(r"^\| `(\w+)` \|", body, flags=re.M) == list(stages)


def test_the_cli_reference_has_every_subcommand():
    from pipeline.cli import COMMANDS

    body = docs.cli_markdown()
    assert re.findall(r"^## `passband ([\w-]+)`", body, flags=re.M) == list(COMMANDS)
    assert "Usage: passband verify [OPTIONS]" in body
