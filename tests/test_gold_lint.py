"""Gold lint: golden cases per registered check, the ingest outcome (gold_issues, garbled_gold rejects, counts per
source), and the counts on the real GSM8K and MATH files (../shared/data)."""

from __future__ import annotations

import json

import pytest
from shared_data import shared_path

from pipeline.ingest import ingest
from pipeline.ingest.gold_lint import CHECKS, lint_gold
from pipeline.ingest.records import RawRow

# (gold, question, the defects expected): each check has cases it must find and cases it must leave alone
GOLDEN = [
    # empty_braces: text lost from the gold (the OlympiadBench gold with its d's stripped)
    ("\\frac{}{2k(-k)!}", "", {"empty_braces", "unparseable"}),
    ("\\frac{1}{}", "", {"empty_braces", "unparseable"}),
    ("x^{}+1", "", {"empty_braces", "unparseable"}),
    ("\\sqrt{} ", "", {"empty_braces", "unparseable"}),
    ("\\frac{1}{2}", "", set()),
    ("30^{\\circ}", "", set()),
    ("\\{\\}", "", set()),  # the empty set, escaped braces
    # unbalanced_delimiters
    ("(1, 2", "", {"unbalanced_delimiters"}),
    ("1,2)", "", {"unbalanced_delimiters"}),  # math-verify reads it as 1.2
    ("\\frac{1}{2}}", "", {"unbalanced_delimiters", "unparseable"}),
    ("\\{1, 2", "", {"unbalanced_delimiters"}),
    ("[0, 1)", "", set()),  # a half-open interval pairs [ with )
    ("(-\\infty, 3] \\cup (5, \\infty)", "", set()),
    ("\\left( 0, -\\frac{47}{16} \\right)", "", set()),
    # unparseable
    ("\\text{}", "", {"unparseable"}),
    ("42", "", set()),
    # sentence
    ("The answer is 5 apples", "", {"sentence"}),
    ("\\text{so there are five of them left}", "", {"sentence"}),
    ("\\text{Softball, Kickball, Picnic}", "", set()),  # a list of names is an answer
    ("5 \\text{ cm}", "", set()),
    ("\\text{two lines}", "", set()),
    # order_as_set: the question fixes the order, the bare list is compared as a set
    ("8, 2", "Find the maximum and the minimum of f.", {"order_as_set"}),
    ("12,9", "Enter BP, then a comma, then QT: if these lengths are 5 and 3/4, respectively, your answer "
             "should be written 5,3/4.", {"order_as_set"}),
    ("-2, 2", "List your answers in increasing order separated by commas.", {"order_as_set"}),
    ("2, 8", "Let A and B be the feet of the altitudes, respectively. Enter all values, separated by commas.",
     set()),  # "respectively" outside the sentence that says how to answer
    ("\\frac{1}{3}, \\frac{1}{8}", "Four points, not necessarily in that order. Enter all possible values of d, "
                                   "separated by commas.", set()),
    ("1,000", "Find the minimum and maximum.", set()),  # a thousands separator, not two parts
    ("(2, 3)", "Enter the ordered pair (x, y).", set()),
    # tuple_as_set: a set asked for, a tuple given
    ("(1, 5)", "Find all solutions. Enter them, separated by commas.", {"tuple_as_set"}),
    ("(1, 5)", "Enter your answer in interval notation, separated by commas.", set()),
    ("(2, \\infty)", "Enter all values, separated by commas.", set()),
    ("1, 5", "Find all solutions. Enter them, separated by commas.", set()),
    # order_reversed: max before min where the question asks for min then max (the OlympiadBench gold)
    ("(8, 2)", "Find the smallest and largest possible values of x.", {"order_reversed"}),
    ("8, 2", "Find the minimum and maximum values of f.", {"order_reversed", "order_as_set"}),
    ("\\frac{9}{2}, -\\frac{1}{2}", "Find the least and the greatest value.", {"order_reversed", "order_as_set"}),
    ("(2, 8)", "Find the smallest and largest possible values of x.", set()),
    ("(8, 2)", "Find the largest and smallest possible values of x.", set()),
    ("(x, 2)", "Find the smallest and largest possible values.", set()),
    ("1, 3, 5", "The numbers 1, 3, 5 are written in increasing order. What are they?", set()),  # a description
    # stripped_letters: letters lost where the gold was copied (made-up forms of real garbled golds)
    ("=3,=-1+\\sqrt{5}", "", {"stripped_letters"}),
    ("g(x)=+c,wherecisaninteger", "", {"stripped_letters"}),
    ("(x)=x^2+1", "", {"stripped_letters"}),
    ("x=3, x=-1+\\sqrt{5}", "", set()),
    ("\\text{counterclockwise}", "", set()),
    ("y=-2x+3", "", set()),
    # cut_short
    ("7:15a..", "", {"cut_short"}),
    ("1, 2, 3, \\ldots", "", set()),
    # unparsed_left_side: math-verify cannot read the left side, the right one is graded
    ("m_{\\max}=n^{2}-n-1", "", {"unparsed_left_side"}),
    ("x=5", "", set()),
]


@pytest.mark.parametrize(("gold", "question", "expected"), GOLDEN, ids=[g for g, _, _ in GOLDEN])
def test_golden(gold: str, question: str, expected: set[str]) -> None:
    assert {f.name for f in lint_gold(gold, question=question)} == expected


def test_every_check_has_golden_cases_both_ways() -> None:
    found = {name for _, _, expected in GOLDEN for name in expected}
    clean = [(g, q) for g, q, expected in GOLDEN if not expected]
    assert found == set(CHECKS)
    assert len(clean) >= len(CHECKS)
    for name, check in CHECKS.items():
        assert check.doc and check.fn.__name__ == name


def test_ingest_records_issues_and_rejects_unusable_golds() -> None:
    rows = [RawRow("olymp", "1", "Find the minimum and maximum of f, in that order.", answer="8, 2"),
            RawRow("olymp", "2", "What is y?", answer="1,2)"),           # parses (as 1.2) but is garbled
            RawRow("olymp", "3", "What is x?", answer="\\frac{}{2}"),    # garbled, and math-verify cannot parse it
            RawRow("olymp", "6", "What is z?", answer="\\text{}"),        # math-verify's only
            RawRow("clean", "4", "What is 1 + 1?", answer="2"),
            RawRow("clean", "5", "What is 1 + 1?", answer="2.0")]         # a duplicate: counted once
    result = ingest(rows)
    issues = {r["source_id"]: r["gold_issues"] for r in result.problems.to_pylist()}
    assert issues == {"1": ["order_as_set", "order_reversed"], "4": []}
    rejects = {r["source_id"]: (r["reason"], r["detail"]) for r in result.rejects.to_pylist()}
    assert rejects["2"][0] == "garbled_gold" and rejects["2"][1].startswith("unbalanced_delimiters: ")
    # linted before the parse check: every defect named, the parse among them
    assert rejects["3"] == ("garbled_gold", "empty_braces: \\frac{}{2}; unparseable: \\frac{}{2}")
    assert rejects["6"][0] == "unparseable_gold" and rejects["6"][1].startswith("unparseable: ")
    assert result.summary.gold_issues == {"clean": {}, "olymp": {"empty_braces": 1, "order_as_set": 1, "order_reversed": 1,
                                                                  "unbalanced_delimiters": 1, "unparseable": 2}}
    assert result.metrics()["gold_issues"] == result.summary.gold_issues


def test_real_sets_counts() -> None:
    """GSM8K's golds are clean numbers; MATH's few findings are the order-fixed bare lists."""
    from pipeline.gold import GoldError, boxed_gold, gsm8k_gold

    text_checks = [c for name, c in CHECKS.items() if name not in ("unparseable", "unparsed_left_side")]  # math-verify's
    counts: dict[str, dict[str, int]] = {}
    for name, path, gold_of in (("gsm8k", "gsm8k/test.jsonl", lambda r: gsm8k_gold(r["answer"])),
                                ("math", "math/train.jsonl", lambda r: boxed_gold(r["solution"]))):
        found = counts.setdefault(name, {})
        for line in shared_path(path).read_text().splitlines():
            r = json.loads(line)
            try:
                gold = gold_of(r)
            except GoldError:  # the stage's unparseable_gold reject (an empty box)
                continue
            for c in text_checks:
                if c.fn(gold, r.get("question") or r.get("problem")) is not None:
                    found[c.name] = found.get(c.name, 0) + 1
    assert counts["gsm8k"] == {}
    assert set(counts["math"]) == {"order_as_set"} and 1 <= counts["math"]["order_as_set"] <= 10


def test_docs_list_every_check() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "stages.md").read_text()
    for name, c in CHECKS.items():
        assert f"| `{name}` | {'yes' if c.unusable else 'no'} |" in page, name
