"""The signal-matched hard arm's rule: an optimizer step only on a GRPO group with a signal; other groups redrawn.

The hard arm's items give a group with a signal (rewards that differ) in 0.17 of groups, the learnable arm's
in 0.61, so "learnable beat hard" may only mean "more groups with a signal". Skipping the groups without
one is not enough by itself: with ``beta: 0`` such a group's gradient is exactly zero, yet transformers'
AdamW still moves the weights on it (its momentum), and the learning-rate schedule still advances
(weight_displacement.py measured both). So the gate, a transformers ``TrainerCallback`` passed to
``train_arm(..., callbacks=[gate])`` with ``max_steps`` set to the cap on groups:

- makes the optimizer's step a no-op when every gradient is zero (with ``beta: 0``: exactly when the group's
  rewards were all equal), so the group is discarded and the next drawn item is tried: DAPO's dynamic
  sampling, one group a step;
- advances the learning-rate schedule only on taken steps, over ``steps`` taken steps (the linear decay to 0
  every arm has over its 16 steps);
- stops training after ``steps`` taken steps; the trainer's ``max_steps`` (groups drawn) caps the redraws.

Each hard_signal run thus takes as many optimizer steps as every other arm's run, each on a group with a
signal: at least as many such groups as a learnable run has (about 10 of 16). ``stats`` (taken, skipped)
goes to the run's training log.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


class SignalGate(TrainerCallback):
    def __init__(self, steps: int) -> None:
        if steps <= 0:
            raise ValueError(f"steps must be positive, got {steps}")
        self.steps = steps
        self.taken = 0
        self.skipped = 0
        self._last_taken = False

    @property
    def stats(self) -> dict[str, int]:
        return {"steps_taken": self.taken, "groups_skipped": self.skipped}

    def install(self, optimizer: Any, scheduler: Any) -> None:
        """Gate ``optimizer.step`` and ``scheduler.step`` (a LambdaLR) in place; the schedule decays linearly over
        ``steps`` taken steps."""
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
        step, sched_step = inner.step, scheduler.step

        def gated_step(*args: Any, **kwargs: Any) -> Any:
            if not any(p.grad is not None and bool(p.grad.any()) for g in inner.param_groups for p in g["params"]):
                self.skipped += 1
                self._last_taken = False
                return None
            self.taken += 1
            self._last_taken = True
            return step(*args, **kwargs)

        def gated_scheduler_step(*args: Any, **kwargs: Any) -> Any:
            return sched_step(*args, **kwargs) if self._last_taken else None

        gated_step._wrapped_by_lr_sched = True  # torch's scheduler warns about a replaced step without it
        inner.step = gated_step
        scheduler.step = gated_scheduler_step
        n = self.steps
        scheduler.lr_lambdas = [lambda s: max(0.0, (n - s) / n)] * len(scheduler.lr_lambdas)

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        self.install(optimizer, lr_scheduler)

    def on_step_end(self, args, state, control, **kwargs):
        if self.taken >= self.steps:
            control.should_training_stop = True
        return control
