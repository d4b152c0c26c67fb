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


def test_verl_rlhf_dataset_takes_the_verl_export(folder, embedded_model_dir, tmp_path):
    """verl does not install into the project's environment (it moves huggingface_hub, brings ray):
    point PASSBAND_VERL_PYTHON at a separate one (docs/training.md shows how to make it)."""
    import json
    import os
    import subprocess
    from pathlib import Path

    import pyarrow.parquet as pq

    python = os.environ.get("PASSBAND_VERL_PYTHON")
    if not python:
        pytest.skip("PASSBAND_VERL_PYTHON is not set: no verl environment")
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([python, str(repo / "tests/support/verl_loader_check.py"), str(folder), str(embedded_model_dir),
                          str(tmp_path / "cache")], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    rows = pq.read_table(folder / "exports/verl/learnable/train.parquet").to_pylist()
    assert seen["len"] == len(rows) == EXPECTED["learnable"]["train"]
    first = rows[0]
    assert seen["raw_prompt"] == first["prompt"] and seen["data_source"] == first["data_source"]
    assert seen["ground_truth"] == first["reward_model"]["ground_truth"]
    assert seen["problem_id"] == first["extra_info"]["problem_id"]
    assert (seen["right"], seen["wrong"]) == (1.0, 0.0)  # the shipped reward.py, loaded the way verl loads it
