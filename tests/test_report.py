"""``passband report``: the files it writes hold every item once, each rollout with the verdict of the verifier its
difficulty row names, capped per policy; nothing points off the machine; it replaces only a folder it wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from publish_tables import OTHER_ID, PRIMARY_ID, VERIFIER, make_repo, mark_suspect_gold
from rollout_tables import add_rollouts

from pipeline.cli import cli
from pipeline.io import read_table

pytestmark = pytest.mark.slow
CAP = 3
SUSPECT = "p_0000000000000007"


def report(root: Path):
    return CliRunner().invoke(cli, ["report", "--params", str(root / "params.yaml")])


def calls(folder: Path, name: str, prefix: str = "") -> dict[int, list]:
    out = {}
    for f in sorted(folder.glob(f"{prefix}[0-9]*.js")):
        m = re.fullmatch(rf"PB\.{name}\((\d+), (.*)\);\n", f.read_text(), re.S)
        assert m, f"{f.name} is not one PB.{name}(n, data) call"
        assert f.name == f"{prefix}{int(m[1]):05d}.js"
        out[int(m[1])] = json.loads(m[2])
    return out


def ids(base: Path, table: str) -> list[str]:
    return (read_table(base / "data" / table, name=table.split("/")[-1]).column("problem_id").to_pylist()
            + read_table(base / "data/reformulated" / table, name=table.split("/")[-1]).column("problem_id").to_pylist())


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("rep") / "repo"))
    assert mark_suspect_gold(root) == SUSPECT
    (root / "params.yaml").write_text((root / "params.yaml").read_text() + f"report: {{max_rollouts_per_item: {CAP}, "
                                                                           "items_per_file: 4, index_rows_per_file: 5}\n")
    result = report(root)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("report: ") and "items" in result.output
    return root


def test_every_item_once_in_the_index_and_its_item_file(root):
    folder = root / "data/report"
    problems = sorted(ids(root, "problems"))
    measured = sorted(set(ids(root, "difficulty")))
    index = [r for _, rows in sorted(calls(folder / "index", "index").items()) for r in rows]
    unmeasured = [r for _, rows in sorted(calls(folder / "index", "index", "u").items()) for r in rows]
    items = calls(folder / "items", "items")
    # the measured items' index loads at open; the never-measured ones' is apart, loaded when asked for
    assert [r["id"] for r in index] == measured and 0 < len(measured) < len(problems)
    assert sorted(r["id"] for r in index + unmeasured) == problems
    assert all(any(r["b"]) for r in index) and not any(any(r["b"]) for r in unmeasured)
    assert len(items) == 4  # 15 items, 4 per item file
    assert len(calls(folder / "index", "index")) == -(-len(measured) // 5)  # 5 rows per index file
    for r in index + unmeasured:
        assert r["id"] in {rec["id"] for rec in items[r["k"]]}
    info = json.loads((folder / "report.json").read_text())
    assert info["items"] == len(problems) and info["max_rollouts_per_item"] == CAP


def test_each_item_shows_its_answer_distribution_and_the_suspect_golds_are_listed(root):
    import duckdb

    records = {rec["id"]: rec for recs in calls(root / "data/report/items", "items").values() for rec in recs}
    con = duckdb.connect()
    counts = con.execute(f"""
        SELECT v.problem_id, v.policy_id, v.extracted, count(*) AS n
        FROM read_parquet(['{root}/data/verdicts/**/*.parquet', '{root}/data/reformulated/verdicts/**/*.parquet']) v
        JOIN read_parquet(['{root}/data/difficulty/**/*.parquet', '{root}/data/reformulated/difficulty/**/*.parquet']) d
          ON d.problem_id = v.problem_id AND d.policy_id = v.policy_id AND d.verifier_id = v.verifier_id
         AND v.sample_idx < d.n
        GROUP BY ALL""").fetchall()
    expected: dict = {}
    for pid, pol, answer, n in counts:
        expected.setdefault((pid, pol), {})[answer] = n
    seen = 0
    for rec in records.values():
        for p in rec["policies"]:
            want = expected.get((rec["id"], p["policy_id"]), {})
            assert p["distinct_answers"] == len(want)
            shown = {a: n for a, _, n in p["answers"]}
            assert len(shown) == min(6, len(want)) and all(want[a] == n for a, n in shown.items())
            assert sorted(shown.values(), reverse=True) == sorted(want.values(), reverse=True)[:6]
            assert [n for _, _, n in p["answers"]] == sorted(shown.values(), reverse=True)  # most frequent first
            seen += 1
    assert seen > 0
    # the suspect gold: its index row says so (the browser's "suspect gold" filter), the overview lists it
    index = [r for _, rows in calls(root / "data/report/index", "index").items() for r in rows]
    assert [r["id"] for r in index if r.get("g")] == [SUSPECT]
    assert {p["policy_id"]: p["gold_suspect"] for p in records[SUSPECT]["policies"]}[PRIMARY_ID] is True
    page = (root / "data/report/index.html").read_text()
    assert re.search(rf'<table data-view="suspect_golds">.*{SUSPECT}', page)


def test_rollouts_are_capped_and_carry_the_difficulty_verifiers_verdicts(root):
    records = {rec["id"]: rec for recs in calls(root / "data/report/items", "items").values() for rec in recs}
    verdicts = {}
    for base in ("data", "data/reformulated"):
        for v in read_table(root / base / "verdicts", name="verdicts").to_pylist():
            if v["verifier_id"] == VERIFIER:
                verdicts[(v["problem_id"], v["policy_id"], v["sample_idx"])] = v["status"]
    shown = 0
    for rec in records.values():
        for p in rec["policies"]:
            assert [r["i"] for r in p["rollouts"]] == list(range(min(CAP, p["n"])))
            for r in p["rollouts"]:
                assert r["verdict"] == verdicts[(rec["id"], p["policy_id"], r["i"])]
                assert r["thinking"] is not None and r["thinking"].startswith("working")  # read apart from the answer
                assert [f["flag"] for f in r["flags"]] == [f for f, every in (("truncated", 5), ("unsupported_answer", 3))
                                                            if r["i"] % every == 0]
            shown += len(p["rollouts"])
    assert shown == json.loads((root / "data/report/report.json").read_text())["rollouts_shown"] > 0
    two = records["p_0000000000000003"]
    assert {p["policy_id"] for p in two["policies"]} == {PRIMARY_ID, OTHER_ID}  # its history across policies
    assert [c["id"] for c in records["p_0000000000000007"]["children"]] == ["p_00000000000000r1"]


def test_nothing_is_loaded_from_the_network(root):
    page = (root / "data/report/index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert "plotly.min.js" in refs and "report.js" in refs
    assert not [r for r in refs if re.match(r"[a-z]+://|//", r)], refs
    assert (root / "data/report/plotly.min.js").stat().st_size > 1_000_000  # the library itself, not a stub


def test_a_folder_it_did_not_write_is_refused_untouched(tmp_path):
    root = add_rollouts(make_repo(tmp_path / "repo"))
    (root / "data/report").mkdir(parents=True)
    (root / "data/report/notes.txt").write_text("mine")
    result = report(root)
    assert result.exit_code == 1
    assert "report.json" in result.output and "nothing in it was touched" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert [p.name for p in (root / "data/report").iterdir()] == ["notes.txt"]


def test_a_rerun_replaces_its_own_folder_whole(root):
    stale = root / "data/report/items/99999.js"
    stale.write_text("PB.items(99999, []);\n")
    assert report(root).exit_code == 0
    assert not stale.exists()
    assert not list((root / "data").glob(".report.*"))  # no staging folder left
