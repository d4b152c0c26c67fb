"""The number grammar has one home, pipeline/numbers.py: its examples hold, its SQL form reads what its Python
form reads, and no other module spells a number pattern again."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import duckdb

import pipeline.numbers as numbers

REPO = Path(__file__).resolve().parent.parent
# the rule writer's identity digests its rules' text (llm_backward.rules_digest): rewording them would give every
# rule-written child a new method_version, so they keep their own spelling of WRITTEN
KEEPS_ITS_OWN = {"pipeline/reformulate/backward_rules.py"}
PIECES = [r"\d[\d,]*", r"\d{1,3}(?:,\d{3})+", r"(?<=\d),(?=\d{3}", r"-?\d+(?:\.\d+)?", r"-?\d+(\.\d+)?",
          "[0-9][0-9,]*"]


def test_the_examples_hold():
    assert doctest.testmod(numbers).failed == 0


def test_the_sql_form_reads_what_the_python_form_reads():
    texts = ["Ann had 1,200 apples, then -3.5", "12,34 and 1,234,567.89 and -0.5 and .5", "x-7y 3.", "no digits", ""]
    con = duckdb.connect()
    for t in texts:
        got = con.execute("SELECT regexp_extract_all(?, ?)", [t, numbers.IN_TEXT_SQL]).fetchone()[0]
        assert got == re.findall("-?" + numbers.WRITTEN, t), t


def test_thousands_separators_go_only_between_groups_of_three():
    assert numbers.without_separators("1,200,000 and 12,34 and 1,2345") == "1200000 and 12,34 and 1,2345"
    assert numbers.SEPARATED_WHOLE.match("11,\\!111") and numbers.SEPARATED_WHOLE.match("11{,}111.5")
    assert not numbers.SEPARATED_WHOLE.match("11,11")


def test_no_other_module_spells_a_number_pattern():
    spelled = []
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "pipeline/numbers.py" or rel in KEEPS_ITS_OWN:
            continue
        text = path.read_text(encoding="utf-8")
        spelled += [f"{rel}: {p}" for p in PIECES if p in text]
    assert not spelled, f"number patterns outside pipeline/numbers.py: {spelled}"
