"""The popular RLVR datasets by name: `passband ingest` on each preset's fixture (tests/data/presets, written by
tests/support/make_preset_fixtures.py in the dataset's column layout and Arrow types, loaded through 🤗 datasets from a
local path) gives the expected problems, rejects and source difficulty; the card shows it beside ours."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from faultkit import PARAMS
from make_preset_fixtures import FIXTURES, OUT, write

from pipeline.cli import cli
from pipeline.config import ConfigError, SourceConfig
from pipeline.ingest import ingest
from pipeline.ingest import paths as colpaths
from pipeline.ingest.presets import PRESETS
from pipeline.ingest.sources import read_source
from pipeline.io import read_table
from pipeline.keys import problem_id

# preset -> (problems: [(question starts with, gold, source_difficulty)], rejects: [(source_id, reason)], duplicates)
EXPECTED = {
    "dapo-math-17k": ([("Find the number of positive divisors of $360$.", "24", None),
                       ("What is the remainder when $7^{100}$", "1", None)],
                      [("a2b3c4d5-0000-4000-8000-000000000001", "missing_gold")], 1),
    "deepscaler-preview": ([("Compute $\\sum_{k=1}^{10} k^2$.", "385", None), ("Solve for $x$", "6", None)],
                           [("train:2", "missing_gold")], 0),
    "big-math-rl-verified": ([("Given that $a + b = 5$", "13", 0.78125), ("Find the least positive integer", "25", 0.046875),
                              ("A rectangle has perimeter", "7", None)], [("train:3", "bad_source_difficulty")], 0),
    "openr1-math-220k": ([("Find all real $x$", "2,3", None), ("What is $\\frac{1}{2}", "\\frac{5}{6}", None)],
                         [("2d3e4f5a-1111-5222-8333-444455556666", "missing_gold")], 0),
    "numinamath-1.5": ([("Find the sum of the interior angles", "720", None), ("Let $x = 2$", "6", None)],
                       [("train:2", "missing_gold"), ("train:3", "missing_gold")], 0),
    "skywork-or1-rl-data": ([("Find the smallest prime", "101", 3.0), ("Compute $1 - \\frac{1}{2}$.", "\\frac{1}{2}", 12.0),
                             ("Compute $\\binom{6}{2}$.", "15", 0.0)], [("3", "wrong_type")], 0),
    "polaris-53k": ([("Let $f(x) = 2x + 1$", "15", 1.0), ("How many ways", "24", 0.375)],
                    [("train:2", "bad_source_difficulty")], 0),
    "deepmath-103k": ([("Evaluate $\\int_0^1", "1", 3.0), ("Determine the order", "24", 5.5)],
                      [("train:2", "missing_gold")], 0),
    "math-lighteval": ([("What is the value of $\\sqrt{49}", "11", 1.0), ("Find the sum of all $x$", "6", 3.0)],
                       [("train:2", "unparseable_gold")], 0),
    "gsm8k": ([("Ana has 5 apples", "12", None), ("A book costs $4.", "24", None)], [("train:2", "unparseable_gold")], 0),
}
ISSUE_PRESETS = {"dapo-math-17k", "deepscaler-preview", "big-math-rl-verified", "openr1-math-220k", "numinamath-1.5",
                 "skywork-or1-rl-data", "polaris-53k", "deepmath-103k", "math-lighteval", "gsm8k"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def test_fixtures_are_what_the_generator_writes(tmp_path):
    """The committed Parquet files hold exactly the generator's rows and Arrow types."""
    for path in write(tmp_path):
        name = path.parent.name
        committed = OUT / name / path.name
        assert pq.read_schema(committed).equals(FIXTURES[name][1]), name
        assert committed.read_bytes() == path.read_bytes(), f"{name}: rerun python tests/support/make_preset_fixtures.py"


def test_every_issue_preset_is_registered_and_tested():
    assert set(PRESETS) >= ISSUE_PRESETS and set(PRESETS) == set(EXPECTED) == set(FIXTURES)


def _ingest_cli(root: Path, sources: list[dict]) -> str:
    params = {**PARAMS, "ingest": {"sources": sources},
              "rollout": {**PARAMS["rollout"], "sources": [s["name"] for s in sources]}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    result = CliRunner().invoke(cli, ["ingest", "--params", str(root / "params.yaml"), "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_passband_ingest_on_each_preset_fixture(name, tmp_path):
    want_problems, want_rejects, want_dups = EXPECTED[name]
    src = name.replace(".", "_")
    out = _ingest_cli(tmp_path, [{"name": src, "kind": "hf", "preset": name, "path": str(OUT / name)}])
    n_rows = len(FIXTURES[name][2])
    assert f"{n_rows} rows read -> {len(want_problems)} problems, {len(want_rejects)} rejects, {want_dups} duplicates" in out
    problems = read_table(tmp_path / "data/problems", name="problems").to_pylist()
    got = [(p["question"], p["answer"], p["source_difficulty"]) for p in problems]
    assert [(q[:len(w[0])], a, d) for (q, a, d), w in zip(got, want_problems, strict=True)] == want_problems
    for p in problems:
        assert p["problem_id"] == problem_id(p["question"]) and p["source"] == src
        assert (p["source_difficulty_measure"] is not None) == (p["source_difficulty"] is not None)
        if p["source_difficulty"] is not None:
            assert p["source_difficulty_measure"] == PRESETS[name].difficulty_measure
    rejects = read_table(tmp_path / "data/rejects", name="rejects").to_pylist()
    assert [(r["source_id"], r["reason"]) for r in rejects] == want_rejects


def test_dapo_prompt_wrapper_is_stripped_and_metadata_kept(tmp_path):
    cfg = SourceConfig(name="dapo", kind="parquet", preset="dapo-math-17k", path=str(OUT / "dapo-math-17k"))
    res = ingest(read_source(cfg, root=tmp_path))
    first = res.problems.to_pylist()[0]
    assert first["question"] == "Find the number of positive divisors of $360$."
    assert first["n_duplicates"] == 1 and json.loads(first["metadata"]) == {"ability": "MATH", "data_source": "math_dapo"}


def test_no_gold_markers_are_named_in_the_reject(tmp_path):
    cfg = SourceConfig(name="numina", kind="parquet", preset="numinamath-1.5", path=str(OUT / "numinamath-1.5"))
    rejects = ingest(read_source(cfg, root=tmp_path)).rejects.to_pylist()
    assert [r["detail"] for r in rejects] == ["answer 'proof' is numinamath-1.5's marker for an item without a gold",
                                              "answer 'notfound' is numinamath-1.5's marker for an item without a gold"]
    assert rejects[0]["excerpt"].startswith("Show that $n^3 - n$")


def test_hf_kind_loads_a_local_jsonl_file_through_datasets(tmp_path):
    rows = [{"question": "What is $5 - 3$?", "final_answer": "2", "difficulty": 1.5, "topic": "Arithmetic"}]
    (tmp_path / "dm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = SourceConfig(name="dm", kind="hf", preset="deepmath-103k", path="dm.jsonl")
    got = ingest(read_source(cfg, root=tmp_path)).problems.to_pylist()
    assert [(p["answer"], p["subject"], p["source_difficulty"]) for p in got] == [("2", "Arithmetic", 1.5)]
    assert not list(tmp_path.glob("hf-home/datasets/*")), "the local load's cache is a temp folder, not HF_HOME"


def test_skywork_keeps_every_models_difficulty_and_the_gold_alternatives_in_metadata(tmp_path):
    cfg = SourceConfig(name="sky", kind="hf", preset="skywork-or1-rl-data", path=str(OUT / "skywork-or1-rl-data"))
    first, second, third = ingest(read_source(cfg, root=tmp_path)).problems.to_pylist()
    assert json.loads(first["metadata"])["extra_info.model_difficulty"] == {
        "DeepSeek-R1-Distill-Qwen-1.5B": 9, "DeepSeek-R1-Distill-Qwen-32B": 1, "DeepSeek-R1-Distill-Qwen-7B": 3}
    assert "gold_alternatives" not in json.loads(first["metadata"])  # '["101"]': one answer
    assert second["answer"] == "\\frac{1}{2}" and json.loads(second["metadata"])["gold_alternatives"] == ["0.5"]
    assert third["answer"] == "15"  # a plain string gold as it is


def test_a_list_gold_elsewhere_follows_the_ingest_rules(tmp_path):
    rows = [{"problem": "Find both roots of $x^2 - 7x + 12 = 0$.", "answer": [3, 4], "solution": None},
            {"problem": "Find $x$ if $x + 1 = 3$.", "answer": ["2"], "solution": None}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = SourceConfig(name="d", kind="jsonl", preset="deepscaler-preview", path="d.jsonl")
    assert [p["answer"] for p in ingest(read_source(cfg, root=tmp_path)).problems.to_pylist()] == ["(3, 4)", "2"]


def test_jsonl_source_with_a_preset_and_a_mapping_override(tmp_path):
    """kind: jsonl with a preset reads the same nested layout from JSON lines; the source's mapping wins."""
    rows = [{"problem": "What is $2 + 2$?", "answer": "4", "difficulty": "5/8", "alt": "0.9"},
            {"problem": "What is $3 + 3$?", "answer": "6", "difficulty": "1/8", "alt": "0.1"}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = SourceConfig(name="pol", kind="jsonl", preset="polaris-53k", path="p.jsonl")
    got = ingest(read_source(cfg, root=tmp_path)).problems.to_pylist()
    assert [(p["answer"], p["source_difficulty"]) for p in got] == [("4", 0.625), ("6", 0.125)]
    cfg = SourceConfig(name="pol", kind="jsonl", preset="polaris-53k", path="p.jsonl", mapping={"source_difficulty": "alt"})
    got = ingest(read_source(cfg, root=tmp_path)).problems.to_pylist()
    assert [(p["source_difficulty"], p["source_difficulty_measure"]) for p in got] == [(0.9, "alt"), (0.1, "alt")]


def test_gsm8k_preset_keys_problems_as_the_gsm8k_kind_does(tmp_path):
    lines = [{"question": r["question"], "answer": r["answer"]} for r in FIXTURES["gsm8k"][2]]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    kind = ingest(read_source(SourceConfig(name="g", kind="gsm8k", path="g.jsonl"), root=tmp_path)).problems
    preset = ingest(read_source(SourceConfig(name="g", kind="hf", preset="gsm8k", path=str(OUT / "gsm8k")),
                                root=tmp_path)).problems
    cols = ["problem_id", "question", "answer", "solution"]
    assert kind.select(cols).to_pylist() == preset.select(cols).to_pylist()


def test_column_paths():
    row = {"prompt": [{"role": "user", "content": "Q"}], "reward_model": {"ground_truth": "7"}, "a.b": 1,
           "m": {"Qwen2.5-7B": 4}}
    assert colpaths.get(row, "prompt[0].content") == "Q" and colpaths.get(row, "prompt[-1].role") == "user"
    assert colpaths.get(row, "reward_model.ground_truth") == "7" and colpaths.get(row, "a.b") == 1
    assert colpaths.get(row, 'm["Qwen2.5-7B"]') == 4
    assert colpaths.get(row, "prompt[1].content") is None and colpaths.get(row, "reward_model[0]") is None
    for bad in ("a..b", "prompt[0]content", "", "x[y]"):
        with pytest.raises(ConfigError):
            colpaths.parse(bad)


def test_unknown_preset_and_bad_path_are_one_line_config_errors(tmp_path):
    params = {**PARAMS, "ingest": {"sources": [{"name": "x", "kind": "hf", "preset": "dapo-math17k"}]},
              "rollout": {**PARAMS["rollout"], "sources": ["x"]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    result = CliRunner().invoke(cli, ["ingest", "--params", str(tmp_path / "params.yaml"), "--no-progress"])
    assert result.exit_code != 0 and "unknown source preset 'dapo-math17k' (did you mean dapo-math-17k" in result.output
    assert "Traceback" not in result.output
    cfg = SourceConfig(name="x", kind="parquet", path=str(OUT / "gsm8k"), mapping={"question": "q..x"})
    with pytest.raises(ConfigError, match=r"mapping path 'q\.\.x'"):
        list(read_source(cfg, root=tmp_path))


def test_source_difficulty_values():
    from pipeline.ingest.core import _Reject, source_difficulty

    assert [source_difficulty(v) for v in (None, "", 3, 0.5, "0.25", "3/8", "Level 5", "level 2")] == [
        None, None, 3.0, 0.5, 0.25, 0.375, 5.0, 2.0]
    for bad in ("n/a", "Level ?", "1/0", float("nan"), math.inf, True, [1], "x" * 1000):
        with pytest.raises(_Reject):
            source_difficulty(bad)


def _mean_ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _spearman(xs: list[float], ys: list[float]) -> float:
    rx, ry = _mean_ranks(xs), _mean_ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


@pytest.mark.slow
def test_card_shows_source_difficulty_beside_ours(tmp_path):
    """A tiny publish on the fake engine from a Big-Math-layout source: the card's section, its quartile table and
    its rank correlation (recomputed here from the published rows), and the SQL views."""
    import pyarrow as pa

    from pipeline.catalog import connect
    from pipeline.config import load_params

    sch = FIXTURES["big-math-rl-verified"][1]
    rows = [{"problem": f"What is {a} + {b}?", "answer": str(a + b), "source": "synthetic_math",
             "domain": ["Mathematics -> Arithmetic"], "llama8b_solve_rate": rate}
            for a, b, rate in [(12, 7, 0.9), (23, 19, 0.8), (31, 44, 0.7), (5, 9, 0.6), (48, 27, 0.5), (16, 16, 0.4),
                               (61, 18, 0.3), (7, 85, 0.2), (33, 33, 0.1), (52, 29, None)]]
    (tmp_path / "bm").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=sch), tmp_path / "bm" / "train-00000-of-00001.parquet")
    params = {**PARAMS, "ingest": {"sources": [{"name": "bigmath", "kind": "hf", "preset": "big-math-rl-verified",
                                                "path": "bm", "split": "train"}]},
              "rollout": {**PARAMS["rollout"], "sources": ["bigmath"], "k": 8},
              "publish": {"licenses": {"bigmath": "apache-2.0"}, "bands": ["too_easy", "learnable", "too_hard", "unsolved"]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    for stage in (["ingest"], ["rollout", "--set", "main"], ["verify", "--set", "main"],
                  ["annotate", "--set", "main", "--no-plots"], ["publish"]):
        args = [stage[0], "--params", str(tmp_path / "params.yaml"), *stage[1:]]
        if stage[0] != "publish":
            args.append("--no-progress")
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, (stage, result.output)
    published = pa.concat_tables([pq.read_table(p) for p in
                                  sorted((tmp_path / "data/published/data/default").rglob("*.parquet"))])
    with_sd = [r for r in published.to_pylist() if r["source_difficulty"] is not None]
    assert len(with_sd) == 9 and len(published) == 10
    rho = round(_spearman([r["source_difficulty"] for r in with_sd], [r["pass_rate"] for r in with_sd]), 3)
    card = (tmp_path / "data/published/README.md").read_text()
    section = card.split("## Source difficulty beside ours", 1)[1].split("\n## ", 1)[0]
    assert f"`bigmath`: {PRESETS['big-math-rl-verified'].difficulty_measure}; 9 items, Spearman ρ = {rho}" in section
    table = [line for line in section.splitlines() if line.startswith("| ") and " to " in line]
    assert len(table) == 4 and sum(int(c) for line in table for c in line.strip("| ").split(" | ")[1:]) == 9
    assert table[0].startswith("| 0.1 to 0.3 |") and table[-1].startswith("| 0.8 to 0.9 |")
    con = connect(load_params(tmp_path / "params.yaml"), root=tmp_path)
    n, sql_rho = con.execute("SELECT problems, spearman FROM source_difficulty_agreement").fetchone()
    assert n == 9 and sql_rho == rho
    assert con.execute("SELECT count(*) FROM source_difficulty WHERE source = 'bigmath'").fetchone()[0] == 9
