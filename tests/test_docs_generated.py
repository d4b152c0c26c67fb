"""Every generated target (pipeline/docs/) agrees with its source, and the check sees a hand edit of each.

``python -m pipeline.docs --write`` regenerates them; ``--check`` runs in CI (.ci/run). Each generated block is
edited by hand in a copy of its page, each generator's output in a copy of the repository, and the check must
name it, ``--write`` must undo the edit, and the check must pass again.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import docs

REPO = Path(__file__).resolve().parent.parent


def test_every_generated_block_is_up_to_date():
    assert docs.stale(only=[b.name for b in docs.BLOCKS]) == [], "run: python -m pipeline.docs --write"


def test_every_generator_is_a_target_in_dependency_order():
    names = [t.name for t in docs.TARGETS]
    assert set(names) == {b.name for b in docs.BLOCKS} | {s.name for s in docs.SCRIPTS} and len(set(names)) == len(names)
    assert names[0] == "flag_quality" and names[-1] == "outputs"  # the flags block and the summary quote the figures
    assert all((REPO / s.path).is_file() for s in docs.SCRIPTS)


def test_the_operations_page_lists_every_target():
    page = (REPO / "docs/operations.md").read_text()
    section = page.split("## Generated files", 1)[1].split("\n## ", 1)[0]
    assert [t.name for t in docs.TARGETS if f"`{t.name}`" not in section] == []


def test_an_unknown_target_is_one_line(capsys):
    assert docs.main(["--check", "--only", "flagz"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown target 'flagz'; known: flag_quality, ")


def _copy_docs(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    for page in {b.page for b in docs.BLOCKS if not b.page.startswith("docs/")}:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / page, tmp_path / page)
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
    only = [b.name for b in docs.BLOCKS]  # the generators are edited in a copy of the repository, below
    assert docs.main(["--check", "--root", str(root), *(f"--only={n}" for n in only)]) == 1
    assert f"{block.page}: {block.name}" in capsys.readouterr().err
    assert docs.main(["--write", "--root", str(root), *(f"--only={n}" for n in only)]) == 0  # --write restores it
    assert page.read_text() == text
    assert docs.main(["--check", "--root", str(root), *(f"--only={n}" for n in only)]) == 0


def test_an_edit_outside_the_blocks_is_left_alone(tmp_path):
    root = _copy_docs(tmp_path)
    page = root / "docs/flags.md"
    page.write_text(page.read_text().replace("# Flags you can trust", "# Flags you can trust (edited)"))
    assert docs.stale(root, only=[b.name for b in docs.BLOCKS]) == []


def test_a_page_without_its_markers_is_reported(tmp_path):
    root = _copy_docs(tmp_path)
    page = root / "docs/cli.md"
    page.write_text("# Command-line reference\n")
    assert docs.stale(root, only=["cli"]) == ["docs/cli.md: no `<!-- generated:cli begin ...` / "
                                              "`<!-- generated:cli end -->` pair; add them where the block belongs"]


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
    assert [k for k, d in rows if not d.strip()] == [], "give these fields a description in pipeline/config/"


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



def test_the_suite_tables_show_the_newest_run_and_mark_the_rest(tmp_path, monkeypatch):
    times = tmp_path / "benchmarks" / "suite_times.yaml"
    times.parent.mkdir()
    times.write_text("""suites:
  fast: {command: pytest -m "not engine", what: no engine}
  full: {command: pytest}
runs:
  - {suite: full, date: 2026-11-20, wall: 9 min, processes: 1}
  - {suite: full, date: 2026-11-25, wall: 5 min, processes: 2, passed: 1200, skipped: 1, how: fresh clone}
  - {suite: full, date: 2026-11-22, wall: 8 min, processes: 1}
  - {suite: full, date: 2026-11-26, wall: 11 min, processes: 2, how: fresh clone, beside: two busy loops}
  - {suite: fast, date: 2026-11-21, wall: 3 min, processes: 1, beside: a GRPO job}
""")
    monkeypatch.setattr(docs.blocks, "ROOT", tmp_path)  # where the generators read their sources
    readme = docs.suites_markdown().splitlines()
    # a run under load is shown only where no quiet one is, and never supersedes one (nor is superseded by one)
    assert readme[2] == '| fast | `pytest -m "not engine"`: no engine | 3 min on one process (beside a GRPO job; 21 Nov) |'
    assert readme[3] == ("| full | `pytest` | 5 min on 2 processes (fresh clone; 1,200 passed, 1 skipped; 25 Nov); "
                         "8 min on one process (22 Nov) |")
    runs = [row.split(" | ") for row in docs.suite_runs_markdown().splitlines()[2:]]
    assert [(r[0], r[-2], r[-1]) for r in runs] == [
        ("| 2026-11-26", "11 min on 2 processes (fresh clone beside two busy loops)", "current |"),
        ("| 2026-11-25", "5 min on 2 processes (fresh clone; 1,200 passed, 1 skipped)", "current |"),
        ("| 2026-11-22", "8 min on one process", "current |"),
        ("| 2026-11-21", "3 min on one process (beside a GRPO job)", "current |"),
        ("| 2026-11-20", "9 min on one process", "superseded by a newer run |")]
    times.write_text(times.read_text().replace("suite: full, date: 2026-11-20", "suite: ful, date: 2026-11-20"))
    with pytest.raises(docs.DocsError, match="a run of unknown suite 'ful'; known: fast, full"):
        docs.suites_markdown()


# --- the generators, in a copy of the repository -------------------------------------------------------------


def _copy_repo(tmp_path: Path) -> Path:
    """What a fresh clone holds (tracked and new files), in ``tmp_path/repo``, with ../shared beside it; a git
    repository, since DVC (the dvc.yaml deps) needs one."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    root = tmp_path / "repo"
    for rel in filter(None, listed):
        if (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    if (REPO.parent / "shared").exists():
        (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _edit_text(rel: str, old: str, new: str) -> Callable[[Path], Path]:
    def edit(root: Path) -> Path:
        path = root / rel
        text = path.read_text()
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new, 1))
        return path
    return edit


def _edit_preset_fixture(root: Path) -> Path:
    path = root / "tests/data/presets/gsm8k/train-00000-of-00001.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0]["question"] += " (edited)"
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    return path


def _edit_summary(root: Path) -> Path:  # one figure of README's band counts
    path = root / "README.md"
    text = path.read_text()
    new = re.sub(r"(│ smollm2-fewshot +┆ learnable ┆ )(\d+)", lambda m: m[1] + str(int(m[2]) + 1), text, count=1)
    assert new != text
    path.write_text(new)
    return path


EDITS = {
    "flag_quality": _edit_text("pipeline/annotate/flag_quality.yaml", "labelled_rows: ", "labelled_rows: 1"),
    "preset_fixtures": _edit_preset_fixture,
    "thinking_cases": _edit_text("tests/data/thinking_cases.jsonl", '"expected": "correct"', '"expected": "incorrect"'),
    "dvc_deps": _edit_text("dvc.yaml", "    deps: [pipeline/annotate, ", "    deps: ["),
    "outputs": _edit_summary,
}


def test_every_generator_has_an_edit_below():
    assert set(EDITS) == {s.name for s in docs.SCRIPTS}


@pytest.mark.slow  # each generator runs twice (check, write) in a fresh copy: up to 40 s of CPU
@pytest.mark.parametrize("script", docs.SCRIPTS, ids=lambda s: s.name)
def test_a_hand_edit_of_a_generated_file_fails_the_check(tmp_path, script, capsys):
    if script.name == "thinking_cases" and not (REPO.parent / "shared" / "data").is_dir():
        from shared_data import shared_path

        shared_path("")  # skips, or fails under PASSBAND_REQUIRE_SHARED=1
    root = _copy_repo(tmp_path)
    path = EDITS[script.name](root)
    edited = path.read_bytes()
    argv = ["--root", str(root), "--only", script.name]
    assert docs.main(["--check", *argv]) == 1
    assert f"{script.path}: {script.name} (" in capsys.readouterr().err
    assert docs.main(["--write", *argv]) == 0
    assert path.read_bytes() != edited
    if path.suffix == ".parquet":  # Parquet's footer names the writer's pyarrow version: the check compares tables
        assert docs.main(["--check", *argv]) == 0
    else:  # the committed file again, byte for byte (so the check passes, without a third run)
        assert path.read_bytes() == (REPO / path.relative_to(root)).read_bytes()
