"""pipeline.rewards: the reward in every trainer's form equals the verify stage's verdict on the golden table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pipeline import rewards
from pipeline.config import ConfigError, VerifyConfig
from pipeline.publish import exports
from pipeline.schema import schema
from pipeline.verify import verify

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

CASES = [json.loads(line) for line in (Path(__file__).parent / "data/verify_golden.jsonl").read_text().splitlines()]
CONFIG = VerifyConfig(workers=2, timeout_s=5.0)  # the default bound: no borderline timeouts on a busy box


@pytest.fixture(scope="module")
def stage_scores():
    """The verify stage's own verdicts on the golden table, as rewards (correct -> 1.0)."""
    probs = schema("problems").from_rows([
        {"problem_id": f"g{i:03d}", "source": "golden", "source_id": c["id"], "question": f"golden case {c['id']}",
         "answer": c["gold"], "n_duplicates": 0} for i, c in enumerate(CASES)])
    rows = schema("rollouts").from_rows([
        {"problem_id": f"g{i:03d}", "policy_id": "pol", "sample_idx": 0, "seed": 0, "completion": c["completion"],
         "n_tokens": 1, "finish_reason": "stop"} for i, c in enumerate(CASES)])
    verdicts = sorted(verify(rows, probs, config=CONFIG).verdicts.to_pylist(), key=lambda v: v["problem_id"])
    statuses = [v["status"] for v in verdicts]
    assert {"correct", "incorrect", "no_answer", "timeout"} <= set(statuses)
    return [1.0 if s == "correct" else 0.0 for s in statuses]


def test_trl_reward_equals_the_stage(stage_scores):
    reward = rewards.trl_reward(options=CONFIG)
    golds = [c["gold"] for c in CASES]
    completions = [c["completion"] for c in CASES]
    assert reward(completions, answer=golds, problem_id=["x"] * len(CASES)) == stage_scores
    # the TRL export's `solution` column (gold in $...$) gives the same rewards
    assert reward(completions, solution=[exports.trl_solution(g) for g in golds]) == stage_scores
    # conversational completions (chat prompts): the assistant message's text
    chat = [[{"role": "assistant", "content": c}] for c in completions]
    assert reward(chat, answer=golds) == stage_scores
    assert 0 < sum(stage_scores) < len(stage_scores)


def test_verl_and_openrlhf_forms_equal_the_stage(stage_scores):
    torch = pytest.importorskip("torch")
    golds = [c["gold"] for c in CASES]
    completions = [c["completion"] for c in CASES]
    opts = CONFIG.model_dump()
    batch = rewards.scores(golds, completions, options=opts)
    assert batch == stage_scores
    # verl's single-response form on the first correct and first incorrect case
    i_ok, i_bad = stage_scores.index(1.0), stage_scores.index(0.0)
    assert rewards.compute_score("passband/golden", completions[i_ok], golds[i_ok]) == 1.0
    assert rewards.compute_score("passband/golden", completions[i_bad], golds[i_bad], {"index": 0}) == 0.0
    # OpenRLHF: queries are prompt + response; the prompt's own numbers must not be graded
    sel = [i for i, c in enumerate(CASES) if c["expected"] != "timeout"]
    prompts = [f"Q: gold is {golds[i]}?\nA:" for i in sel]
    out = rewards.reward_func([p + completions[i] for p, i in zip(prompts, sel, strict=True)], prompts,
                              [golds[i] for i in sel])
    assert isinstance(out["rewards"], torch.Tensor)
    assert out["rewards"].tolist() == [stage_scores[i] for i in sel]
    assert out["scores"].tolist() == out["rewards"].tolist()
    assert out["extra_logs"]["verify_undecided"].sum().item() == 0


def test_shipped_reward_files_go_through_passband(tmp_path):
    for name, text, fn in [("reward.py", exports.VERL_REWARD, "compute_score"),
                           ("reward_func.py", exports.OPENRLHF_REWARD, "reward_func")]:
        path = tmp_path / name
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name[:-3], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        assert getattr(mod, fn) is getattr(rewards, fn)
    assert exports.VERL_REWARD == rewards.VERL_REWARD_FILE


def test_reward_errors():
    with pytest.raises(ValueError, match="needs the gold"):
        rewards.accuracy_reward(["The answer is 8."])
    with pytest.raises(ValueError, match="2 completions but 1 gold"):
        rewards.accuracy_reward(["8", "9"], answer=["8"])
    with pytest.raises(ConfigError, match="timeout_sec"):
        rewards.trl_reward(options={"timeout_sec": 1})
    with pytest.raises(TypeError, match="string or a list of messages"):
        rewards.accuracy_reward([7], answer=["7"])
