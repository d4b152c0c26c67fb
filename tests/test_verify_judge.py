"""``judge`` / ``judge_many``: the one public call for a verdict, with the stage's extraction, policies and bounds."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.config import ConfigError, VerifyConfig
from pipeline.schema import schema
from pipeline.verify import Judgement, judge, judge_many, verify


def test_judge_one_completion():
    j = judge("8", "3 + 5 = 8. The answer is 8.")
    assert j == Judgement("correct", "8", "answer_is", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.status = "incorrect"  # type: ignore[misc]
    assert judge("8", "3 + 5 = 9. The answer is 9.") == Judgement("incorrect", "9", "answer_is", None)
    nothing = judge("8", "3 + 5 =")
    assert (nothing.status, nothing.extracted, nothing.extractor) == ("no_answer", None, None)
    assert nothing.detail == "no extractor found an answer"


def test_extractors_argument_and_options():
    text = "The answer is 7. #### 8"
    assert judge("8", text).extractor == "gsm8k"  # the default order: boxed, gsm8k, answer_is, ...
    assert judge("8", text, ["answer_is"]) == Judgement("incorrect", "7", "answer_is", None)
    assert judge("8", "I think 8", ["last_number"]).status == "correct"
    capped = judge("8", "The answer is 8888.", options={"max_answer_chars": 2})
    assert (capped.status, capped.extracted) == ("no_answer", "88")
    with pytest.raises(ConfigError, match="unknown extractor 'boxd'"):
        judge("8", "8", ["boxd"])
    with pytest.raises(ConfigError, match="timeout_sec"):
        judge("8", "8", options={"timeout_sec": 1})
    with pytest.raises(ConfigError, match="list of names"):
        judge("8", "8", "boxed")  # type: ignore[arg-type]


def test_judge_many_matches_the_stage():
    pairs = [("8", "The answer is 8."), ("\\frac{1}{2}", "so $\\boxed{0.5}$"), ("8", "#### 9"),
             ("12", "She has 12 apples. The answer is 12 apples."), ("8", "no idea"), ("8", "The answer is 8.")]
    cfg = VerifyConfig(workers=2, timeout_s=2.0)
    got = judge_many(pairs, options=cfg)
    assert [j.status for j in got] == ["correct", "correct", "incorrect", "correct", "no_answer", "correct"]
    probs = schema("problems").from_rows([
        {"problem_id": f"p{i}", "source": "t", "source_id": str(i), "question": f"q{i}", "answer": g,
         "n_duplicates": 0} for i, (g, _) in enumerate(pairs)])
    rows = schema("rollouts").from_rows([
        {"problem_id": f"p{i}", "policy_id": "pol", "sample_idx": 0, "seed": 0, "completion": c, "n_tokens": 1,
         "finish_reason": "stop"} for i, (_, c) in enumerate(pairs)])
    stage = verify(rows, probs, config=cfg).verdicts.to_pylist()
    assert [Judgement(v["status"], v["extracted"], v["extractor"], v["detail"]) for v in stage] == got
    assert judge_many([]) == []


@pytest.mark.timing
def test_judge_is_bounded_in_time():
    # a power tower math-verify would evaluate for minutes: the pool's CPU-time kill, not a signal, ends it
    j = judge("1", "The answer is $7^{7^{7^{7}}}$.", options={"timeout_s": 0.5})
    assert j.status == "timeout" and j.extracted == "$7^{7^{7^{7}}}$" and "0.5 s" in j.detail


@pytest.mark.timing
def test_a_slow_gold_is_a_timeout_under_the_pools_deadline():
    # math-verify takes seconds to parse deep parentheses; it used to run under its SIGALRM in the worker's
    # main thread, parse as () when the alarm fired, and become "error: gold does not parse"
    gold = "(" * 150 + "1" + ")" * 150
    j = judge(gold, "The answer is 1.", options={"timeout_s": 1.0})
    assert j.status == "timeout", j
    assert j.detail == "no result within 1 s of CPU time (parsing the gold); worker killed"
