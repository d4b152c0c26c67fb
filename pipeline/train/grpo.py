"""GRPO with TRL on CPU: one arm of items in, a trained checkpoint and its per-step reward log out.

The policy's own prompt template renders each question (the embedded 135M model only answers
with its 3-shot prompt), TRL's ``GRPOTrainer`` samples ``num_generations`` completions per
prompt and rewards them with :func:`pipeline.rewards.trl_reward` (passband's verifier). Train and
measure grade the same text: with ``stop=`` (the policy's stop strings) every completion is cut at the
first of them before the reward (:func:`cut_at_stop`, vLLM's rule: the stop string is not kept), and
when ``"\\n"`` is one of them every token containing a newline ends generation (the same cut, sooner).
Without ``stop`` a completion ends at its first newline token and is graded as decoded (the old rule).
TRL normalises advantages by the group's *sample* standard deviation (``scale_rewards="group"``)::

    >>> result = train_arm(rows, model_dir="data/models/smollm2-135m-instruct", out_dir="ckpt",
    ...                    config=GrpoConfig(steps=24, seed=0))                    # doctest: +SKIP
    >>> result.log[0]     # {"step": 1, "reward": 0.31, "reward_std": 0.27, "loss": ..., "seconds": ...}

The checkpoint folder is written whole (a hidden temp folder beside it, then renamed); its ``revision``
is the sha256 of its weight file, which makes it a policy snapshot passband can measure. An existing
``out_dir`` is replaced only when it is a checkpoint passband trained (its ``train_log.json``) or empty:
anything else, or a link, is a :class:`pipeline.ownership.NotOwnedError` before training starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from pipeline.config import Model
from pipeline.engine_support.vllm_env import verbose
from pipeline.ownership import check_target, checkpoint_proof, remove_tree
from pipeline.rewards import trl_reward

WEIGHTS = "model.safetensors"


class GrpoConfig(Model):
    """GRPO knobs for one arm (all of them decide the checkpoint)."""

    steps: int = Field(24, gt=0, description="optimizer steps")
    seed: int = 0
    num_generations: int = Field(8, ge=2, description="completions per prompt (the GRPO group)")
    prompts_per_step: int = Field(2, gt=0, description="prompts per optimizer step")
    max_completion_tokens: int = Field(48, gt=0)
    temperature: float = Field(0.8, gt=0)
    learning_rate: float = Field(1e-5, gt=0)
    beta: float = Field(0.0, ge=0, description="KL coefficient (0: no reference model, TRL's default)")
    threads: int | None = Field(None, gt=0, description="torch threads (None: torch's default)")


@dataclass(frozen=True)
class TrainResult:
    checkpoint: Path
    revision: str  # sha256:<digest of the weight file>
    log: list[dict[str, Any]]  # one row per step: step, reward, reward_std, loss, frac_reward_zero_std, seconds
    seconds: float


def weights_digest(checkpoint: Path) -> str:
    """``sha256:<hex>`` of the checkpoint's weight file: the revision of its policy snapshot."""
    path = Path(checkpoint) / WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {checkpoint} is not a trained checkpoint; re-run its training stage")
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"sha256:{h.hexdigest()}"


def newline_token_ids(tokenizer: Any) -> list[int]:
    """Every token whose text contains a newline: the end of a one-line answer."""
    vocab = tokenizer.get_vocab()
    ids = sorted(vocab.values())
    return [i for i, text in zip(ids, tokenizer.batch_decode([[i] for i in ids]), strict=True) if "\n" in text]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` before the first occurrence of any of ``stop``: what vLLM returns for those stop strings."""
    found = [i for s in stop if s and (i := text.find(s)) >= 0]
    return text[:min(found)] if found else text


def stop_reward(reward: Any, stop: Sequence[str]) -> Any:
    """A TRL reward function that grades each completion cut at ``stop`` (string or conversational completions)."""
    stop = list(stop)

    def cut(c: Any) -> Any:
        if isinstance(c, str):
            return cut_at_stop(c, stop)
        return [{**m, "content": cut_at_stop(str(m.get("content", "")), stop)} for m in c]

    def reward_at_stop(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return reward(completions=[cut(c) for c in completions], **kwargs)

    reward_at_stop.__name__ = getattr(reward, "__name__", "reward")  # TRL logs a reward by its function's name
    return reward_at_stop


def train_arm(rows: Sequence[dict[str, str]], *, model_dir: str | Path, out_dir: str | Path, config: GrpoConfig,
              render: Any, verify_options: Any = None, progress: bool = True, reward: Any = None,
              callbacks: Sequence[Any] = (), sampler: Any = None, stop: Sequence[str] | None = None) -> TrainResult:
    """Train ``model_dir`` with GRPO on ``rows`` (``question``, ``answer``); write the checkpoint to ``out_dir``.

    ``render(question) -> str`` is the policy's prompt (its template, few-shot examples included).
    Rows with a ``problem_id`` pass it to the reward as a dataset column. Hooks: ``reward`` (a TRL reward
    function in place of passband's, e.g. :meth:`pipeline.train.recorder.RolloutRecorder.reward`),
    ``callbacks`` (transformers ``TrainerCallback`` objects), ``sampler`` (a
    :class:`pipeline.train.sampler.LearnabilitySampler` over the rows, in order: it draws the prompts).
    ``stop``: the measured policy's stop strings; the reward (passband's or the hook's) grades each completion
    cut at them (:func:`stop_reward`), as the rollout stage's vLLM returns it.
    """
    check_target(out_dir, owned=checkpoint_proof, what="a GRPO checkpoint folder")  # before minutes of training
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with warnings.catch_warnings():
        if not verbose():  # TRL names the vLLM versions it was tested with; training here does not use vLLM
            warnings.filterwarnings("ignore", message="TRL currently supports vLLM", category=UserWarning)
        from trl import GRPOConfig, GRPOTrainer

    if not rows:
        raise ValueError("train_arm needs at least one row")
    if config.threads:
        torch.set_num_threads(config.threads)
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.passband-tmp")  # a killed run's is passband's own: removed
    remove_tree(tmp)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    eos = tokenizer.eos_token_id
    saved_eos = model.generation_config.eos_token_id
    newline_ends = stop is None or "\n" in stop
    model.generation_config.eos_token_id = [eos, *[i for i in newline_token_ids(tokenizer) if i != eos and newline_ends]]
    ids = all("problem_id" in r for r in rows)
    data = Dataset.from_list([{"prompt": render(r["question"]), "answer": r["answer"],
                               **({"problem_id": r["problem_id"]} if ids else {})} for r in rows])
    batch = config.prompts_per_step * config.num_generations
    args = GRPOConfig(
        output_dir=str(tmp / "trainer"), max_steps=config.steps, seed=config.seed, data_seed=config.seed,
        per_device_train_batch_size=batch, num_generations=config.num_generations,
        max_completion_length=config.max_completion_tokens, temperature=config.temperature, top_p=1.0,
        learning_rate=config.learning_rate, beta=config.beta, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, bf16=False, fp16=False, dataloader_num_workers=0,
        disable_tqdm=True, log_completions=False,
    )
    reward = reward if reward is not None else trl_reward(options=verify_options, workers=1)
    if stop is not None:
        reward = stop_reward(reward, stop)
    trainer_class, extra = GRPOTrainer, {}
    if sampler is not None:
        from pipeline.train.trl_sampler import learnability_grpo_trainer  # lazy: it imports torch

        trainer_class, extra = learnability_grpo_trainer(), {"learnability_sampler": sampler}
    trainer = trainer_class(model=model, processing_class=tokenizer, reward_funcs=reward, args=args, train_dataset=data,
                          callbacks=list(callbacks) or None, **extra)
    if not verbose():  # one bar with the step's reward instead of transformers' dict per step
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(_step_bar(config.steps, progress))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    log = step_log(trainer.state.log_history)
    # the newline stop is training's stand-in for the policy's stop strings: the checkpoint keeps the
    # base model's generation config (vLLM would otherwise stop at every newline when measuring it)
    trainer.model.generation_config.eos_token_id = saved_eos
    trainer.save_model(str(tmp / "model"))
    tokenizer.save_pretrained(str(tmp / "model"))
    final = tmp / "model"
    (final / "train_log.json").write_text(json.dumps({"config": config.model_dump(), "log": log,
                                                      "seconds": round(seconds, 1)}, indent=1))
    shutil.rmtree(tmp / "trainer", ignore_errors=True)
    if check_target(out_dir, owned=checkpoint_proof, what="a GRPO checkpoint folder"):  # again: training took minutes
        remove_tree(out_dir)
    os.replace(final, out_dir)
    remove_tree(tmp)
    return TrainResult(out_dir, weights_digest(out_dir), log, seconds)


def _step_bar(steps: int, enabled: bool):
    """A transformers ``TrainerCallback``: one tqdm bar over the steps, showing the last step's reward."""
    from tqdm import tqdm
    from transformers import TrainerCallback

    class StepBar(TrainerCallback):
        def __init__(self) -> None:
            self.bar = tqdm(total=steps, desc="GRPO", unit="step", disable=not enabled)

        def on_log(self, args, state, control, logs=None, **kw) -> None:
            if logs and "reward" in logs:
                self.bar.set_postfix(reward=f"{float(logs['reward']):.3f}", refresh=False)

        def on_step_end(self, args, state, control, **kw) -> None:
            self.bar.update(1)

        def on_train_end(self, args, state, control, **kw) -> None:
            self.bar.close()

    return StepBar()


def step_log(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TRL's log history as one row per optimizer step (the keys this experiment reports)."""
    keys = {"reward": "reward", "reward_std": "reward_std", "loss": "loss",
            "frac_reward_zero_std": "frac_reward_zero_std", "completions/mean_length": "mean_completion_tokens"}
    rows = []
    for h in history:
        if "step" in h and "reward" in h:
            rows.append({"step": int(h["step"]), **{v: h.get(k) for k, v in keys.items()}})
    return rows


__all__ = ["WEIGHTS", "GrpoConfig", "TrainResult", "cut_at_stop", "newline_token_ids", "step_log", "stop_reward",
           "train_arm", "weights_digest"]
