"""Thinking-aware verdicts: the answer is read only after the thinking's closing tag, a
thinking block that never closes is no_answer (unfinished_thinking), per policy and per judge call.

The held-out cases (tests/data/thinking_cases.jsonl, written by tests/support/make_thinking_cases.py from real GSM8K
and MATH solutions) must agree with their constructed grades at >= 99.5 %, with no answer ever taken from
inside an unfinished thinking block.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from shared_data import shared_path

from pipeline.cli import cli
from pipeline.config import AnnotateConfig, ConfigError, PolicyConfig, VerifyConfig
from pipeline.io import read_table, write_table
from pipeline.rewards import accuracy_reward, trl_reward
from pipeline.rollout.policy import make_policy
from pipeline.schema import schema
from pipeline.thinking import Section, answer_section, mode_for_prompt, thinking_of
from pipeline.verify import judge, judge_many, verifier_id, verify
from pipeline.verify.core import VERDICT_MODULES

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "data" / "thinking_cases.jsonl"
TEMPLATES = REPO / "tests" / "data" / "chat_templates"
QWEN3, R1 = TEMPLATES / "qwen3", TEMPLATES / "deepseek-r1-distill-qwen"
ISSUE = "<think>6*7 = 42. The answer is 42. Hmm, but it might be 41"
UNFINISHED = "<think>6*7 = 42. The answer is 42."  # the thinking never closes, and nothing doubts the 42


def load_cases() -> list[dict]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]


# ---- the issue's examples ------------------------------------------------------------------------------------

def test_the_issue_example_is_no_answer_unfinished_thinking():
    for kwargs in ({}, {"thinking": "auto"}, {"thinking": "tags"}):
        [j] = judge_many([("42", ISSUE)], **kwargs)
        assert (j.status, j.detail, j.extracted) == ("no_answer", "unfinished_thinking", None), kwargs
        assert (j.thinking_closed, j.thinking_chars) == (False, len(ISSUE) - len("<think>"))
    # thinking off reads the whole text: the explicit way back, where the model states its answer undoubted
    assert judge("42", UNFINISHED, thinking="off").status == "correct"
    # ... but the issue's 42 is doubted ("Hmm, but it might be 41") and never reaffirmed: a guess, not an answer
    j = judge("42", ISSUE, thinking="off")
    assert (j.status, j.extracted) == ("no_answer", None) and "doubted_answer" in j.detail


def test_a_boxed_answer_inside_the_thinking_with_none_after_is_no_answer():
    j = judge("42", "<think>6*7 = \\boxed{42}.</think>\n\nI hope this helps.")
    assert (j.status, j.thinking_closed) == ("no_answer", True)
    assert j.detail != "unfinished_thinking"
    # the final section decides: wrong inside, right after
    assert judge("42", "<think>The answer is \\boxed{41}.</think> The answer is \\boxed{42}.").status == "correct"
    assert judge("42", "<think>The answer is \\boxed{42}.</think> The answer is \\boxed{41}.").status == "incorrect"


@pytest.mark.parametrize("text, mode, expected", [
    ("no tags. The answer is 5.", "auto", Section("no tags. The answer is 5.", None, None)),
    ("no tags. The answer is 5.", "off", Section("no tags. The answer is 5.", None, None)),
    ("no tags, prompt opened it. The answer is 5.", "tags", Section(None, 43, False)),
    ("reasoning</think> The answer is 5.", "auto", Section(" The answer is 5.", 9, True)),  # R1: lone closing tag
    ("<think>a</think> The answer is 5.", "tags", Section(" The answer is 5.", 1, True)),
    ("<think>a</think> 5 <think>or 6", "tags", Section(" 5 ", 1, True)),  # re-opened: cut before it
    ("<|begin_of_thought|>x<|end_of_thought|> 5", "auto", Section(" 5", 1, True)),
    ("<|begin_of_thought|>x is 5", "auto", Section(None, 6, False)),
    ("<think>a</think> The answer is 5.", "off", Section("<think>a</think> The answer is 5.", None, None)),
])
def test_answer_section(text, mode, expected):
    assert answer_section(text, mode) == expected


def test_a_bad_mode_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"thinking must be one of auto, tags, off, got 'on'"):
        judge("1", "1", thinking="on")
    with pytest.raises(ConfigError, match="judge options"):
        judge("1", "1", options={"thinking": "on"})
    with pytest.raises(ValueError, match="unknown thinking mode 'on'"):
        answer_section("x", "on")


def test_thinking_in_options_and_rewards():
    cfg = {"thinking": "off"}
    assert judge("42", UNFINISHED, options=cfg).status == "correct"
    assert accuracy_reward([UNFINISHED, "<think>hm</think> \\boxed{42}"], answer=["42", "42"]) == [0.0, 1.0]
    assert trl_reward(options=cfg)([UNFINISHED], answer=["42"]) == [1.0]


# ---- per policy: derived from the prompt, part of policy_id -------------------------------------------------

def test_mode_for_prompt():
    assert mode_for_prompt("<｜User｜>Q<｜Assistant｜><think>\n") == "tags"
    assert mode_for_prompt("<|im_start|>assistant\n<think>\n\n</think>\n\n") == "auto"  # qwen3 non-thinking
    assert mode_for_prompt("Q: 1+1?\nA:") == "auto"
    assert mode_for_prompt(None, enable_thinking=True) == "tags"
    assert mode_for_prompt("<|begin_of_thought|>") == "tags"


def _policy(prompt: str, tokenizer: Path | None = None, **overrides):
    cfg = PolicyConfig.model_validate({"model": "org/model", "revision": "abc123", "engine": "fake", "prompt": prompt,
                                       "tokenizer": str(tokenizer) if tokenizer else None, **overrides})
    return make_policy("p", cfg, model_id=cfg.model, revision=cfg.revision, path=cfg.model)


def test_policies_derive_their_mode_and_it_is_part_of_policy_id():
    r1, qwen3 = _policy("r1_distill", R1), _policy("qwen3_thinking", QWEN3)
    assert r1.thinking == qwen3.thinking == "tags"
    assert thinking_of(r1.row()["identity"]) == "tags"
    assert _policy("qwen3_nothinking", QWEN3).thinking is None
    plain = _policy("zeroshot_boxed")
    assert plain.thinking is None and "thinking" not in plain.identity  # ids of other policies unchanged
    off = _policy("r1_distill", R1, thinking="off")
    assert off.thinking == "off" and off.policy_id != r1.policy_id
    assert _policy("zeroshot_boxed", thinking="tags").policy_id != plain.policy_id
    with pytest.raises(ValueError):
        PolicyConfig.model_validate({"thinking": "on"})


def test_verifier_id_covers_the_thinking_rule_and_default():
    assert "pipeline.thinking" in VERDICT_MODULES
    assert verifier_id(VerifyConfig(thinking="off")) != verifier_id(VerifyConfig())


# ---- the stage ------------------------------------------------------------------------------------------------

def _tables(completions: dict[str, str]):
    problems = schema("problems").from_rows([{"problem_id": "p0", "source": "t", "source_id": "0",
                                              "question": "What is 6*7?", "answer": "42", "n_duplicates": 0}])
    rollouts = schema("rollouts").from_rows([{"problem_id": "p0", "policy_id": pid, "sample_idx": 0, "seed": 0,
                                              "completion": c, "n_tokens": 10, "finish_reason": "length"}
                                             for pid, c in completions.items()])
    return problems, rollouts


def test_verify_reads_each_policy_by_its_mode():
    text = "reasoning... the answer is \\boxed{42}, let me check"  # R1 prompt opened <think>: truncated
    problems, rollouts = _tables({"pol_r1": text, "pol_plain": text})
    v = verify(rollouts, problems, config=VerifyConfig(workers=1), modes={"pol_r1": "tags"}).verdicts.to_pylist()
    by = {r["policy_id"]: r for r in v}
    assert (by["pol_r1"]["status"], by["pol_r1"]["detail"]) == ("no_answer", "unfinished_thinking")
    assert (by["pol_r1"]["thinking_closed"], by["pol_r1"]["thinking_chars"]) == (False, len(text))
    assert by["pol_plain"]["status"] == "correct" and by["pol_plain"]["thinking_closed"] is None


PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}, "verify": {"workers": 1, "timeout_s": 2.0}}


def test_verify_stage_takes_modes_from_the_policies_table_and_upgrades_old_shards(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    text = "6*7 = 42. The final answer is 42."  # cut at the token limit (the helper's rows): marked final, it answers
    problems, rollouts = _tables({"pol_r1": text, "pol_plain": text})
    write_table(problems, tmp_path / "data/problems/part-0.parquet", name="problems")
    write_table(rollouts, tmp_path / "data/rollouts/part-0.parquet", name="rollouts")
    row = _policy("r1_distill", R1).row() | {"policy_id": "pol_r1"}
    write_table(schema("policies").from_rows([row]), tmp_path / "data/policies/pol_r1.parquet", name="policies")
    # a verdict shard written before the thinking columns existed
    old = schema("verdicts").from_rows([{"problem_id": "p0", "policy_id": "pol_old", "sample_idx": 0,
                                         "verifier_id": "math-verify-0/old", "status": "correct"}])
    old = old.drop_columns(["thinking_chars", "thinking_closed"])
    (tmp_path / "data/verdicts").mkdir(parents=True)
    pq.write_table(old.replace_schema_metadata({b"passband.table": b"verdicts"}), tmp_path / "data/verdicts/old.parquet")
    res = CliRunner().invoke(cli, ["verify", "--params", str(tmp_path / "params.yaml"), "--no-progress"])
    assert res.exit_code == 0, res.output
    v = {r["policy_id"]: r for r in read_table(tmp_path / "data/verdicts", name="verdicts").to_pylist()}
    assert (v["pol_r1"]["status"], v["pol_r1"]["detail"]) == ("no_answer", "unfinished_thinking")
    assert v["pol_plain"]["status"] == "correct"  # not in the policies table: verify.thinking (auto), no tag
    assert v["pol_old"]["thinking_closed"] is None and v["pol_old"]["status"] == "correct"


def test_difficulty_keeps_thinking_length_and_unfinished_rate():
    from pipeline.annotate.core import annotate_tables

    texts = {0: "<think>abcd</think> The answer is 42.", 1: "<think>abcdefgh", 2: "The answer is 42."}
    problems, _ = _tables({})
    rollouts = schema("rollouts").from_rows([{"problem_id": "p0", "policy_id": "pol", "sample_idx": i, "seed": i,
                                              "completion": t, "n_tokens": 10, "finish_reason": "stop"}
                                             for i, t in texts.items()])
    verdicts = verify(rollouts, problems, config=VerifyConfig(workers=1)).verdicts
    difficulty, _flags = annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(),
                                         verifier_id=verdicts.column("verifier_id")[0].as_py())
    [d] = difficulty.to_pylist()
    assert d["n_correct"] == 2 and d["n_no_answer"] == 1
    assert d["mean_thinking_chars"] == pytest.approx((4 + 8) / 2)
    assert d["unfinished_thinking_rate"] == pytest.approx(0.5)


# ---- the held-out cases ------------------------------------------------------------------------------------------

def test_the_cases_are_many_and_varied():
    cases = load_cases()
    assert len(cases) >= 300
    kinds = {c["kind"] for c in cases}
    assert {"r1_closed", "r1_unclosed", "unclosed_truncated", "inside_only", "flipflop_wrong", "thought_closed",
            "no_thinking"} <= kinds
    assert sum(c["unfinished"] and c["mode"] != "off" for c in cases) >= 60
    assert {c["expected"] for c in cases} == {"correct", "incorrect", "no_answer"}


def test_held_out_cases_agree_and_never_grade_inside_an_unfinished_thinking():
    cases = load_cases()
    got = []
    for mode in ("auto", "tags", "off"):
        mine = [c for c in cases if c["mode"] == mode]
        got += zip(mine, judge_many([(c["gold"], c["completion"]) for c in mine], thinking=mode), strict=True)
    agree = sum(j.status == c["expected"] for c, j in got)
    wrong = [(c["id"], c["expected"], j.status, j.extracted) for c, j in got if j.status != c["expected"]]
    assert agree / len(got) >= 0.995, wrong
    inside = [c["id"] for c, j in got if c["unfinished"] and c["mode"] != "off"
              and (j.extracted is not None or j.detail != "unfinished_thinking")]
    assert inside == []


def test_without_the_mode_the_r1_cases_would_be_graded_from_inside():
    """The check above can fail: read as auto, an R1 completion cut off with no tag at all is graded on its
    thinking (why r1_distill policies derive ``tags``)."""
    r1 = [c for c in load_cases() if c["kind"] == "r1_unclosed"]
    graded = judge_many([(c["gold"], c["completion"]) for c in r1], thinking="auto")
    assert sum(j.status == "correct" for j in graded) >= len(r1) // 2


def test_the_cases_file_is_what_the_script_writes(tmp_path):
    shared_path("gsm8k/test.jsonl")
    shared_path("math/train.jsonl")
    code = ("import json; from tests.support import make_thinking_cases as m; "
            "print(''.join(json.dumps(r, ensure_ascii=False) + '\\n' for r in m.cases()), end='')")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out == CASES.read_text(encoding="utf-8")


def test_a_verdicts_shard_without_the_columns_is_refused_until_verify_upgrades_it(tmp_path):
    """Readers are strict (schemas at every boundary): the verify stage's upgrade above is what keeps old
    shards readable."""
    t = schema("verdicts").empty().drop_columns(["thinking_chars", "thinking_closed"])
    pq.write_table(t.replace_schema_metadata({b"passband.table": b"verdicts"}), tmp_path / "part-0.parquet")
    with pytest.raises(Exception, match="missing columns"):
        read_table(tmp_path, name="verdicts")
    assert pa.types.is_boolean(schema("verdicts").arrow.field("thinking_closed").type)


def test_an_imported_r1_distill_dump_derives_tags_without_rendering(tmp_path):
    """An imported policy renders no prompt, but its completions still began inside ``<think>``: one cut before
    ``</think>`` has no tag at all, and read as ``auto`` its thinking would be graded (a QwQ-32B completion cut in
    its thinking was paid this way: thinking-llms-interp, docs/verifier.md)."""
    dump = tmp_path / "d.jsonl"
    dump.write_text('{"question": "q", "answer": "4", "completions": ["2 + 2 = 4. So the answer is 4. Wait"]}\n')
    cfg = PolicyConfig.model_validate({"model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "revision": "x",
                                       "prompt": "r1_distill", "dump": {"path": str(dump), "layout": "plain"}})
    pol = make_policy("p", cfg, model_id=cfg.model, revision=cfg.revision, path=cfg.model, dump_path=dump)
    assert pol.renderer is None and pol.thinking == "tags" and thinking_of(pol.row()["identity"]) == "tags"
    plain = PolicyConfig.model_validate({"model": "m", "revision": "x", "prompt": "qwen25_math_cot",
                                         "dump": {"path": str(dump), "layout": "plain"}})
    assert make_policy("q", plain, model_id="m", revision="x", path="m", dump_path=dump).thinking is None
    [cut] = judge_many([("4", "2 + 2 = 4. So the answer is 4. Wait")], thinking=pol.thinking)
    assert cut.status == "no_answer" and cut.detail == "unfinished_thinking", cut
