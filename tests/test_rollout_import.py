"""Importing rollouts that already exist (pipeline/rollout/importer.py, the layouts of pipeline/rollout/layouts):
each layout's rows read as records, matching and its rejects, the policy id, resuming, a dump that grows, the
round trip through passband's own published ``rollouts`` config, and hostile dumps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.config import ConfigError
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.params_loader import load_params
from pipeline.rollout.importer import import_dump
from pipeline.rollout.layout import LAYOUTS, LayoutError, get_layout
from pipeline.rollout.policy import resolve_policy
from pipeline.schema import schema

QUESTIONS = [f"What is {i} + {i % 3 + 1}?" for i in range(6)]
GOLDS = [str(i + i % 3 + 1) for i in range(6)]
DECLARED = {"model": "org/Model-7B", "revision": "abc123", "prompt": "fewshot_arith",
            "sampling": {"temperature": 0.7, "max_tokens": 512}}


def _project(root: Path, dump: dict, *, extra_policies: dict | None = None, k: int = 8) -> Path:
    """Problems written directly (the six questions), one imported policy ``imp``, params.yaml."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
             "answer": GOLDS[i], "n_duplicates": 0} for i, q in enumerate(QUESTIONS)]
    write_table(schema("problems").from_rows(rows), root / "data/problems/part-0.parquet", name="problems")
    policies = {"imp": {**DECLARED, "dump": dump}, **(extra_policies or {})}
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]}, "policies": policies,
              "rollout": {"policies": list(policies), "k": k, "shard_size": 4, "engine_options": {"fake": {}}},
              "verify": {"workers": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _plain(i: int, answers: list[str]) -> dict:
    return {"problem": QUESTIONS[i], "answer": GOLDS[i], "completions": [f"So the answer is {a}." for a in answers]}


def _stages(params_path: Path, root: Path, *stages: str):
    out = []
    for stage in stages:
        res = CliRunner().invoke(cli, [stage, "--params", str(params_path)]
                                 + (["--no-progress"] if stage not in ("publish", "summary") else [])
                                 + (["--no-plots"] if stage == "annotate" else []))
        assert res.exit_code == 0, res.output
        out.append(res.output)
    return out


def _rejects(root: Path) -> list[dict]:
    return read_table(root / "data/rollouts/rejects", name="rejects").to_pylist()


# --- the layouts ----------------------------------------------------------------------------------------------

def _records(layout: str, row: dict, **options):
    return list(get_layout(layout)(options).read(row))


def test_every_layout_reads_its_rows():
    assert set(LAYOUTS) >= {"plain", "qwen_harness", "lm_eval", "openr1", "passband_rollouts", "verl"}
    # the Qwen2.5-Math / math-evaluation-harness output: completions in `code`, its verdicts in `score`
    (r,) = _records("qwen_harness", {"idx": 7, "question": "Q?", "gt": 18, "code": ["a \\boxed{18}", "b"],
                                     "pred": ["18", "3"], "score": [True, False]})
    assert (r.question, r.source_id, r.answer) == ("Q?", "7", "18")
    assert [(s.text, s.upstream_correct, s.n_tokens, s.finish_reason) for s in r.samples] == [
        ("a \\boxed{18}", True, None, None), ("b", False, None, None)]
    # lm-evaluation-harness --log_samples: one request of n repeats; the per-document metric only for n = 1
    (r,) = _records("lm_eval", {"doc_id": 3, "doc": {"problem": "Q?", "answer": "4"}, "target": "4",
                                "resps": [["x", "y", "z"]], "filtered_resps": ["4"], "exact_match": 1.0})
    assert r.question == "Q?" and [s.text for s in r.samples] == ["x", "y", "z"]
    assert {s.upstream_correct for s in r.samples} == {None} and r.source_id == "3"
    (r,) = _records("lm_eval", {"doc_id": 3, "doc": {"question": "Q?"}, "resps": [["x"]], "exact_match": 0.0})
    assert r.samples[0].upstream_correct is False
    # OpenR1-Math-220k: generations with math-verify's correctness and finish reasons where filled
    (r,) = _records("openr1", {"problem": "Q?", "answer": "2", "uuid": "u1", "generations": ["g1", "g2"],
                               "correctness_math_verify": [True, False], "finish_reasons": [None, "length"],
                               "is_reasoning_complete": [True, False]})
    assert [(s.upstream_correct, s.finish_reason) for s in r.samples] == [(True, None), (False, "length")]
    # passband's own rollouts config
    (r,) = _records("passband_rollouts", {"problem_id": "p_1", "problem": "Q?", "answer": "2", "policy": "a",
                                          "policy_id": "pol_1", "generations": ["g"], "finish_reasons": ["stop"],
                                          "generation_token_length": [5], "correctness_math_verify": [True]})
    assert (r.problem_id, r.samples[0].n_tokens, r.samples[0].finish_reason) == ("p_1", 5, "stop")
    assert _records("passband_rollouts", {"policy": "a", "policy_id": "pol_1"}, policy="b") == []  # another's row
    # verl's rollout dump: one sample a line, the question out of the ChatML prompt, an appended instruction stripped
    row = {"input": "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nQ? Think step by step."
                    "<|im_end|>\n<|im_start|>assistant\n", "output": "#### 2", "score": 1.0, "step": 4}
    (r,) = _records("verl", row, strip=[" Think step by step."])
    assert (r.question, r.samples[0].upstream_correct) == ("Q?", True)
    assert _records("verl", row, step=5) == []  # another step: skipped
    # plain: strings or objects
    (r,) = _records("plain", {"question": "Q?", "completions": ["a", {"text": "b", "finish_reason": "length",
                                                                         "n_tokens": 9, "correct": False}]})
    assert [(s.text, s.finish_reason, s.n_tokens, s.upstream_correct) for s in r.samples] == [
        ("a", None, None, None), ("b", "length", 9, False)]


def test_a_layout_names_what_it_cannot_read():
    with pytest.raises(LayoutError, match="none of the fields") as e:
        _records("plain", {"q": "Q?", "completions": []})
    assert e.value.reason == "missing_field"
    with pytest.raises(LayoutError, match="not a list"):
        _records("qwen_harness", {"question": "Q?", "code": "just one"})
    with pytest.raises(LayoutError, match="3 entries for 2 samples"):
        _records("openr1", {"problem": "Q?", "generations": ["a", "b"], "correctness_math_verify": [1, 0, 1]})
    with pytest.raises(ConfigError, match="question_pattern"):
        get_layout("verl")({"question_pattern": "no group"})
    with pytest.raises(ConfigError, match="unknown dump layout 'qwen_harnes' \\(did you mean qwen_harness"):
        get_layout("qwen_harnes")


# --- the policy -----------------------------------------------------------------------------------------------

def test_the_policy_id_hashes_the_dump_and_the_declared_snapshot(tmp_path):
    dump = _jsonl(tmp_path / "d.jsonl", [_plain(0, ["1"])])
    p = load_params(_project(tmp_path, {"path": "d.jsonl", "layout": "plain"}))
    a = resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path)
    assert a.identity["engine"] == "import" and a.identity["dump"]["layout"] == "plain"
    assert a.policy_id == resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path).policy_id
    _jsonl(dump, [_plain(0, ["2"])])
    b = resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path)
    assert b.policy_id != a.policy_id  # a changed dump is a new snapshot
    with pytest.raises(ConfigError, match="declare the model that wrote it"):
        resolve_policy("imp", p.policies["imp"].model_copy(update={"revision": None}), models_dir=tmp_path, root=tmp_path)
    with pytest.raises(ConfigError, match="dump file not found"):
        resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path / "elsewhere")
    bad = _project(tmp_path / "bad", {"path": "d.jsonl", "layout": "plain", "options": {"questoin": ["x"]}})
    with pytest.raises(ConfigError, match=r"policies\.imp\.dump\.options"):
        load_params(bad)


# --- the stage, end to end ------------------------------------------------------------------------------------

def test_an_imported_policy_is_verified_and_annotated_with_its_own_k_per_item(tmp_path):
    rows = [_plain(0, ["1", "1", "2"]), _plain(1, ["3"] * 10 + ["0"] * 2), _plain(2, ["9"])]
    _jsonl(tmp_path / "d.jsonl", rows)
    params = _project(tmp_path, {"path": "d.jsonl", "layout": "plain"}, k=4)
    out = _stages(params, tmp_path, "rollout", "verify", "annotate")
    assert "16 samples generated" in out[0] and "3 rows read -> 16 samples of 3 problems" in out[0]
    diff = {r["problem_id"]: r for r in read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()}
    got = {QUESTIONS.index(next(q for q in QUESTIONS if problem_id(q) == pid)): (r["n"], r["n_correct"], r["stop_reason"])
           for pid, r in diff.items()}
    # n is each item's own count, past rollout.k = 4; the interval is that n's
    assert got == {0: (3, 2, "imported"), 1: (12, 10, "imported"), 2: (1, 0, "imported")}
    roll = read_table(tmp_path / "data/rollouts", name="rollouts")
    assert roll.column("n_tokens").null_count == roll.num_rows  # the dump gives no counts: null, never guessed
    assert roll.column("finish_reason").null_count == roll.num_rows
    # a second run reads nothing
    out = _stages(params, tmp_path, "rollout")
    assert "up to date (16 samples), nothing read" in out[0]


def test_rows_that_do_not_match_or_read_are_rejects_with_their_reason(tmp_path):
    big = {"problem": QUESTIONS[4], "completions": ["x"] * 1_000_000}  # a 5 MB line: read, counted, refused
    lines = [_plain(0, ["1"]), _plain(0, ["1"]),  # the second row for one problem: duplicate
             {"problem": "What is the capital of nowhere?", "completions": ["x"]},  # no_match
             {"prompt": QUESTIONS[1], "completions": ["x"]},  # missing_field (another layout's line)
             {"problem": QUESTIONS[2], "completions": []},  # empty
             big,  # too_many_samples
             "{not json", "[1, 2]"]
    path = _jsonl(tmp_path / "d.jsonl", lines)
    with path.open("ab") as f:
        f.write(b'{"problem": "\xff\xfe bad bytes", "completions": ["x"]}\n')
    out = _stages(_project(tmp_path, {"path": "d.jsonl", "layout": "plain"}), tmp_path, "rollout")[0]
    reasons = sorted(r["reason"] for r in _rejects(tmp_path))
    assert reasons == ["duplicate", "empty", "malformed_json", "missing_field", "no_match", "not_an_object",
                       "not_utf8", "too_many_samples"], out
    by = {r["reason"]: r for r in _rejects(tmp_path)}
    assert by["duplicate"]["source_id"] == "d.jsonl:2" and "line 1" in by["duplicate"]["detail"]
    assert "1,000,000 samples" in by["too_many_samples"]["detail"]
    assert read_table(tmp_path / "data/rollouts", name="rollouts").num_rows == 1  # only the one good row


def test_a_dump_of_another_layout_or_format_is_one_error_and_writes_nothing(tmp_path):
    qwen = [{"idx": i, "question": q, "gt": GOLDS[i], "code": ["x"], "score": [True]} for i, q in enumerate(QUESTIONS)]
    _jsonl(tmp_path / "q.jsonl", qwen)
    params = _project(tmp_path, {"path": "q.jsonl", "layout": "lm_eval"})
    res = CliRunner().invoke(cli, ["rollout", "--params", str(params), "--no-progress"])
    assert res.exit_code != 0 and "reads as layout 'lm_eval'" in res.output and "is dump.layout right?" in res.output
    assert not list((tmp_path / "data/rollouts").glob("*.parquet"))
    with gzip.open(tmp_path / "z.jsonl", "wt") as f:
        f.write(json.dumps(_plain(0, ["1"])) + "\n")
    params = _project(tmp_path / "z", {"path": str(tmp_path / "z.jsonl"), "layout": "plain"})
    res = CliRunner().invoke(cli, ["rollout", "--params", str(params), "--no-progress"])
    assert res.exit_code != 0 and "gzip-compressed" in res.output
    # the right layout reads it, and keeps the harness's verdicts beside passband's
    params = _project(tmp_path / "ok", {"path": str(tmp_path / "q.jsonl"), "layout": "qwen_harness"})
    raw = yaml.safe_load(params.read_text())
    raw["publish"] = {"licenses": {"synthetic": "apache-2.0"}}
    params.write_text(yaml.safe_dump(raw))
    out = _stages(params, tmp_path / "ok", "rollout", "verify", "annotate", "summary", "publish")
    card = (tmp_path / "ok/data/published/README.md").read_text()
    assert "imported from a dump, not generated by passband: layout `qwen_harness`" in card
    assert "6 samples of 6 problems" in out[0] and "upstream correctness on 6 samples" in out[0]
    # passband summary sets the harness's grader beside passband's: 6 graded by both
    table = out[3].split("Imported policies", 1)[1]
    assert "graded_by_both" in table and "│ imp " in table.replace("┆", "│"), table


def test_a_killed_import_resumes_and_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    rows = [_plain(i % 6, [str(j) for j in range(i % 4 + 1)]) for i in range(6)]
    for root in ("a", "b"):
        _jsonl(tmp_path / f"{root}.jsonl", rows)
    whole = _project(tmp_path / "a", {"path": str(tmp_path / "a.jsonl"), "layout": "plain"})
    p = load_params(whole)
    pol = resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path / "a")
    import_dump(pol, read_table(tmp_path / "a/data/problems", name="problems"), out=tmp_path / "a/data/rollouts",
                rejects_dir=tmp_path / "a/data/rollouts/rejects", shard_rows=3)
    p = load_params(_project(tmp_path / "b", {"path": str(tmp_path / "b.jsonl"), "layout": "plain"}))
    pol = resolve_policy("imp", p.policies["imp"], models_dir=tmp_path, root=tmp_path / "b")
    problems = read_table(tmp_path / "b/data/problems", name="problems")
    import pipeline.rollout.importer as imp

    real, calls = imp.write_table, []

    def dies(table, path, *, name):
        calls.append(path)
        if len(calls) == 3:  # the second shard is written, its state is not
            real(table, path, name=name)
            raise KeyboardInterrupt
        return real(table, path, name=name)

    monkeypatch.setattr(imp, "write_table", dies)
    with pytest.raises(KeyboardInterrupt):
        import_dump(pol, problems, out=tmp_path / "b/data/rollouts", rejects_dir=tmp_path / "b/data/rollouts/rejects",
                    shard_rows=3)
    monkeypatch.setattr(imp, "write_table", real)
    stats = import_dump(pol, problems, out=tmp_path / "b/data/rollouts", rejects_dir=tmp_path / "b/data/rollouts/rejects",
                        shard_rows=3)
    assert stats.resumed_at > 0
    order = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    a = read_table(tmp_path / "a/data/rollouts", name="rollouts").drop(["policy_id", "seed"]).sort_by(order)
    b = read_table(tmp_path / "b/data/rollouts", name="rollouts").drop(["policy_id", "seed"]).sort_by(order)
    assert a.equals(b) and a.num_rows == sum(i % 4 + 1 for i in range(6))


def test_a_grown_dump_is_read_for_its_new_rows_only(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [_plain(i, ["1", "2"]) for i in range(3)])
    params = _project(tmp_path, {"path": "d.jsonl", "layout": "plain"})
    _stages(params, tmp_path, "rollout")
    first = {r["policy_id"] for r in read_table(tmp_path / "data/rollouts", name="rollouts").to_pylist()}
    with path.open("a") as f:
        f.write(json.dumps(_plain(3, ["7", "8", "9"])) + "\n")
    out = _stages(params, tmp_path, "rollout")[0]
    assert "1 rows read -> 3 samples" in out and "6 carried from the dump's earlier version" in out
    roll = read_table(tmp_path / "data/rollouts", name="rollouts").to_pylist()
    assert len(roll) == 9 and len({r["policy_id"] for r in roll}) == 1 and not first & {r["policy_id"] for r in roll}
    # a dump changed in the middle is a new snapshot read whole
    path.write_text(path.read_text().replace("answer is 1.", "answer is 5."))
    out = _stages(params, tmp_path, "rollout")[0]
    assert "4 rows read -> 9 samples" in out and "carried" not in out


def test_reformulating_with_an_imported_policy_says_why_not(tmp_path):
    _jsonl(tmp_path / "d.jsonl", [_plain(0, ["1"])])
    params = _project(tmp_path, {"path": "d.jsonl", "layout": "plain"})
    raw = yaml.safe_load(params.read_text())
    raw["reformulate"] = {"methods": ["llm_backward"], "options": {"llm_backward": {"writer": "imp"}}}
    params.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(cli, ["reformulate", "--params", str(params), "--no-progress"])
    assert res.exit_code != 0 and "is imported from a dump" in res.output, res.output
    res = CliRunner().invoke(cli, ["rollout", "--params", str(params), "--no-progress", "--set", "reformulated"])
    assert res.exit_code != 0 and "imported from dumps" in res.output


# --- the round trip ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_importing_the_published_rollouts_config_reproduces_the_difficulty_table(tmp_path):
    """Generate (fake engine), verify, annotate, publish; import the published ``rollouts`` config as a second
    policy; its difficulty rows (n, n_correct, pass rate, interval, band) and its flags equal the first's."""
    gen = {"model": "test/m", "revision": "r1", "engine": "fake", "sampling": {"temperature": 0.8, "max_tokens": 16}}
    root = tmp_path / "repo"
    rows = []
    for i in range(12):
        q = f"What is {i} + {i % 3 + 1}?"
        rows.append({"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
                     "answer": str(i + i % 3 + 1) if i % 2 == 0 else "0", "split": "train", "n_duplicates": 0})
    write_table(schema("problems").from_rows(rows), root / "data/problems/part-0.parquet", name="problems")
    raw = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]}, "policies": {"gen": gen},
           "rollout": {"policies": ["gen"], "k": 6, "shard_size": 4, "engine_options": {"fake": {}}},
           "verify": {"workers": 1}, "publish": {"max_rollouts_per_item": 64, "licenses": {"synthetic": "apache-2.0"}}}
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    _stages(root / "params.yaml", root, "rollout", "verify", "annotate", "publish")
    (config,) = (root / "data/published/data/rollouts").glob("*.parquet")
    raw["policies"]["again"] = {**DECLARED, "dump": {"path": str(config), "layout": "passband_rollouts",
                                                     "match": "problem_id", "options": {"policy": "gen"}}}
    raw["rollout"]["policies"] = ["gen", "again"]
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    _stages(root / "params.yaml", root, "rollout", "verify", "annotate")
    ids = {r["name"]: r["policy_id"] for r in read_table(root / "data/policies", name="policies").to_pylist()}
    diff = read_table(root / "data/difficulty", name="difficulty").to_pylist()
    cols = ("n", "n_correct", "pass_rate", "ci_low", "ci_high", "band")
    by = {(r["policy_id"], r["problem_id"]): tuple(r[c] for c in cols) for r in diff}
    published = {r["problem_id"] for r in pq.read_table(config).to_pylist()}
    assert published and {p for (pol, p) in by if pol == ids["again"]} == published
    for pid in published:
        assert by[(ids["again"], pid)] == by[(ids["gen"], pid)], pid
    flags = read_table(root / "data/flags", name="flags").to_pylist()
    fired = {pol: sorted((f["problem_id"], f["sample_idx"], f["flag"]) for f in flags
                         if f["policy_id"] == pol and f["problem_id"] in published) for pol in ids.values()}
    assert fired[ids["again"]] == fired[ids["gen"]]
    up = read_table(root / "data/rollouts/upstream", name="upstream")
    assert up.num_rows == sum(by[(ids["gen"], p)][0] for p in published)


def test_a_parquet_dump_streams_in_batches(tmp_path):
    table = pa.table({"problem": QUESTIONS, "answer": GOLDS, "uuid": [f"u{i}" for i in range(6)],
                      "generations": [[f"The answer is {g}."] * 3 for g in GOLDS],
                      "correctness_math_verify": [[True] * 3 for _ in GOLDS]})
    pq.write_table(table, tmp_path / "o.parquet", row_group_size=2)
    params = _project(tmp_path, {"path": "o.parquet", "layout": "openr1"})
    out = _stages(params, tmp_path, "rollout", "verify")[0]
    assert "6 rows read -> 18 samples of 6 problems" in out and "upstream correctness on 18 samples" in out


# --- real dumps -----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_two_real_checkpoints_evaluation_dumps(tmp_path):
    """The tutorial of docs/import.md on the real dumps in ../shared/data/real_outputs: every row matched, each
    item's pass rate is its verdicts counted, the dumps' own grader set beside passband's, and a drift table."""
    from shared_data import shared_path

    files = {"gspo-tac": shared_path("real_outputs/THIP__GSPOTAC__MATH500__generation.jsonl"),
             "grpo-notac": shared_path("real_outputs/THIP__GRPONOTAC__MATH500__generation.jsonl")}
    opts = {"completions": "response", "finish_reasons": "finish_reason", "n_tokens": "response_length",
            "correct": "correct"}
    policies = {name: {"model": f"Thrillcrazyer/{name}", "revision": "checkpoint-240", "prompt": "r1_distill",
                       "thinking": "off", "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 16384},
                       "dump": {"path": str(path), "layout": "plain", "options": opts}} for name, path in files.items()}
    mapping = {"question": "problem", "answer": "expected_answer", "solution": "solution", "id": "id"}
    raw = {"ingest": {"sources": [{"name": "math500", "kind": "jsonl", "path": str(files["gspo-tac"]), "split": "test",
                                   "mapping": mapping}]},
           "policies": policies, "rollout": {"policies": list(policies), "k": 1}, "verify": {"workers": 2}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    out = _stages(tmp_path / "params.yaml", tmp_path, "ingest", "rollout", "verify", "annotate", "summary")
    assert out[1].count("500 rows read -> 500 samples of 500 problems; rejects: none") == 2, out[1]
    diff = read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
    verdicts = read_table(tmp_path / "data/verdicts", name="verdicts").to_pylist()
    correct = {(v["problem_id"], v["policy_id"]) for v in verdicts if v["status"] == "correct"}
    assert len(diff) == 1000
    assert all(d["n"] == 1 and d["n_correct"] == ((d["problem_id"], d["policy_id"]) in correct) for d in diff)
    up = read_table(tmp_path / "data/rollouts/upstream", name="upstream").to_pylist()
    assert len(up) == 1000
    right = {(u["problem_id"], u["policy_id"]) for u in up if u["upstream_correct"]}
    agree = sum(((d["problem_id"], d["policy_id"]) in right) == (d["n_correct"] == 1) for d in diff)
    assert agree >= 996, agree  # 998 of 1,000 on 2 Dec 2026 (docs/import.md, the 2 read); the dumps' grader is lenient
    assert "Imported policies" in out[4] and "graded_by_both" in out[4]
    res = CliRunner().invoke(cli, ["drift", "--params", str(tmp_path / "params.yaml"), "--from", "grpo-notac",
                                   "--to", "gspo-tac"])
    assert res.exit_code == 0 and "500 problems" in res.output, res.output


def test_token_counts_come_from_the_declared_tokenizer_when_the_dump_has_none(tmp_path, embedded_model_dir):
    """``dump.tokenizer`` (a local folder) counts the completions the dump gives no count for; a count the dump gives
    is kept as it is."""
    from transformers import AutoTokenizer

    rows = [{"problem": QUESTIONS[0], "completions": ["The answer is 1.", {"text": "It is 2.", "n_tokens": 99}]}]
    _jsonl(tmp_path / "d.jsonl", rows)
    params = _project(tmp_path, {"path": "d.jsonl", "layout": "plain", "tokenizer": str(embedded_model_dir)})
    _stages(params, tmp_path, "rollout")
    got = {r["completion"]: r["n_tokens"] for r in read_table(tmp_path / "data/rollouts", name="rollouts").to_pylist()}
    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir))
    assert got == {"The answer is 1.": len(tok("The answer is 1.", add_special_tokens=False)["input_ids"]),
                   "It is 2.": 99}
