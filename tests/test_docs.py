"""The commands and outputs in README.md and docs/*.md that are marked for checking run, and match.

Only blocks marked with an HTML comment on the line before them are checked, so pages without
markers are left alone:

- ``<!-- check: output -->`` before a ```bash block holding one ``passband ...`` command, followed
  by a bare ``` block: the command runs (through the CLI, in the small catalog below) and its
  output must equal the block, character for character.
- ``<!-- check: runs -->`` before a ```sql or ```bash block: every query in it (the SQL block, or
  each ``passband sql "..."``) runs on the small catalog; when a bare ``` block with a table
  follows, its header must name the query's columns.

The catalog is built from real completions of the embedded model (tests/data/embedded_completions.jsonl):
their problems, verified by the verify stage and annotated by the annotate stage, in a temp dir.

``python tests/test_docs.py --write`` rewrites the output blocks from what their commands print now (README's
``passband summary`` changes with a flag or a view); ``--check`` exits 1 naming each block that differs.
``python -m pipeline.docs`` runs both with the repository's other generators.
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.catalog import query
from pipeline.cli import cli

# run as a script (--write, --check), tests/conftest.py has not put the support modules on the path
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
import embedded_set

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- check: (output|runs) -->\n```(\w*)\n(.*?)```\n(?:```\n(.*?)```\n)?", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: str
    kind: str  # output | runs
    lang: str
    code: str
    output: str | None

    def __str__(self) -> str:
        return f"{self.page}: {self.code.strip().splitlines()[0][:60]}"


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def marked_blocks() -> list[Block]:
    return [Block(str(p.relative_to(REPO)), m[1], m[2], m[3], m[4])
            for p in pages() for m in MARKER.finditer(p.read_text())]


def queries(block: Block) -> list[str]:
    if block.lang == "sql":
        return [block.code.strip()]
    return [shlex.split(q)[0] for q in re.findall(r'^passband sql ("(?:[^"\\]|\\.)*")', block.code, flags=re.M | re.S)]


def header(table: str) -> list[str]:
    """Column names of a `passband sql` table (the first row between │ bars)."""
    row = next(line for line in table.splitlines() if line.startswith("│"))
    return [c.strip() for c in row.strip("│").split("┆")]


def printed(code: str, root: Path) -> str:
    """What an output block's one ``passband ...`` command prints on the catalog under ``root``."""
    argv = shlex.split(code.strip())
    assert argv[0] == "passband" and len(code.strip().splitlines()) == 1, code
    return CliRunner().invoke(cli, [*argv[1:], "--params", str(root / "params.yaml")]).output


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docs")
    params, _ = embedded_set.build(tmp)
    return params, tmp


def test_the_docs_have_checked_blocks():
    blocks = marked_blocks()
    assert {b.page for b in blocks} >= {"README.md", "docs/tables.md", "docs/configuration.md"}
    assert sum(b.kind == "output" for b in blocks) >= 3
    qs = [q for b in blocks if b.kind == "runs" for q in queries(b)]
    assert any("rare_successes" in q for q in qs) and any("flagged_correct" in q for q in qs)


def test_the_marker_is_required():
    page = "Intro\n\n```sql\nSELECT nope FROM nowhere\n```\n\n<!-- check: runs -->\n```sql\nSELECT 1\n```\n"
    assert [m[3] for m in MARKER.finditer(page)] == ["SELECT 1\n"]


@pytest.mark.parametrize("block", [b for b in marked_blocks() if b.kind == "runs"], ids=str)
def test_marked_queries_run(catalog, block):
    params, root = catalog
    qs = queries(block)
    assert qs, f"{block}: a `check: runs` block with no query"
    for sql in qs:
        df = query(params, sql, root=root)
        if block.output and len(qs) == 1:
            assert header(block.output) == df.columns, block


@pytest.mark.parametrize("block", [b for b in marked_blocks() if b.kind == "output"], ids=str)
def test_marked_outputs_match(catalog, block):
    _, root = catalog
    assert block.output is not None, f"{block}: a `check: output` block needs the output block after it"
    output = printed(block.code, root)
    assert output == block.output, f"{block}: the page shows\n{block.output}\nthe command printed\n{output}"


def test_flag_kinds_follow_the_registry_and_drive_flagged_correct(catalog):
    from pipeline.annotate.detectors import DETECTORS

    params, root = catalog
    kinds = query(params, "SELECT flag, kind FROM flag_kinds", root=root)
    assert dict(zip(kinds["flag"], kinds["kind"], strict=True)) == {n: d.kind for n, d in DETECTORS.items()}
    # flagged_correct lists exactly the shortcut flags on correct problems' rollouts, never a risk/degeneracy flag
    seen = query(params, "SELECT DISTINCT unnest(flags_seen) AS flag FROM flagged_correct", root=root)["flag"].to_list()
    shortcuts = {n for n, d in DETECTORS.items() if d.kind == "shortcut"}
    assert seen and set(seen) <= shortcuts


def test_views_name_the_policies_next_to_their_ids(catalog):
    params, root = catalog
    for view in ("band_counts", "rare_successes", "flagged_correct"):
        got = query(params, f"SELECT DISTINCT policy_id, policy FROM {view} ORDER BY 1", root=root).rows()
        assert set(got) <= {("pol_chat_boxed", "smollm2-chat_boxed"), ("pol_fewshot", "smollm2-fewshot")}, view
        assert got or view == "rare_successes", view  # no group of 3 samples has a rare success


def test_views_see_the_annotations(catalog):
    from pipeline.bands import BANDS

    params, root = catalog
    bands = query(params, "SELECT band, sum(problems) AS n FROM band_counts GROUP BY band", root=root)
    diff = query(params, "SELECT band, count(*) AS n FROM difficulty GROUP BY band", root=root)
    assert dict(zip(bands["band"], bands["n"], strict=True)) == dict(zip(diff["band"], diff["n"], strict=True))
    assert len(diff) >= 3
    order = query(params, "SELECT band FROM bands ORDER BY band_order", root=root)["band"].to_list()
    assert order == list(BANDS)
    statuses = set(query(params, "SELECT DISTINCT status FROM verdicts", root=root)["status"].to_list())
    assert {"correct", "incorrect", "no_answer"} <= statuses


def regenerate(write: bool) -> list[str]:
    """The output blocks whose page differs from what their command prints now (rewritten when ``write``)."""
    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        embedded_set.build(root)
        for page in pages():
            text = page.read_text()
            new, end = [], 0
            for m in MARKER.finditer(text):
                if m[1] != "output":
                    continue
                block = Block(str(page.relative_to(REPO)), m[1], m[2], m[3], m[4])
                if m[4] is None:
                    raise SystemExit(f"{block}: a `check: output` block needs the output block after it")
                if (output := printed(m[3], root)) != m[4]:
                    differ.append(str(block))
                    new += [text[end:m.start(4)], output]
                    end = m.end(4)
            if write and end:
                page.write_text("".join(new) + text[end:])
    return differ


if __name__ == "__main__":
    differ = regenerate(write=sys.argv[1:] == ["--write"])
    if differ and sys.argv[1:] == ["--check"]:
        print(f"output blocks differ from what their command prints: {'; '.join(differ)} "
              "(run: python tests/test_docs.py --write)", file=sys.stderr)
        sys.exit(1)


def test_the_readme_fits_in_8_kib_and_keeps_its_two_commands():
    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= 8192, f"README.md is {len(readme):,} bytes: move detail to docs/ or a RESULTS.md"
    text = readme.decode()
    two = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert "dvc repro" in two and ".venv/bin/python -m pytest" in two, "README's two commands: the main job, the tests"
    ci = (REPO / ".ci/run").read_text()
    # CI runs the tests command README shows, after the check that every generated file is current
    assert ci.index(".venv/bin/python -m pipeline.docs --check") < ci.index(".venv/bin/python -m pytest")


def test_the_readme_keeps_headroom_that_a_new_detector_does_not_eat(catalog, monkeypatch):
    """README has at least 500 bytes under its 8 KiB cap, and its generated outputs do not grow with the registry:
    with one more built-in detector registered, every README block prints the same (no row per detector)."""
    from pipeline.annotate.detectors import DETECTORS, Detector, register

    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= 8192 - 500, f"README.md is {len(readme):,} bytes: keep 500 bytes of headroom"
    blocks = [b for b in marked_blocks() if b.page == "README.md" and b.kind == "output"]
    assert blocks
    _, root = catalog
    before = [printed(b.code, root) for b in blocks]
    register(type("ZzExtra", (Detector,), {"name": "zz_extra_detector", "kind": "degeneracy", "where": "false",
                                           "__doc__": "One more built-in detector."}))
    try:
        assert [printed(b.code, root) for b in blocks] == before
    finally:
        DETECTORS.remove("zz_extra_detector")


def test_the_readme_links_the_measured_results():
    text = (REPO / "README.md").read_text()
    for results in ("benchmarks/RESULTS.md", "experiments/band_value/RESULTS.md"):
        assert f"]({results})" in text and (REPO / results).is_file(), results


def test_the_band_value_results_are_newest_first_and_mark_the_superseded():
    from datetime import datetime

    text = (REPO / "experiments/band_value/RESULTS.md").read_text()
    sections = re.findall(r"^## (.*)\n((?:(?!^## ).*\n?)*)", text, flags=re.M)
    dated = [(head, body, re.findall(r"(\d{1,2}) (\w{3}) (\d{4})", head)) for head, body in sections]
    assert len(dated) >= 5 and all(d for _, _, d in dated), "every section's heading names its date"
    days = [max(datetime.strptime(" ".join(d), "%d %b %Y") for d in found) for _, _, found in dated]
    assert days == sorted(days, reverse=True), "newest first"
    for head, body, _ in dated:  # a heading that says superseded says by what, in a marked line under it
        if "superseded" in head.lower():
            assert body.lstrip().startswith("**Superseded:** "), head
