"""Hostile input: every kind of bad row gives its documented outcome, and nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import SourceConfig
from pipeline.ingest import REASONS, ingest
from pipeline.ingest.core import Limits
from pipeline.ingest.sources import read_source


def j(obj) -> bytes:
    return json.dumps(obj).encode()


# (line bytes, expected) where expected is ("problem", gold) | ("reject", reason) | ("duplicate", None)
JSONL_CASES: list[tuple[str, bytes, tuple[str, str | None]]] = [
    ("valid", j({"question": "What is 2 + 3?", "answer": "5"}), ("problem", "5")),
    ("malformed json", b'{"question": "What is 1 + 1?", "answer": ', ("reject", "malformed_json")),
    ("not utf-8", b'{"question": "caf\xe9 \xff", "answer": "1"}', ("reject", "not_utf8")),
    ("json array", b"[1, 2, 3]", ("reject", "not_an_object")),
    ("json string", b'"just a string"', ("reject", "not_an_object")),
    ("no question key", j({"answer": "4"}), ("reject", "missing_question")),
    ("null question", j({"question": None, "answer": "4"}), ("reject", "missing_question")),
    ("numeric question", j({"question": 12, "answer": "4"}), ("reject", "wrong_type")),
    ("list question", j({"question": ["a", "b"], "answer": "4"}), ("reject", "wrong_type")),
    ("blank question", j({"question": "  \n\t ", "answer": "4"}), ("reject", "empty_question")),
    ("no gold", j({"question": "What is 9 - 4?"}), ("reject", "missing_gold")),
    ("empty gold", j({"question": "What is 9 - 5?", "answer": "   "}), ("reject", "missing_gold")),
    ("dict gold", j({"question": "What is 9 - 6?", "answer": {"v": 3}}), ("reject", "wrong_type")),
    # TheoremQA-style golds: every ordinary JSON type is an ordinary answer
    ("bool gold", j({"question": "Is 9 > 6?", "answer": True}), ("problem", "\\text{True}")),
    ("bool gold false", j({"question": "Is 6 > 9?", "answer": False}), ("problem", "\\text{False}")),
    ("list gold", j({"question": "Find the roots of x^2 - 3x + 2.", "answer": [1, 2]}), ("problem", "(1, 2)")),
    ("list gold floats", j({"question": "Give the eigenvalues.", "answer": [0.5, -1.25, 3]}), ("problem", "(0.5, -1.25, 3)")),
    ("one-element list gold", j({"question": "Give the only root.", "answer": [7]}), ("problem", "7")),
    ("float gold", j({"question": "What is 1.5 * 2?", "answer": 3.0}), ("problem", "3")),
    ("small float gold", j({"question": "What is 1/8000?", "answer": 0.000125}), ("problem", "0.000125")),
    ("nested list gold", j({"question": "Give the matrix.", "answer": [[1, 2], [3, 4]]}), ("reject", "wrong_type")),
    ("empty list gold", j({"question": "Give nothing.", "answer": []}), ("reject", "wrong_type")),
    ("int gold", j({"question": "What is 6 * 7?", "answer": 42}), ("problem", "42")),
    ("5 MB question", j({"question": "x" * 5_000_000, "answer": "1"}), ("reject", "line_too_long")),
    ("200 KB question", j({"question": "x" * 200_000, "answer": "1"}), ("reject", "question_too_long")),
    ("NUL byte", j({"question": "What is\u0000 1 + 2?", "answer": "3"}), ("reject", "control_characters")),
    ("gold too long", j({"question": "Write many digits.", "answer": "1" * 2000}), ("reject", "answer_too_long")),
    ("unparseable gold", j({"question": "What is the colour?", "answer": "@@@ ###"}), ("reject", "unparseable_gold")),
    ("wrong-type solution", j({"question": "What is 8 + 8?", "answer": "16", "solution": ["16"]}), ("reject", "wrong_type")),
    # the same question twice with two different golds: both rows rejected, neither kept
    ("conflict a", j({"question": "What is 10 / 4?", "answer": "2.5"}), ("reject", "conflicting_gold")),
    ("conflict b", j({"question": "what is  10 / 4?", "answer": "3"}), ("reject", "conflicting_gold")),
    # the same question (other case/spacing) with the same or an equivalent gold: folded
    ("dup original", j({"question": "What is half of 1?", "answer": "1/2"}), ("problem", "1/2")),
    ("dup spacing", j({"question": "What  is half of 1? ", "answer": "1/2"}), ("duplicate", None)),
    ("dup equivalent gold", j({"question": "WHAT IS HALF OF 1?", "answer": "0.5"}), ("duplicate", None)),
    # MATH test vs MATH-500: one number with thousands separators in two styles is one gold, not a conflict
    ("separators a", j({"question": "Compute 11111111100.", "answer": "11, 111, 111, 100"}), ("problem", "11, 111, 111, 100")),
    ("separators b", j({"question": "Compute 11111111100. ", "answer": "11,\\! 111,\\! 111,\\! 100"}), ("duplicate", None)),
    ("separators c", j({"question": "compute 11111111100.", "answer": "11{,}111{,}111{,}100"}), ("duplicate", None)),
    # a lone surrogate (JSON's \ud800 escape) in any field UTF-8 must hold: that row's reject, never the stage's end
    ("surrogate gold", b'{"question": "What is 2 + 2?", "answer": "4\\ud800"}', ("reject", "not_utf8")),
    ("surrogate question", b'{"question": "What is 2 + 5?\\udc00", "answer": "7"}', ("reject", "not_utf8")),
    ("surrogate extra column", b'{"question": "What is 2 + 6?", "answer": "8", "note": "\\ud83d"}', ("problem", "8")),
]

GSM8K_CASES = [
    ("gsm8k thousands", j({"question": "How many?", "answer": "500 + 734 = 1234\n#### 1,234"}), ("problem", "1234")),
    ("gsm8k no marker", j({"question": "How many now?", "answer": "It is 7."}), ("reject", "unparseable_gold")),
    ("gsm8k empty marker", j({"question": "How many then?", "answer": "It is 7.\n#### "}), ("reject", "unparseable_gold")),
    ("gsm8k last marker", j({"question": "Which one?", "answer": "#### 3\nso\n#### 4"}), ("problem", "4")),
]

MATH_CASES = [
    ("math nested boxed", j({"problem": "Find y.", "solution": "So $y=\\boxed{\\frac{1}{2}}$."}), ("problem", "\\frac{1}{2}")),
    ("math last boxed", j({"problem": "Find z.", "solution": "$\\boxed{1}$ no, $\\boxed{2}$"}), ("problem", "2")),
    ("math fbox", j({"problem": "Find w.", "solution": "Hence $\\fbox{5}$."}), ("problem", "5")),
    ("math boxed no braces", j({"problem": "Find v.", "solution": "Hence $\\boxed 7$."}), ("problem", "7")),
    ("math unclosed boxed", j({"problem": "Find u.", "solution": "Hence $\\boxed{3$."}), ("reject", "unparseable_gold")),
    ("math no boxed", j({"problem": "Find t.", "solution": "The answer is 3."}), ("reject", "unparseable_gold")),
    ("math empty boxed", j({"problem": "Find s.", "solution": "$\\boxed{}$"}), ("reject", "unparseable_gold")),
    ("math null solution", j({"problem": "Find r.", "solution": None}), ("reject", "missing_gold")),
]


def _write(tmp: Path, name: str, cases) -> Path:
    path = tmp / name
    lines = [c[1] for c in cases]
    # a blank line is not a row: it is skipped and not counted
    path.write_bytes(b"\n".join([*lines[:3], b"   ", *lines[3:]]) + b"\n")
    return path


def _line_of(index: int) -> int:
    return index + 1 if index < 3 else index + 2


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    sources = [
        SourceConfig(name="local", kind="jsonl", path=str(_write(tmp, "local.jsonl", JSONL_CASES))),
        SourceConfig(name="gsm", kind="gsm8k", path=str(_write(tmp, "gsm.jsonl", GSM8K_CASES))),
        SourceConfig(name="mth", kind="math", path=str(_write(tmp, "mth.jsonl", MATH_CASES))),
    ]
    limits = Limits(max_question_chars=100_000, max_answer_chars=1000)
    records = [r for s in sources for r in read_source(s, root=tmp, limits=limits)]
    return ingest(records, limits=limits)


def test_at_least_15_kinds_of_bad_rows():
    bad = [c for c in JSONL_CASES + GSM8K_CASES + MATH_CASES if c[2][0] != "problem"]
    assert len(bad) >= 15
    assert len({c[2][1] for c in bad if c[2][0] == "reject"}) >= 12


@pytest.mark.parametrize(
    "source,file,index,case",
    [("local", "local.jsonl", i, c) for i, c in enumerate(JSONL_CASES)]
    + [("gsm", "gsm.jsonl", i, c) for i, c in enumerate(GSM8K_CASES)]
    + [("mth", "mth.jsonl", i, c) for i, c in enumerate(MATH_CASES)],
    ids=lambda v: v[0] if isinstance(v, tuple) else None,
)
def test_each_row_has_its_documented_outcome(result, source, file, index, case):
    sid = f"{file}:{_line_of(index)}"
    kind, value = case[2]
    probs = [r for r in result.problems.to_pylist() if r["source"] == source and r["source_id"] == sid]
    rejs = [r for r in result.rejects.to_pylist() if r["source"] == source and r["source_id"] == sid]
    if kind == "problem":
        assert not rejs, rejs
        assert len(probs) == 1 and probs[0]["answer"] == value
    elif kind == "reject":
        assert not probs
        assert [r["reason"] for r in rejs] == [value]
        assert value in REASONS
        assert rejs[0]["detail"]
    else:
        assert not probs and not rejs


def test_nothing_is_lost(result):
    n_rows = len(JSONL_CASES) + len(GSM8K_CASES) + len(MATH_CASES)
    assert result.rows_read == n_rows
    assert result.problems.num_rows + result.rejects.num_rows + result.duplicates == n_rows
    assert result.duplicates == 4
    folded = [r for r in result.problems.to_pylist() if r["answer"] == "1/2"]
    assert folded[0]["n_duplicates"] == 2


def test_rejects_keep_an_excerpt_not_the_whole_row(result):
    big = [r for r in result.rejects.to_pylist() if r["reason"] == "question_too_long"]
    assert len(big) == 1 and len(big[0]["excerpt"]) <= 200


def test_a_lone_surrogate_is_named_in_the_detail_and_the_reject_row_is_written(tmp_path):
    from pipeline.ingest.core import check
    from pipeline.ingest.records import RawReject, RawRow

    ok, row = check(RawRow("s", "f:1", "What is 2 + 2?", answer="4\ud800", excerpt="What is 2 + 2?"))
    assert not ok and row["reason"] == "not_utf8" and "answer holds '\\ud800' at character 1" in row["detail"]
    ok, row = check(RawRow("s", "id\udc00", "What is 1?\ud800", answer="1", excerpt="What is 1?\ud800"))
    assert not ok and row["reason"] == "not_utf8" and row["excerpt"] == "What is 1??" and row["source_id"] == "id?"
    res = ingest([RawReject("s", "f:2", "malformed_json", "bad \ud800", "x\ud800"),
                  RawRow("s", "f:3", "What is 3 + 3?", answer="6", solution="so 6\ud800")])
    assert [(r["reason"], r["detail"][:4], r["excerpt"]) for r in res.rejects.to_pylist()] == [
        ("malformed_json", "bad ", "x?"), ("not_utf8", "solu", "")]


# --- golds the verifier could never grade ---------------------------------------------------------------------------


def test_a_gold_the_verifier_cannot_grade_is_a_reject_graded_once_under_its_bounds():
    from pipeline.config import VerifyConfig
    from pipeline.ingest.records import RawRow

    rows = [RawRow("s", "f:1", "What is 1 + 1?", answer="2"),
            RawRow("s", "f:2", "Expand (x+1)^{10000}.", answer="(x+1)^{10000}"),
            RawRow("s", "f:3", "Compute it again: expand (x+1)^{10000}.", answer="(x+1)^{10000}"),
            RawRow("s", "f:4", "Divide?", answer="1/0"),
            RawRow("s", "f:5", "Half of 1?", answer="\\frac{1}{2}"),
            RawRow("s", "f:6", "When?", answer="05:00")]  # a clock time: graded as a time (clock_time), kept
    res = ingest(rows, verify=VerifyConfig(workers=1, timeout_s=1.0))
    rejects = res.rejects.to_pylist()
    assert [(r["source_id"], r["reason"]) for r in rejects] == [
        ("f:2", "ungradable_gold"), ("f:3", "ungradable_gold"), ("f:4", "ungradable_gold")]
    assert "answer 0" in rejects[0]["detail"] and "timeout" in rejects[0]["detail"]
    assert "against itself is error" in rejects[2]["detail"]
    assert _gold_list(res) == ["2", "\\frac{1}{2}", "05:00"]
    assert res.reasons == {"ungradable_gold": 3} and res.per_source["s"]["rejects"] == 3


def _gold_list(res) -> list[str]:
    return res.problems.column("answer").to_pylist()


def test_plain_number_golds_are_graded_without_the_worker_pool(monkeypatch):
    from pipeline.verify import gold_check

    def no_pool(**_kw):
        raise AssertionError("a plain number went to the worker pool")

    monkeypatch.setattr(gold_check, "shared_pool", no_pool)
    assert gold_check.ungradable_golds(["7", "-3", "1/2", "0.25", "1,234", "0"]) == [None] * 6


def test_every_gold_of_the_embedded_set_passes_the_ingest_grading():
    from pipeline.config import VerifyConfig
    from pipeline.ingest.synthetic import SyntheticOptions, generate
    from pipeline.verify.gold_check import ungradable_golds

    completions = Path(__file__).parent / "data" / "embedded_completions.jsonl"
    golds = sorted({json.loads(line)["gold"] for line in completions.read_text().splitlines()}
                   | {item.answer for item in generate(SyntheticOptions(n_per_level=12, seed=0))})
    assert len(golds) > 50
    assert ungradable_golds(golds, config=VerifyConfig(workers=1)) == [None] * len(golds)


def test_the_answer_caps_agree():
    import yaml

    from pipeline.config import ConfigError, parse_params
    from pipeline.ingest.stage import limits_of

    base = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    assert limits_of(parse_params(base)).max_answer_chars == 200  # verify.max_answer_chars: one setting
    assert limits_of(parse_params({**base, "verify": {"max_answer_chars": 300}})).max_answer_chars == 300
    assert limits_of(parse_params({**base, "ingest": {**base["ingest"], "max_answer_chars": 100}})).max_answer_chars == 100
    with pytest.raises(ConfigError, match=r"ingest.max_answer_chars \(1000\) is above verify.max_answer_chars \(200\)"):
        parse_params({**base, "ingest": {**base["ingest"], "max_answer_chars": 1000}})
