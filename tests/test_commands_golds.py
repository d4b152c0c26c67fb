"""``passband golds``: the review queue of suspect answer keys, as a file, with each policy's answer distribution."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from publish_tables import PRIMARY_ID, make_repo, mark_suspect_gold
from rollout_tables import add_rollouts

from pipeline.catalog import query
from pipeline.cli import cli
from pipeline.params_loader import load_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("golds") / "repo"))
    mark_suspect_gold(root)
    mark_suspect_gold(root, "p_0000000000000006", "119", score=0.2, suspect=False)  # scored, not flagged
    return root


def golds(root: Path, *args: str):
    return CliRunner().invoke(cli, ["golds", "--params", str(root / "params.yaml"), *args])


def test_the_queue_holds_the_flagged_problem_with_its_answers(root, tmp_path):
    out = tmp_path / "queue.jsonl"
    result = golds(root, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "1 problems queued" in result.output and "key_wrong" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == ["p_0000000000000007"]
    row = rows[0]
    assert (row["gold"], row["gold_suspect"], row["review"], row["corrected_gold"]) == ("30", True, None, None)
    params = load_params(root / "params.yaml")
    counts = query(params, """SELECT d.policy_id, v.extracted, count(*) AS n FROM difficulty d JOIN verdicts v
        ON v.problem_id = d.problem_id AND v.policy_id = d.policy_id AND v.verifier_id = d.verifier_id
        AND v.sample_idx < d.n WHERE d.problem_id = 'p_0000000000000007' GROUP BY ALL""", root=root).to_dicts()
    want = {(c["policy_id"], c["extracted"]): c["n"] for c in counts}
    names = {r["policy_id"]: r["name"] for r in query(params, "SELECT DISTINCT policy_id, name FROM policies",
                                                       root=root).to_dicts()}
    got = {(pid, a["answer"]): a["rollouts"] for p in row["policies"] for pid in names if names[pid] == p["policy"]
           for a in p["answers"]}
    assert got == want and PRIMARY_ID in {pid for pid, _ in got}
    for p in row["policies"]:  # most frequent first
        assert [a["rollouts"] for a in p["answers"]] == sorted((a["rollouts"] for a in p["answers"]), reverse=True)


def test_min_score_adds_problems_and_csv_is_a_spreadsheet(root, tmp_path):
    out = tmp_path / "queue.csv"
    assert golds(root, "--out", str(out), "--min-score", "0").exit_code == 0
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    scored = query(load_params(root / "params.yaml"), "SELECT count(DISTINCT problem_id) AS n FROM difficulty "
                                                      "WHERE gold_suspicion IS NOT NULL", root=root)["n"][0]
    assert len(rows) == scored == 2
    assert [r["problem_id"] for r in rows] == ["p_0000000000000007", "p_0000000000000006"]  # the most suspect first
    # the running mean of the scores: what a reviewer who stops at this row can expect to find wrong
    scores = [float(r["gold_suspicion"]) for r in rows]
    assert [float(r["expected_precision"]) for r in rows] == pytest.approx(
        [round(sum(scores[:i + 1]) / (i + 1), 4) for i in range(len(scores))], abs=1e-4)
    assert float(rows[1]["expected_precision"]) < float(rows[0]["expected_precision"])
    assert isinstance(json.loads(rows[0]["policies"]), list) and rows[0]["review"] == ""


def test_an_unknown_format_is_refused(root, tmp_path):
    result = golds(root, "--out", str(tmp_path / "queue.txt"))
    assert result.exit_code == 2 and ".jsonl, .csv or .parquet" in result.output
    assert not (tmp_path / "queue.txt").exists()
