"""``passband verify`` driven through the CLI into a temp dir: shards, metrics, incrementality, table sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import load_params
from pipeline.io import read_table, shard_paths, write_table
from pipeline.schema import schema
from pipeline.verify import verifier_id

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

PARAMS = {
    "ingest": {"sources": [{"name": "t", "kind": "synthetic"}]},
    "policies": {"p": {"model": "embedded"}},
    "rollout": {"policies": ["p"]},
    "verify": {"workers": 1, "timeout_s": 2.0},
}
COMPLETIONS = [" 3 + 5 = 8. The answer is 8.", " 3 + 5 = 9. The answer is 9.", " 3 + 5 =", " The answer is \\boxed{8}."]


def setup(tmp: Path, *, k: int = 4, base: str = "data", params: dict = PARAMS) -> None:
    (tmp / "params.yaml").write_text(yaml.safe_dump(params))
    probs = [{"problem_id": f"p{i}", "source": "t", "source_id": str(i), "question": f"What is 3 + {5 + i}?",
              "answer": str(8 + i), "n_duplicates": 0} for i in range(2)]
    write_table(schema("problems").from_rows(probs), tmp / base / "problems/part-0.parquet", name="problems")
    rows = [{"problem_id": p["problem_id"], "policy_id": "pol_x", "sample_idx": j, "seed": j,
             "completion": COMPLETIONS[j % 4], "n_tokens": 10, "finish_reason": "stop"} for p in probs for j in range(k)]
    write_table(schema("rollouts").from_rows(rows), tmp / base / "rollouts/part-0.parquet", name="rollouts")


def invoke(tmp: Path, *args: str):
    res = CliRunner().invoke(cli, ["verify", "--params", str(tmp / "params.yaml"), "--no-progress", *args])
    assert res.exit_code == 0, res.output
    return res


def test_verify_writes_verdicts_and_is_incremental(tmp_path):
    setup(tmp_path)
    out = invoke(tmp_path).output
    assert "8 new verdicts" in out
    order = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    v = read_table(tmp_path / "data/verdicts", name="verdicts").sort_by(order)
    assert v.column("status").to_pylist() == ["correct", "incorrect", "no_answer", "correct",
                                              "incorrect", "correct", "no_answer", "incorrect"]
    vid = verifier_id(load_params(tmp_path / "params.yaml").verify)
    assert set(v.column("verifier_id").to_pylist()) == {vid}
    m = json.loads((tmp_path / "data/metrics/verify.json").read_text())
    assert m["verdicts"] == 8 and m["status"]["correct"] == 3 and m["skipped_already_verified"] == 0

    # again: nothing to do, no new shard
    assert "0 new verdicts" in invoke(tmp_path).output
    assert len(shard_paths(tmp_path / "data/verdicts")) == 1

    # more samples: only the new keys are verified
    setup(tmp_path, k=6)
    assert "4 new verdicts" in invoke(tmp_path).output
    assert read_table(tmp_path / "data/verdicts", name="verdicts").num_rows == 12

    # another verifier configuration is another verifier_id: everything again, the old verdicts stay
    params = {**PARAMS, "verify": {**PARAMS["verify"], "max_answer_chars": 50}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert "12 new verdicts" in invoke(tmp_path).output
    assert read_table(tmp_path / "data/verdicts", name="verdicts").num_rows == 24


def test_retry_failed_replaces_timeout_and_error_verdicts(tmp_path):
    import pyarrow.compute as pc

    setup(tmp_path)
    invoke(tmp_path)
    vid = verifier_id(load_params(tmp_path / "params.yaml").verify)
    [shard] = shard_paths(tmp_path / "data/verdicts")
    v = read_table(tmp_path / "data/verdicts", name="verdicts").sort_by([(k, "ascending") for k in ("problem_id", "sample_idx")])
    want = v.column("status").to_pylist()
    # as if a worker had died on sample 0 and a check had timed out on sample 3 of p1; plus another verifier's timeout
    rows = v.to_pylist()
    rows[0]["status"], rows[7]["status"] = "error", "timeout"
    other = {**rows[1], "verifier_id": "math-verify-0/other", "status": "timeout"}
    write_table(schema("verdicts").from_rows([*rows, other]), shard, name="verdicts")

    assert "0 new verdicts" in invoke(tmp_path).output  # without the flag, a failed verdict is a verdict
    out = invoke(tmp_path, "--retry-failed").output
    assert "2 new verdicts" in out
    after = read_table(tmp_path / "data/verdicts", name="verdicts")
    mine = after.filter(pc.equal(after.column("verifier_id"), vid)).sort_by(
        [(k, "ascending") for k in ("problem_id", "sample_idx")])
    assert mine.num_rows == 8 and mine.column("status").to_pylist() == want  # one verdict per key, the failures redone
    theirs = after.filter(pc.equal(after.column("verifier_id"), "math-verify-0/other"))
    assert theirs.column("status").to_pylist() == ["timeout"]  # another verifier's verdicts are not ours to retry
    assert json.loads((tmp_path / "data/metrics/verify.json").read_text())["retried_failed"] == 2
    assert "0 new verdicts" in invoke(tmp_path, "--retry-failed").output


def test_reformulated_set(tmp_path):
    setup(tmp_path, base="data/reformulated")
    invoke(tmp_path, "--set", "reformulated")
    assert read_table(tmp_path / "data/reformulated/verdicts", name="verdicts").num_rows == 8
    assert not shard_paths(tmp_path / "data/verdicts")
    assert (tmp_path / "data/metrics/verify-reformulated.json").is_file()


def test_unknown_extractor_is_a_clean_error(tmp_path):
    setup(tmp_path, params={**PARAMS, "verify": {"extractors": ["boxd"]}})
    res = CliRunner().invoke(cli, ["verify", "--params", str(tmp_path / "params.yaml"), "--no-progress"])
    assert res.exit_code == 1 and "unknown extractor 'boxd' (did you mean boxed?)" in res.output


def test_help():
    res = CliRunner().invoke(cli, ["verify", "--help"])
    assert res.exit_code == 0 and "--set" in res.output


def test_verifier_id_follows_the_code_that_decides_a_verdict():
    import importlib

    from pipeline.verify.core import source_digest, verdict_modules, verdict_source_digest

    sources = {m: Path(importlib.import_module(m).__file__).read_text() for m in verdict_modules()}
    assert "pipeline.verify.extractors.boxed" in sources  # every rule of the extractors' folder counts
    assert source_digest(sources) == verdict_source_digest()
    answers = sources["pipeline.verify.answer_text"]  # how an answer's text is read decides verdicts too
    policy = '_CHOICE = re.compile(r"^\\(?([A-Ea-e])\\)?$")'
    assert policy in answers
    edited = {**sources, "pipeline.verify.answer_text": answers.replace(policy, policy.replace("A-Ea-e", "A-Da-d"))}
    assert source_digest(edited) != source_digest(sources)  # a policy edit: a new verifier
    grader = sources["pipeline.verify.grader"]
    reworded = {**sources, "pipeline.verify.grader": grader.replace('"""Grading one', '"""Grading a single', 1)
                .replace("# the common case", "# the usual case")}
    assert reworded != sources and source_digest(reworded) == source_digest(sources)  # prose only: the same one


def test_verifier_id_does_not_follow_the_file_a_rule_is_in():
    """Moving a rule to another module (with the imports that takes) decides no verdict differently: same digest."""
    import importlib

    from pipeline.verify.core import source_digest, verdict_modules

    sources = {m: Path(importlib.import_module(m).__file__).read_text() for m in verdict_modules()}
    rule = sources.pop("pipeline.verify.extractors.last_number")
    head, body = rule.split("\n\n\n@register", 1)
    moved = {**sources, "pipeline.verify.extract": sources["pipeline.verify.extract"]
             + "\n\n@register" + body, "pipeline.verify.extractors.other": head + "\nimport os\n"}
    assert source_digest(moved) == source_digest({**sources, "pipeline.verify.extractors.last_number": rule})
    edited = {**sources, "pipeline.verify.extractors.last_number": rule.replace("nums[-1]", "nums[0]")}
    assert "nums[-1]" in rule and source_digest(edited) != source_digest(moved)


def test_verifier_id_changes_with_the_policy_code(monkeypatch):
    from pipeline.config import VerifyConfig
    from pipeline.verify import core

    before = verifier_id(VerifyConfig())
    monkeypatch.setattr(core, "verdict_source_digest", lambda: "edited-policy")
    assert verifier_id(VerifyConfig()) != before
    assert "GRADER_VERSION" not in Path(core.__file__).read_text()


def test_a_changed_gold_reverifies_exactly_that_problems_rollouts(tmp_path):
    import pyarrow.parquet as pq

    from pipeline.verify import gold_digest

    setup(tmp_path)
    invoke(tmp_path)
    order = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    before = read_table(tmp_path / "data/verdicts", name="verdicts").sort_by(order).to_pylist()
    assert {v["gold_digest"] for v in before if v["problem_id"] == "p1"} == {gold_digest("9")}
    # p1's gold corrected from 9 to 8: its four rollouts are graded again, p0's are not touched
    probs = read_table(tmp_path / "data/problems", name="problems").to_pylist()
    probs[1]["answer"] = "8"
    write_table(schema("problems").from_rows(probs), tmp_path / "data/problems/part-0.parquet", name="problems")
    out = invoke(tmp_path).output
    assert "4 new verdicts" in out
    m = json.loads((tmp_path / "data/metrics/verify.json").read_text())
    assert m["reverified_changed_gold"] == 4 and m["skipped_already_verified"] == 4
    after = read_table(tmp_path / "data/verdicts", name="verdicts").sort_by(order).to_pylist()
    assert len(after) == 8  # one verdict per key: the stale ones were removed
    assert [v for v in after if v["problem_id"] == "p0"] == [v for v in before if v["problem_id"] == "p0"]
    p1 = [v for v in after if v["problem_id"] == "p1"]
    assert [v["status"] for v in p1] == ["correct", "incorrect", "no_answer", "correct"]
    assert {v["gold_digest"] for v in p1} == {gold_digest("8")}
    assert "0 new verdicts" in invoke(tmp_path).output

    # a shard written before verdicts recorded the gold's digest gets the column (null), and is graded again
    for path in shard_paths(tmp_path / "data/verdicts"):
        pq.write_table(pq.read_table(path).drop_columns(["gold_digest"]), path)
    assert "8 new verdicts" in invoke(tmp_path).output
    assert read_table(tmp_path / "data/verdicts", name="verdicts").num_rows == 8


def test_rollouts_of_problems_no_longer_in_problems_are_skipped_and_counted(tmp_path):
    # a narrowed source: p1 leaves the problems table, its rollouts stay (a cache for a wider selection)
    setup(tmp_path)
    problems = read_table(tmp_path / "data/problems", name="problems")
    write_table(problems.slice(0, 1), tmp_path / "data/problems/part-0.parquet", name="problems")
    assert "4 new verdicts" in invoke(tmp_path).output
    v = read_table(tmp_path / "data/verdicts", name="verdicts")
    assert set(v.column("problem_id").to_pylist()) == {"p0"}
    m = json.loads((tmp_path / "data/metrics/verify.json").read_text())
    assert m["rollouts"] == 8 and m["skipped_not_in_problems"] == 4 and m["skipped_already_verified"] == 0


def test_verify_streams_the_rollouts_chunk_by_chunk(tmp_path, monkeypatch):
    """Several rollouts shards, a chunk smaller than the table: one verdicts shard a chunk, each read holding at most
    a chunk's text (plus one shard), and the same verdicts as one pass over the whole table."""
    from pipeline.verify import stage

    for d in ("whole", "chunked"):
        (tmp_path / d).mkdir()
    setup(tmp_path / "whole", k=4)
    invoke(tmp_path / "whole")
    whole = read_table(tmp_path / "whole/data/verdicts", name="verdicts")

    setup(tmp_path / "chunked", k=4)
    rollouts = read_table(tmp_path / "chunked/data/rollouts", name="rollouts")
    (tmp_path / "chunked/data/rollouts/part-0.parquet").unlink()
    for i in range(4):  # 4 shards of 2 rollouts
        write_table(rollouts.slice(2 * i, 2), tmp_path / f"chunked/data/rollouts/s{i}.parquet", name="rollouts")
    texts_read: list[int] = []
    read_shard = stage.read_shard

    def spy(path, *, name, columns=None):
        t = read_shard(path, name=name, columns=columns)
        if name == "rollouts":
            texts_read.append("completion" in t.column_names)
        return t

    monkeypatch.setattr(stage, "read_shard", spy)
    monkeypatch.setattr(stage, "CHUNK_ROWS", 3)
    chunks = []
    verify = stage.verify
    monkeypatch.setattr(stage, "verify", lambda todo, *a, **kw: chunks.append(todo.num_rows) or verify(todo, *a, **kw))
    assert "8 new verdicts" in invoke(tmp_path / "chunked").output
    assert chunks == [4, 4]  # whole shards until a chunk holds >= 3 rollouts
    assert texts_read == [False] * 4 + [True] * 4  # keys first (what is pending), then each shard's text once
    assert len(shard_paths(tmp_path / "chunked/data/verdicts")) == 2
    order = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    chunked = read_table(tmp_path / "chunked/data/verdicts", name="verdicts")
    assert chunked.sort_by(order).equals(whole.sort_by(order))

    # a rerun reads no text: nothing is pending
    texts_read.clear()
    assert "0 new verdicts" in invoke(tmp_path / "chunked").output
    assert texts_read == [False] * 4


def test_pending_shards_match_every_shard_against_the_done_keys_once(tmp_path):
    """Which rollouts of which shard still need a verdict, from the keys alone: out-of-scope problems left out and
    counted, done keys left out, every other key kept in its shard (one match of all the keys, not one per shard)."""
    import random

    import pyarrow as pa

    from pipeline.verify.stage import KEY, pending_chunks, pending_shards

    rng = random.Random(0)
    out = tmp_path / "rollouts"
    rows = []
    for shard in range(12):
        keys = [(f"p{rng.randrange(40)}", "pol", shard * 100 + i) for i in range(rng.randrange(1, 30))]
        rows.append(keys)
        write_table(pa.table({"problem_id": [k[0] for k in keys], "policy_id": [k[1] for k in keys],
                              "sample_idx": [k[2] for k in keys], "seed": [k[2] for k in keys],
                              "completion": [f"text {k}" for k in keys], "n_tokens": [3] * len(keys),
                              "finish_reason": ["stop"] * len(keys)}), out / f"part-{shard:02d}.parquet", name="rollouts")
    problems = pa.table({"problem_id": [f"p{i}" for i in range(30)]})  # p30..p39: out of scope
    every = [k for keys in rows for k in keys]
    done_keys = rng.sample([k for k in every if int(k[0][1:]) < 30], 50)
    done = pa.table({"problem_id": [k[0] for k in done_keys], "policy_id": [k[1] for k in done_keys],
                     "sample_idx": [k[2] for k in done_keys]})
    shards, total, left_out = pending_shards(out, problems, done)
    assert total == len(every) and left_out == sum(int(k[0][1:]) >= 30 for k in every)
    paths = shard_paths(out)
    want = {paths[i]: sorted(k for k in keys if int(k[0][1:]) < 30 and k not in done_keys) for i, keys in enumerate(rows)}
    assert {path: sorted(zip(*(pend.column(c).to_pylist() for c in KEY), strict=True)) for path, pend, _ in shards} == \
        {p: w for p, w in want.items() if w}
    assert all(n == pend.num_rows for _, pend, n in shards) and [p for p, _, _ in shards] == [p for p in paths if want[p]]
    text = pa.concat_tables(pending_chunks(shards, problems, chunk_rows=16))
    assert sorted(text.column("completion").to_pylist()) == sorted(f"text {k}" for w in want.values() for k in w)
    # nothing done yet: every in-scope row of each shard, counted, read in the shard's own order
    fresh, _, _ = pending_shards(out, problems, done.slice(0, 0))
    assert [(p, n) for p, keys, n in fresh if keys is None] == [
        (paths[i], sum(int(k[0][1:]) < 30 for k in keys)) for i, keys in enumerate(rows) if any(int(k[0][1:]) < 30 for k in keys)]
