"""The number grammar has one home, pipeline/numbers.py: its examples hold, its SQL form reads what its Python
form reads, and no other module spells a number pattern again."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import duckdb
import pytest

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


READINGS = {  # text -> (value, decimal) read by read_number with its defaults, or None
    "1,200": ("1200", False), "-3.50": ("-7/2", True), "007": ("7", False), ".5": ("1/2", True), "3/4": ("3/4", False),
    "-\\dfrac{1}{2}": ("-1/2", False), "\\frac{2}{4}": ("1/2", False), "1,234.5": ("2469/2", True),
    "12,34": None, "1.": None, "1/0": None, "-": None, "": None, "1e5": None, "+5": None, "5 apples": None,
}


@pytest.mark.parametrize("text", list(READINGS), ids=lambda t: repr(t).replace(" ", "_"))  # no space: xdist lanes
def test_one_reader_and_its_callers_agree(text):
    """read_number is the one reader: the grader's fast path, the gold lint, the flags' arithmetic and the
    reformulators' numerals give its value (each within its own bounds and after its own cleaning)."""
    from fractions import Fraction

    from pipeline.arith import number
    from pipeline.ingest.gold_lint import _number as lint_number
    from pipeline.numbers import read_number
    from pipeline.reformulate.numerals import to_value
    from pipeline.verify.grader import exact_number

    want = READINGS[text]
    got = read_number(text)
    assert (None if got is None else (got.value, got.decimal)) == (
        None if want is None else (Fraction(want[0]), want[1]))
    value = None if want is None else Fraction(want[0])
    assert lint_number(text) == value
    arith = read_number(text.replace(",", "").strip().rstrip("."))  # arith drops every comma and a trailing period
    assert number(text) == (None if arith is None else arith.value)
    assert exact_number(text) == (None if got is None or text.startswith((".", "-.")) else (got.value, got.decimal))
    if "/" not in text and "frac" not in text:
        assert to_value(text) == (value if "," not in text else to_value(text.replace(",", "")))


def test_the_grader_keeps_to_math_verify_precision():
    from pipeline.verify.grader import exact_number

    assert exact_number("1" * 30) is not None and exact_number("1" * 31) is None
    assert exact_number("0.000000000001") is not None and exact_number("0.0000000000001") is None  # 12 decimals
    assert exact_number("1234.56789012345") is not None and exact_number("1234.567890123456") is None  # 15 significant
    assert exact_number(f"{'9' * 15}/2") is not None and exact_number(f"{'9' * 16}/2") is None
