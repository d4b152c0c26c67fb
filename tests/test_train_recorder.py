"""Trainer rollouts as measurements: the recorder's tables, its windows and shards, one grading per reward call, and
annotate + drift reading what it wrote. The TRL calls are simulated here (the keyword arguments GRPOTrainer passes);
the real GRPO run with the recorder and the sampler is the last test (marked engine: it trains a real model)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from pipeline.annotate.core import annotate_tables
from pipeline.annotate.drift import drift
from pipeline.config import AnnotateConfig, PolicyConfig, SamplingConfig
from pipeline.io import read_table
from pipeline.keys import problem_id
from pipeline.ownership import NotOwnedError
from pipeline.rollout.policy import make_policy
from pipeline.schema import schema
from pipeline.train.recorder import RecorderError, RolloutRecorder, window_policy
from pipeline.train.sampler import LearnabilitySampler

QUESTIONS = {"What is 2 + 3?": "5", "What is 52 - 27?": "25", "What is 38 + 47?": "85"}
PIDS = {q: problem_id(q) for q in QUESTIONS}
SAMPLING = {"temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 6, "stop": ["\n"]}
K = 4


def base_row() -> dict:
    cfg = PolicyConfig(sampling=SamplingConfig(temperature=0.8, max_tokens=48, stop=["\nQ:", "\n\n"]))
    return make_policy("smollm2-3shot", cfg, model_id="HuggingFaceTB/SmolLM2-135M-Instruct", revision="sha256:abc",
                       path="unused").row()


def problems_table() -> pa.Table:
    return schema("problems").from_rows([
        {"problem_id": PIDS[q], "source": "test", "source_id": str(i), "split": "train", "question": q, "answer": a,
         "n_duplicates": 0} for i, (q, a) in enumerate(QUESTIONS.items())])


def state(step: int) -> SimpleNamespace:
    return SimpleNamespace(global_step=step)


def args() -> SimpleNamespace:
    return SimpleNamespace(process_index=0, world_size=1, temperature=0.8, top_p=1.0, top_k=0,
                           max_completion_length=6)


def step_call(reward, step: int, questions: list[str], correct: dict[str, int]) -> list[float]:
    """One GRPO reward call as TRL makes it: each prompt K times in a row, the dataset columns repeated."""
    prompts, completions, ids, answers, pids = [], [], [], [], []
    for q in questions:
        for j in range(K):
            right = j < correct[q]
            completions.append(f" The answer is {QUESTIONS[q] if right else '0'}.\n")
            ids.append([11, 12, 13, 198] if j % 2 else [11, 12, 13, 14, 15, 16])  # 198 ends; six tokens hit the cap
            answers.append(QUESTIONS[q])
            pids.append(PIDS[q])
            prompts.append(f"Q: {q}\nA:")
    return reward(prompts=prompts, completions=completions, completion_ids=ids, answer=answers, problem_id=pids,
                  trainer_state=state(step), log_extra=None, log_metric=None)


def run_steps(rec: RolloutRecorder, plan: list[tuple[list[str], dict[str, int]]], *, end: bool = True) -> list:
    """Steps as the Trainer runs them: the reward call, then on_step_end; on_train_end at the end."""
    cb, reward, out = rec.callback(), rec.reward(), []
    cb.on_train_begin(args(), state(0), None)
    for step, (questions, correct) in enumerate(plan):
        out.append(step_call(reward, step, questions, correct))
        cb.on_step_end(args(), state(step + 1), None)
    if end:
        cb.on_train_end(args(), state(len(plan)), None)
    return out


A, B, C = QUESTIONS
PLAN = [([A, B], {A: 4, B: 0}), ([B, C], {B: 1, C: 2}),  # window [0, 2): the base policy's pass rates
        ([A, B], {A: 4, B: 3}), ([B, C], {B: 4, C: 2}),  # window [2, 4): B has risen
        ([C, A], {C: 1, A: 4})]                          # window [4, 5): the run ended mid-window


def test_recorded_windows_are_passband_tables(tmp_path, monkeypatch):
    import importlib

    judge_mod = importlib.import_module("pipeline.train.recorder")  # the judge_many it calls (pipeline.verify.judge's)
    calls = []
    real = judge_mod.judge_many
    monkeypatch.setattr(judge_mod, "judge_many", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    rec = RolloutRecorder(tmp_path, base_policy=base_row(), run="test-run", window_steps=2, eos_ids=[198])
    rewards = run_steps(rec, PLAN)
    assert len(calls) == len(PLAN)  # one verifier call per reward call: the reward and the verdicts come from it
    assert rewards[0] == [1.0] * 4 + [0.0] * 4 and rewards[1] == [1.0] + [0.0] * 3 + [1.0] * 2 + [0.0] * 2

    pols = read_table(tmp_path / "policies", name="policies").to_pylist()
    rolls = read_table(tmp_path / "rollouts", name="rollouts")
    verds = read_table(tmp_path / "verdicts", name="verdicts")
    assert [p["name"] for p in pols] == ["smollm2-3shot@test-run[0,2)", "smollm2-3shot@test-run[2,4)",
                                         "smollm2-3shot@test-run[4,5)"]
    assert len({p["policy_id"] for p in pols}) == 3 and {p["engine"] for p in pols} == {"trl"}
    assert pols[0]["prompt_template"] == "fewshot_arith" and pols[0]["max_tokens"] == 6 and pols[0]["top_k"] == -1
    assert rolls.num_rows == verds.num_rows == len(PLAN) * 2 * K
    keys = list(zip(*(rolls.column(c).to_pylist() for c in ("problem_id", "policy_id", "sample_idx")), strict=True))
    assert len(set(keys)) == len(keys)
    # B is drawn at both steps of window [0, 2): its samples are 0..2K-1 of that window's policy
    w0 = pols[0]["policy_id"]
    b0 = sorted(i for p, pol, i in keys if p == PIDS[B] and pol == w0)
    assert b0 == list(range(2 * K))
    statuses = verds.column("status").to_pylist()
    assert statuses.count("correct") == sum(sum(r) for r in rewards)
    assert set(verds.column("verifier_id").to_pylist()) == {rec.verifier_id}
    assert sorted(set(rolls.column("finish_reason").to_pylist())) == ["length", "stop"]
    assert rolls.column("n_tokens").to_pylist()[:2] == [6, 4]
    # one shard per table per window, all of them whole
    for t in ("rollouts", "verdicts", "policies"):
        assert sorted(p.name for p in (tmp_path / t).glob("*.parquet")) == [
            "test-run-0000000-0000002-r0.parquet", "test-run-0000002-0000004-r0.parquet",
            "test-run-0000004-0000005-r0.parquet"]
    assert rec.stats.windows == [(0, 2), (2, 4), (4, 5)] and rec.stats.groups == len(PLAN) * 2


def test_annotate_and_drift_read_the_recorded_rows(tmp_path):
    rec = RolloutRecorder(tmp_path, base_policy=base_row(), run="r", window_steps=2, sampling=SAMPLING)
    run_steps(rec, PLAN)
    pols = {p["name"].split("@")[1]: p["policy_id"] for p in read_table(tmp_path / "policies", name="policies").to_pylist()}
    difficulty, _flags = annotate_tables(read_table(tmp_path / "verdicts", name="verdicts"),
                                         read_table(tmp_path / "rollouts", name="rollouts"), problems_table(),
                                         config=AnnotateConfig(), verifier_id=rec.verifier_id)
    rows = {(r["problem_id"], r["policy_id"]): r for r in difficulty.to_pylist()}
    # difficulty per step window: B in [0, 2) was 1 of 8, in [2, 4) 7 of 8
    assert (rows[(PIDS[B], pols["r[0,2)"])]["n"], rows[(PIDS[B], pols["r[0,2)"])]["n_correct"]) == (8, 1)
    assert (rows[(PIDS[B], pols["r[2,4)"])]["n"], rows[(PIDS[B], pols["r[2,4)"])]["n_correct"]) == (8, 7)
    assert rows[(PIDS[A], pols["r[4,5)"])]["band"] == "too_easy"
    assert len(rows) == 3 + 3 + 2  # (A, B, C) in [0, 2), (A, B, C) in [2, 4), (A, C) in [4, 5)
    moved = drift(difficulty, policy_from=pols["r[0,2)"], policy_to=pols["r[2,4)"]).to_pylist()
    by = {r["problem_id"]: r for r in moved}
    assert set(by) == {PIDS[A], PIDS[B], PIDS[C]}
    assert by[PIDS[B]]["change"] == "rose" and by[PIDS[B]]["band_from"] != by[PIDS[B]]["band_to"]
    assert by[PIDS[A]]["change"] == "none"


def test_passband_annotate_and_drift_commands_read_them(tmp_path):
    """The recorder writing into a project's table folders: `passband annotate` then `passband drift` by window name."""
    import yaml
    from click.testing import CliRunner

    from pipeline.cli import cli
    from pipeline.io import write_table

    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]},
                                                          "policies": {"p": {"model": "embedded"}},
                                                          "rollout": {"policies": ["p"]}}))
    write_table(problems_table(), tmp_path / "data/problems/part-0.parquet", name="problems")
    rec = RolloutRecorder(tmp_path / "data", base_policy=base_row(), run="r", window_steps=2, sampling=SAMPLING)
    run_steps(rec, PLAN)
    params = ["--params", str(tmp_path / "params.yaml")]
    res = CliRunner().invoke(cli, ["annotate", *params, "--no-progress", "--no-plots"])
    assert res.exit_code == 0, res.output
    assert read_table(tmp_path / "data/difficulty", name="difficulty").num_rows == 8
    res = CliRunner().invoke(cli, ["drift", *params, "--from", "smollm2-3shot@r[0,2)", "--to", "smollm2-3shot@r[2,4)"])
    assert res.exit_code == 0, res.output
    assert "3 problems, 1 changed band, 1 credibly rose" in res.output, res.output
    assert f"{PIDS[B]}  too_hard 1/8 -> too_easy 7/8" in res.output, res.output


def test_a_killed_run_loses_only_the_open_window(tmp_path):
    rec = RolloutRecorder(tmp_path, base_policy=base_row(), run="k", window_steps=2, sampling=SAMPLING)
    run_steps(rec, PLAN[:3], end=False)  # killed during window [2, 4): its one step is only in memory
    assert [p["name"] for p in read_table(tmp_path / "policies", name="policies").to_pylist()] == ["smollm2-3shot@k[0,2)"]
    assert read_table(tmp_path / "rollouts", name="rollouts").num_rows == 2 * 2 * K
    assert not list(tmp_path.rglob(".*.tmp"))


def test_listeners_update_the_sampler(tmp_path):
    core = LearnabilitySampler([PIDS[q] for q in QUESTIONS], decay=1.0)
    rec = RolloutRecorder(tmp_path, base_policy=base_row(), run="s", sampling=SAMPLING, listeners=[core.update])
    run_steps(rec, PLAN[:2])
    assert core.s.tolist() == [4.0, 1.0, 2.0] and core.f.tolist() == [0.0, 7.0, 2.0]
    assert core.stats["updates"] == 2


def test_recorder_errors_name_the_fix(tmp_path):
    with pytest.raises(RecorderError, match="run name"):
        RolloutRecorder(tmp_path, base_policy=base_row(), run="../x")
    with pytest.raises(RecorderError, match="not a policies row"):
        RolloutRecorder(tmp_path, base_policy={"name": "x"}, run="x")
    rec = RolloutRecorder(tmp_path, base_policy=base_row(), run="x", sampling=SAMPLING)
    with pytest.raises(RecorderError, match=r"lacks column\(s\) \['problem_id'\]"):
        rec.reward()(completions=["5"], answer=["5"], trainer_state=state(0))
    no_sampling = RolloutRecorder(tmp_path / "o", base_policy=base_row(), run="x")
    no_sampling.reward()(completions=["5"], answer=["5"], problem_id=["p"], trainer_state=state(0))
    with pytest.raises(RecorderError, match="sampling"):
        no_sampling.flush()
    (tmp_path / "f" / "rollouts").mkdir(parents=True)
    (tmp_path / "f" / "rollouts" / "notes.txt").write_text("mine")
    with pytest.raises(NotOwnedError):
        RolloutRecorder(tmp_path / "f", base_policy=base_row(), run="x")


def test_window_policy_ids_depend_on_run_window_and_base():
    base = base_row()
    a = window_policy(base, run="r", start=0, end=8, sampling=SAMPLING)
    assert a == window_policy(base, run="r", start=0, end=8, sampling=SAMPLING)
    others = [window_policy(base, run="r2", start=0, end=8, sampling=SAMPLING),
              window_policy(base, run="r", start=8, end=16, sampling=SAMPLING),
              window_policy({**base, "policy_id": "pol_other"}, run="r", start=0, end=8, sampling=SAMPLING)]
    assert len({a["policy_id"], *(o["policy_id"] for o in others)}) == 4
    assert schema("policies").from_rows([a]).num_rows == 1
    with pytest.raises(RecorderError, match="start < end"):
        window_policy(base, run="r", start=4, end=4, sampling=SAMPLING)


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.timing  # the recorder's share of the run: a ratio of two wall-clock figures of one run
def test_real_grpo_run_records_and_samples(embedded_model_dir, tmp_path):
    """3 GRPO steps on the embedded model with the recorder and the sampler together; the checkpoint it writes is
    what vLLM measures (the one real GRPO run of the unit suites: test_train_grpo.py's smoke run was folded in)."""
    import json

    from pipeline.rollout.prompts import load_template, render
    from pipeline.train.grpo import GrpoConfig, newline_token_ids, train_arm, weights_digest

    rows = [{"question": q, "answer": a, "problem_id": PIDS[q]} for q, a in QUESTIONS.items()]
    rows.append({"question": "What is 9 + 1?", "answer": "10", "problem_id": problem_id("What is 9 + 1?")})
    ids = [r["problem_id"] for r in rows]
    core = LearnabilitySampler(ids, successes=[8, 3, 4, 8], failures=[0, 5, 4, 0], seed=0)
    before = core.state()
    from transformers import AutoTokenizer

    eos = newline_token_ids(AutoTokenizer.from_pretrained(embedded_model_dir))
    rec = RolloutRecorder(tmp_path / "tables", base_policy=base_row(), run="smoke", window_steps=2, eos_ids=eos,
                          listeners=[core.update])
    cfg = GrpoConfig(steps=3, seed=0, num_generations=4, prompts_per_step=2, max_completion_tokens=16)
    res = train_arm(rows, model_dir=embedded_model_dir, out_dir=tmp_path / "ckpt", config=cfg,
                    render=lambda q: render(load_template("fewshot_arith"), q).text, reward=rec.reward(),
                    callbacks=[rec.callback()], sampler=core, progress=False)
    assert [r["step"] for r in res.log] == [1, 2, 3]
    pols = read_table(tmp_path / "tables" / "policies", name="policies").to_pylist()
    assert [p["name"].split("@")[1] for p in pols] == ["smoke[0,2)", "smoke[2,3)"]
    assert pols[0]["max_tokens"] == 16 and pols[0]["temperature"] == 0.8
    rolls = read_table(tmp_path / "tables" / "rollouts", name="rollouts")
    assert rolls.num_rows == 3 * 2 * 4 and set(rolls.column("problem_id").to_pylist()) <= set(ids)
    # the sampler drew only the items its prior gave a signal (the 8/8 ones are predicted all-equal: skipped)
    assert set(rolls.column("problem_id").to_pylist()) == {PIDS[B], PIDS[C]}
    after = core.state()
    assert core.stats["updates"] == 3 and (after["successes"], after["failures"]) != (before["successes"],
                                                                                      before["failures"])
    difficulty, _ = annotate_tables(read_table(tmp_path / "tables" / "verdicts", name="verdicts"), rolls,
                                    problems_table(), config=AnnotateConfig(), verifier_id=rec.verifier_id)
    assert set(difficulty.column("policy_id").to_pylist()) == {p["policy_id"] for p in pols}
    assert rec.stats.recording_seconds < 0.05 * res.seconds
    assert all(0.0 <= r["reward"] <= 1.0 and 0.0 <= r["frac_reward_zero_std"] <= 1.0 for r in res.log)
    out = tmp_path / "ckpt"
    assert res.revision == weights_digest(out)
    # beta = 0: the weights move exactly when some group's rewards differed (a non-zero advantage)
    learned = any(r["frac_reward_zero_std"] < 1.0 for r in res.log)
    assert (res.revision != weights_digest(embedded_model_dir)) == learned
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    assert json.loads((out / "train_log.json").read_text())["log"] == res.log
    assert not out.with_name("ckpt.tmp").exists() and not out.with_name(".ckpt.passband-tmp").exists()
    # the training-time newline stop does not leak into the checkpoint that vLLM will measure
    gen = json.loads((out / "generation_config.json").read_text())
    base = json.loads((embedded_model_dir / "generation_config.json").read_text())
    assert gen.get("eos_token_id") == base.get("eos_token_id")
