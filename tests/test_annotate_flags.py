"""Every flag detector on its golden cases (tests/data/flags_golden.yaml), firing and not firing.

Each case goes through the detector's SQL candidate predicate in DuckDB (a firing case must be
a candidate) and its Python check, so the two halves of a detector cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import yaml

from pipeline.annotate.detectors import DETECTORS, SIDE_COLUMNS, get_detectors
from pipeline.annotate.flag_runner import (
    SAMPLE_COLUMNS,
    candidate_sql,
    run_detectors,
    steps,
)
from pipeline.config import ConfigError
from pipeline.thinking import answer_section

GOLDEN = yaml.safe_load((Path(__file__).parent / "data/flags_golden.yaml").read_text())
CASES = GOLDEN["cases"]
TYPES = {"sample_idx": pa.int64(), "thinking_chars": pa.int64(), "n_tokens": pa.int64(), "n": pa.int64(),
         "n_correct": pa.int64(), "steps": pa.int64(),
         "ref_steps": pa.int64(), "median_correct_steps": pa.float64(), "pass_rate": pa.float64()}


def _row(case: dict) -> dict:
    row = {**GOLDEN["defaults"], **case["row"]}
    row["pass_rate"] = row["n_correct"] / row["n"]
    # as the verify stage writes it under its default thinking mode (auto): null where it read no thinking block
    row.setdefault("thinking_chars", answer_section(row["completion"], "auto").thinking_chars)
    return row


def test_every_detector_has_golden_cases_both_ways():
    for name in DETECTORS:
        outcomes = {c["fires"] for c in CASES if c["detector"] == name}
        assert outcomes == {True, False}, f"{name} needs golden cases that fire and that do not"


IDS = [f"{c['detector']}-{'fires' if c['fires'] else 'quiet'}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_golden(case):
    row = _row(case)
    det = DETECTORS[case["detector"]]()
    table = pa.table({c: pa.array([row[c]], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS})
    con = duckdb.connect()
    con.register("samples", table)
    is_candidate = bool(con.execute(candidate_sql([det])).fetchall())
    hit = det.detect(row) if is_candidate else None
    assert (hit is not None) == case["fires"], (hit, is_candidate)
    if hit is not None:
        assert case.get("evidence", "") in hit.evidence
        if "score" in case:
            assert hit.score == pytest.approx(case["score"], abs=1e-4)
    if case["fires"]:
        assert steps(row["completion"]) == row["steps"] or case["detector"] != "computation_skip"


def _side_table(rows: list[dict], side: str) -> pa.Table:
    return pa.table({c: pa.array([r[c] for r in rows], TYPES.get(c, pa.string())) for c in SIDE_COLUMNS[side]})


@pytest.mark.parametrize("name", list(DETECTORS))
def test_scan_uses_only_its_side_and_holds_wherever_where_does(name):
    # the stage finds candidate keys with `scan` over one side's columns (a column of the other side would fail to
    # bind here), then evaluates `where` on the joined rows: a row `where` accepts must never be missed by `scan`
    det = DETECTORS[name]()
    rows = [_row(c) for c in CASES]
    con = duckdb.connect()
    con.register("samples", pa.table({c: pa.array([r[c] for r in rows], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS}))
    con.register("side", _side_table(rows, det.side))
    where = {r[0] for r in con.execute(f"SELECT rowid FROM (SELECT row_number() OVER () - 1 AS rowid, * FROM samples) "
                                         f"WHERE {det.where_sql()}").fetchall()}
    scan = {r[0] for r in con.execute(f"SELECT rowid FROM (SELECT row_number() OVER () - 1 AS rowid, * FROM side) "
                                        f"WHERE {det.scan_sql()}").fetchall()}
    assert where, f"no golden row is a {name} candidate"
    assert where <= scan, [rows[i]["completion"] for i in where - scan]


def test_candidate_keys_cover_the_full_scan():
    from pipeline.annotate.flag_runner import candidate_keys_sql

    rows = [{**_row(c), "sample_idx": i} for i, c in enumerate(CASES)]
    con = duckdb.connect()
    con.register("samples", pa.table({c: pa.array([r[c] for r in rows], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS}))
    for side in SIDE_COLUMNS:
        con.register(f"{side[:-1]}_samples", _side_table(rows, side))
    dets = get_detectors(None)
    full = {r[:3] for r in con.execute(candidate_sql(dets)).fetchall()}
    keys = set(con.execute(candidate_keys_sql(dets)).fetchall())
    assert full and full <= keys


def test_runner_counts_and_batches():
    rows = [_row(c) for c in CASES]
    cols = {c: pa.array([r[c] for r in rows], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS}
    con = duckdb.connect()
    con.register("samples", pa.table(cols))
    dets = get_detectors(None)
    from pipeline.annotate.flag_runner import FlagCounts

    counts = FlagCounts({}, {})
    batches = con.sql(candidate_sql(dets)).to_arrow_reader(7)
    hits = pa.Table.from_batches(list(run_detectors(batches, dets, counts=counts)))
    assert hits.schema.names == ["problem_id", "policy_id", "sample_idx", "flag", "score", "evidence", "correct"]
    for name in DETECTORS:
        assert counts.fired.get(name, 0) >= sum(1 for c in CASES if c["detector"] == name and c["fires"])
        assert counts.candidates[name] >= counts.fired.get(name, 0)


def test_steps_sql_matches_python():
    from pipeline.annotate.flag_runner import REF_STEPS_SQL, STEPS_SQL

    texts = ["48/2 = <<48/2=24>>24 clips. 48 + 24 = <<48+24=72>>72\n#### 72", "a = b = c", "no steps", ""]
    con = duckdb.connect()
    for t in texts:
        sql_steps = con.execute(f"SELECT {REF_STEPS_SQL.format(x='$1')}, {STEPS_SQL.format(x='$1')}", [t]).fetchone()
        assert sql_steps[0] == steps(t)
    assert steps(texts[0]) == 2 and steps(texts[1]) == 2


def test_unknown_detector():
    with pytest.raises(ConfigError, match="did you mean rare_success"):
        get_detectors(["rare_sucess"])


@pytest.mark.parametrize("name", [n for n, d in DETECTORS.items() if d.sql_only])
def test_sql_only_detectors_agree_with_their_python_reference(name):
    from pipeline.annotate.flag_runner import sql_hits_sql

    det = DETECTORS[name]()
    cases = [_row(c) for c in CASES if c["detector"] == name and c["fires"]]
    assert cases
    con = duckdb.connect()
    con.register("samples", pa.table({c: pa.array([r[c] for r in cases], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS}))
    con.execute(f"CREATE TABLE _cand AS {candidate_sql([det])}")
    got = con.execute(sql_hits_sql([det], source="_cand") + " ORDER BY evidence").fetchall()
    want = sorted((det.detect(r) for r in cases), key=lambda h: h.evidence)
    assert len(got) == len(want)
    for g, hit in zip(got, want, strict=True):
        assert g[3] == name and g[4] == pytest.approx(hit.score) and g[5] == hit.evidence


def _generated_rows(count: int, seed: int = 0) -> list[dict]:
    """Rows built to sit near every detector's edges: repeated answers and lines, word loops, hedges,
    few and many '=' steps, answers taken from the question, truncation, every group count of 8 and 16."""
    import json
    import random

    rng = random.Random(seed)
    real = [json.loads(line)["completion"]
            for line in (Path(__file__).parent / "data/embedded_completions.jsonl").read_text().splitlines()]
    rows = []
    for i in range(count):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        question = rng.choice([f"What is {a} + {b}?", f"Tom has {a} apples and buys {b} more. How many now?",
                               f"What is {a} * {b}?"])
        answer = rng.choice([a + b, a * b, a, b, rng.randint(0, 200)])
        parts = [rng.choice(real)] if rng.random() < 0.4 else []
        for _ in range(rng.randint(0, 4)):
            parts.append(rng.choice([
                f" {a} + {b} = {a + b}.", f" {a} = {a}.", f"The answer is {answer}.", f"The answer is {answer + 1}.",
                "\\boxed{" + str(answer) + "}", f"#### {answer}", "So the answer is", " the cat sat on the mat" * 3,
                "\nQ: what?\n", f"{answer} is the answer.", " = " * rng.randint(1, 3),
                "<think>", "</think>", "<|begin_of_thought|>", "<|end_of_thought|>",  # reasoning models' thinking tags
            ]))
        completion = "".join(parts) or rng.choice(real)
        if rng.random() < 0.15:
            completion = " ".join([completion] * rng.randint(2, 6))
        n = rng.choice([8, 8, 16])
        n_correct = rng.randint(0, n)
        status = rng.choice(["correct", "incorrect", "no_answer"]) if n_correct else rng.choice(["incorrect", "no_answer"])
        rows.append({
            "problem_id": f"g{i}", "policy_id": "pol", "sample_idx": 0, "status": status,
            "extracted": None if status == "no_answer" else str(rng.choice([answer, a, b])),
            "completion": completion, "n_tokens": rng.randint(1, 64),
            # as verify writes it under the policy's thinking mode: null where it read no thinking block
            "thinking_chars": answer_section(completion, rng.choice(["auto", "tags", "off"])).thinking_chars,
            "finish_reason": rng.choice(["stop", "stop", "length"]), "question": question, "n": n,
            "n_correct": n_correct, "pass_rate": n_correct / n, "steps": steps(completion),
            "ref_steps": rng.choice([None, 0, 1, 2, 4, 8]),
            "median_correct_steps": rng.choice([None, 1.0, 2.5, 6.0]),
        })
    return rows


def test_every_detector_has_one_definition_or_a_prefilter_test():
    # SQL-only detectors are defined once, in SQL (their Python function is the reference that
    # test_sql_only_detectors_agree_with_their_python_reference compares with); the others decide in
    # Python, and their SQL `where` is only a prefilter, checked by the test below
    assert {n for n, d in DETECTORS.items() if d.sql_only} | set(PYTHON_RULES) == set(DETECTORS)


PYTHON_RULES = [n for n, d in DETECTORS.items() if not d.sql_only]


@pytest.mark.parametrize("name", PYTHON_RULES)
def test_sql_prefilter_never_drops_a_row_the_python_rule_flags(name):
    """Run the Python rule on *every* row (no prefilter): each row it flags must be a SQL candidate, on the
    golden rows and on 3,000 generated ones; the generated set must make the rule fire, or it proves nothing."""
    det = DETECTORS[name]()
    rows = [{**_row(c), "problem_id": f"c{i}"} for i, c in enumerate(CASES)] + _generated_rows(3000)
    con = duckdb.connect()
    con.register("samples", pa.table({c: pa.array([r[c] for r in rows], TYPES.get(c, pa.string())) for c in SAMPLE_COLUMNS}))
    candidates = {r[0] for r in con.execute(f"SELECT problem_id FROM samples WHERE {det.where_sql()}").fetchall()}
    flagged = {r["problem_id"] for r in rows if det.detect(r) is not None}
    assert len({p for p in flagged if p.startswith("g")}) >= 5, f"the generated rows never fire {name}"
    missed = flagged - candidates
    assert not missed, [next(r["completion"] for r in rows if r["problem_id"] == p)[:120] for p in sorted(missed)[:5]]
