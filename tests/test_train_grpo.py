"""GRPO with TRL: the tokenizer's newline stops, the step log, the weights digest, TRL's group normalisation.

The real training run on the embedded model, with its checkpoint's checks, is
tests/test_train_recorder.py::test_real_grpo_run_records_and_samples (one GRPO run for both: ~150 s of CI each)."""

from __future__ import annotations

import pytest

from pipeline.train.grpo import newline_token_ids, step_log, weights_digest

pytest.importorskip("trl")

def test_newline_tokens_end_a_completion(embedded_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model_dir)
    ids = newline_token_ids(tok)
    assert tok.encode("\n")[0] in ids and tok.encode("\n\n")[-1] in ids
    assert all("\n" in tok.decode([i]) for i in ids)
    assert tok.encode(" 8")[0] not in ids


def test_step_log_keeps_training_steps():
    history = [{"step": 1, "reward": 0.5, "loss": 0.1, "reward_std": 0.4}, {"step": 1, "train_runtime": 3.0},
               {"step": 2, "reward": 0.25, "loss": 0.0, "reward_std": 0.2}]
    log = step_log(history)
    assert [r["step"] for r in log] == [1, 2] and log[1]["reward"] == 0.25 and log[0]["frac_reward_zero_std"] is None


def test_weights_digest_names_a_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a trained checkpoint"):
        weights_digest(tmp_path)


def test_trl_group_normalisation_of_one_success_in_eight():
    """The figure docs/training.md states: TRL divides by the group's sample std (1 of 8 -> 2.47, not sqrt(7))."""
    import torch
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([1.0] + [0.0] * 7)
    advantage = (1.0 - rewards.mean()) / (nanstd(rewards) + 1e-4)  # GRPOTrainer, scale_rewards="group"
    assert float(advantage) == pytest.approx(2.474, abs=1e-3)
    assert float((1.0 - rewards.mean()) / rewards.std(unbiased=False)) == pytest.approx(7 ** 0.5)
