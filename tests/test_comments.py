"""No comment, docstring, doc page or test datum points to a tracker issue by number.

A reader of the code cannot see the tracker, so a comment that gives its reason as a ticket number gives none:
it says *why* in words instead. A link to another project's issue (a URL) is fine, since anyone can open it.
The scan covers every text file a clone holds (tracked or new, not ignored): code, tests, data, docs, configuration.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".jsonl", ".json", ".txt", ".cfg", ".sql", ".j2", ".lock", ""}
# "issue 28", "issues 25 and 29", "issue-11", "issue11-3", "Issue #4"; "#28" standing alone (after a space, a
# bracket or a line start, so a colour "#333" in a string and a URL's "issues/1386" pass)
REFERENCE = re.compile(r"\bissues?[ _-]?#?\d+|(?:^|[\s(\[])#\d{1,5}\b", re.I | re.M)


def _files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    out = [REPO / rel for rel in listed if rel and (REPO / rel).suffix in TEXT and (REPO / rel).is_file()]
    return [p for p in out if p != Path(__file__).resolve()]  # this file plants references to find


def references(text: str) -> list[tuple[int, str]]:
    """``(line, match)`` for each issue-number reference in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0).strip()) for m in REFERENCE.finditer(text)]


@pytest.mark.parametrize("text", [
    "# the fix (issue 28 item 2)", '"""Hostile input (issues 29 and 25): bounded."""', "rows `issue11-*`",
    "see #28 for why", "(#7)", "Issue #4 says", "the issue-11 classes",
])
def test_a_reference_is_found(text):
    assert references(text), text


@pytest.mark.parametrize("text", [
    'line={"color": "#333"}', "https://github.com/pytest-dev/pytest-xdist/issues/1386", "GSM8K train item 1::",
    "#### 72", "an issue with the tokenizer", "[pytest-xdist#1386](https://github.com/pytest-dev/pytest-xdist/issues/1386)",
])
def test_what_is_not_a_reference(text):
    assert references(text) == [], text


def test_no_file_refers_to_an_issue_number():
    files = _files()
    assert {REPO / "pipeline/cli.py", REPO / "dvc.yaml", REPO / "docs/flags.md", REPO / ".ci/run",
            REPO / "tests/data/verify_golden.jsonl"} <= set(files)
    found = [f"{p.relative_to(REPO)}:{line}: {match}" for p in files
             for line, match in references(p.read_text(encoding="utf-8", errors="replace"))]
    assert found == [], "say why in words instead of pointing to an issue:\n" + "\n".join(found)
