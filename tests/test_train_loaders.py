"""The trainers' own loaders on passband's exports.

TRL (installed here, the `train` extra): GRPOTrainer itself takes the TRL export and the published
configs (loaded with `datasets.load_dataset(folder, config)` as a user would), its first batch
renders through the embedded tokenizer's chat template, and passband's reward scores it.
verl and OpenRLHF do not install into this environment (docs/training.md says why); their
formats are checked by tests/test_publish_build.py, and their reward files by tests/test_rewards.py.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from publish_tables import EXPECTED, make_repo

from pipeline.cli import cli

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = make_repo(tmp_path_factory.mktemp("pub") / "repo")
    result = CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root / "data/published"


def trainer_for(dataset, model_dir, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from pipeline.rewards import accuracy_reward

    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=1,
                      max_completion_length=8, use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True)
    return GRPOTrainer(model=str(model_dir), reward_funcs=accuracy_reward, args=args, train_dataset=dataset)


def test_grpo_trainer_takes_the_trl_export(folder, embedded_model_dir, tmp_path):
    from datasets import load_dataset

    train = load_dataset("parquet", data_files=str(folder / "exports/trl/learnable/train.parquet"), split="train")
    assert len(train) == EXPECTED["learnable"]["train"]
    trainer = trainer_for(train, embedded_model_dir, tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    assert {"prompt", "answer", "solution", "band"} <= set(batch[0])
    # the conversational prompt renders through the embedded tokenizer's own chat template
    text = trainer.processing_class.apply_chat_template(batch[0]["prompt"], tokenize=False, add_generation_prompt=True)
    assert batch[0]["prompt"][-1]["content"] in text and text.rstrip().endswith("assistant")
    # passband's reward reads the export's columns as GRPOTrainer passes them (keyword arguments)
    extra = {k: [row[k] for row in batch] for k in batch[0] if k != "prompt"}
    golds = extra["answer"]
    assert trainer.reward_funcs[0]([f"The answer is {g}." for g in golds], **extra) == [1.0] * len(golds)
    assert trainer.reward_funcs[0](["The answer is 1234567."] * len(golds), **extra) == [0.0] * len(golds)


def test_grpo_trainer_takes_a_published_config(folder, embedded_model_dir, tmp_path):
    from datasets import load_dataset

    ds = load_dataset(str(folder), "learnable")
    assert set(ds) == {"train", "test"} and len(ds["train"]) == EXPECTED["learnable"]["train"]
    trainer = trainer_for(ds["train"], embedded_model_dir, tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    assert {"prompt", "answer", "pass_rate", "band"} <= set(batch[0]) and batch[0]["band"] == "learnable"
