"""Every SQL query README.md shows (```sql blocks and `passband sql "..."` lines) runs on a small real catalog.

The catalog is built from real completions of the embedded model (tests/data/embedded_completions.jsonl):
their problems, verified by the verify stage and annotated by the annotate stage, in a temp dir.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from pipeline.catalog import query
from pipeline.config import load_params
from pipeline.io import write_table
from pipeline.keys import problem_id
from pipeline.schema import schema

REPO = Path(__file__).resolve().parent.parent


def readme_queries() -> list[str]:
    text = (REPO / "README.md").read_text()
    out = [b.strip() for b in re.findall(r"```sql\n(.*?)```", text, flags=re.S)]
    for quoted in re.findall(r'^passband sql ("(?:[^"\\]|\\.)*")', text, flags=re.M | re.S):
        out.append(shlex.split(quoted)[0])  # a command may span lines
    return out


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    params = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
              "rollout": {"policies": ["p"]}, "verify": {"workers": 2, "timeout_s": 2.0}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    rows = [json.loads(line) for line in (REPO / "tests/data/embedded_completions.jsonl").read_text().splitlines()]
    probs, rolls, seen = {}, [], {}
    for r in rows:
        pid = problem_id(r["question"])
        probs.setdefault(pid, {"problem_id": pid, "source": r["source"], "source_id": pid, "question": r["question"],
                               "answer": r["gold"], "n_duplicates": 0})
        pol = f"pol_{r['style']}"
        idx = seen.setdefault((pid, pol), [0])
        rolls.append({"problem_id": pid, "policy_id": pol, "sample_idx": idx[0], "seed": idx[0], "completion": r["completion"],
                      "n_tokens": r["n_tokens"], "finish_reason": r["finish_reason"]})
        idx[0] += 1
    write_table(schema("problems").from_rows(list(probs.values())), tmp / "data/problems/part-0.parquet", name="problems")
    write_table(schema("rollouts").from_rows(rolls), tmp / "data/rollouts/part-0.parquet", name="rollouts")
    from pipeline import annotate, verify

    p = load_params(tmp / "params.yaml")
    verify.run(p, root=tmp, progress=False)
    annotate.run(p, root=tmp, progress=False)
    return p, tmp


def test_readme_has_the_queries():
    qs = readme_queries()
    assert len(qs) >= 7
    assert any("rare_successes" in q for q in qs) and any("band_counts" in q for q in qs)
    assert any("flagged_correct" in q for q in qs)


@pytest.mark.parametrize("sql", readme_queries())
def test_readme_query_runs(catalog, sql):
    params, root = catalog
    df = query(params, sql, root=root)
    assert df is not None and df.width > 0


def test_flag_kinds_follow_the_registry_and_drive_flagged_correct(catalog):
    from pipeline.annotate.flags import DETECTORS

    params, root = catalog
    kinds = query(params, "SELECT flag, kind FROM flag_kinds", root=root)
    assert dict(zip(kinds["flag"], kinds["kind"], strict=True)) == {n: d.kind for n, d in DETECTORS.items()}
    # flagged_correct lists exactly the shortcut flags on correct problems' rollouts, never a risk/degeneracy flag
    seen = query(params, "SELECT DISTINCT unnest(flags_seen) AS flag FROM flagged_correct", root=root)["flag"].to_list()
    shortcuts = {n for n, d in DETECTORS.items() if d.kind == "shortcut"}
    assert seen and set(seen) <= shortcuts


def test_views_see_the_annotations(catalog):
    params, root = catalog
    bands = query(params, "SELECT sum(problems) AS n FROM band_counts", root=root)
    assert bands["n"][0] == query(params, "SELECT count(*) AS n FROM difficulty", root=root)["n"][0] > 0
    statuses = set(query(params, "SELECT DISTINCT status FROM verdicts", root=root)["status"].to_list())
    assert {"correct", "incorrect", "no_answer"} <= statuses
