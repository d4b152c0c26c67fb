"""A short smoke run of the signal gate inside TRL, before any hard_signal run of the design (PREREGISTRATION.md).

``signal_gate.py`` is tested on a plain torch loop only; this runs it the way ``design.py train`` runs a
``hard_signal`` run (:func:`design.train_run`: the pinned band-value training, its recorder, the gate as a
training callback, ``max_groups_per_step`` x its steps as the cap on groups), with 2 taken steps instead of 16,
on 16 items of the training pool's generator spread over easy and hard levels (so both kinds of groups come),
in a throwaway root (``prereg/data/smoke``). It checks, step by step, what the gate promises:

- a group without a signal (its rewards all equal) changes no weight and does not move the learning rate;
- a group with a signal changes the weights, and the learning rate decays linearly over the taken steps
  (2e-5, then 1e-5, then 0 with 2 steps);
- training stops after 2 taken steps, within the cap (20 groups), and the training log's counts agree:
  groups = taken + skipped, groups with a signal (the recorder's count) = taken.

Prints one JSON line of what it saw and exits 1 when a check fails. Run from the repository root with the
experiment's pinned passband first on the path (``dvc repro experiments/band_value/dvc.yaml:pin`` first):

    PYTHONPATH=experiments/band_value/data/passband .venv/bin/python experiments/band_value/signal_gate_smoke.py
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # design.py and signal_gate.py, as design.py train imports them

import design  # noqa: E402

ROOT = design.PREREG / "data" / "smoke"
RUN = "hard_signal-d100-s100"
STEPS = 2
LEVELS = ["L2", "L4", "L6", "L8"]  # easy to hard: groups with and without a signal


def smoke_design() -> dict[str, Any]:
    """The design's hard_signal arm alone: one run (number 100), gated, capped at ``max_groups_per_step`` x steps."""
    cfg = design.load_design()
    return {**cfg, "runs": {"hard_signal": 1}, "arms": {"hard_signal": cfg["arms"]["hard_signal"]}}


def setup() -> Path:
    """The throwaway root: params (the design's, the model path re-rooted), a 2-step experiment config, one arm."""
    from pipeline.ingest.synthetic import SyntheticOptions, generate
    from pipeline.keys import problem_id

    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    params = yaml.safe_load((design.PREREG / "params.yaml").read_text(encoding="utf-8"))
    models = (design.PREREG / params["paths"]["models"]).resolve()
    params["paths"]["models"] = os.path.relpath(models, ROOT)
    params["ingest"]["sources"] = [{**s, "path": str(design.PREREG / s["path"])} for s in params["ingest"]["sources"]]
    (ROOT / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    experiment = yaml.safe_load((HERE / "band_value.yaml").read_text(encoding="utf-8"))
    experiment["grpo"]["steps"] = STEPS
    (ROOT / "band_value.yaml").write_text(yaml.safe_dump(experiment, sort_keys=False), encoding="utf-8")
    items = [i for i in generate(SyntheticOptions(n_per_level=4, seed=100, part="train", levels=LEVELS))]
    rows = [{"problem_id": problem_id(i.question), "question": i.question, "answer": i.answer, "level": i.level}
            for i in items]
    arm = ROOT / "data" / "arms" / "d100" / "hard_signal.jsonl"
    arm.parent.mkdir(parents=True)
    arm.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return ROOT / "band_value.yaml"


def observer(gate: Any, seen: list[dict[str, Any]]):
    """A callback after the gate's: each trainer step's counts, learning rate and a checksum of every weight."""
    import torch
    from transformers import TrainerCallback

    class Observer(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, lr_scheduler=None, **kwargs):
            with torch.no_grad():
                total = math.fsum(float(p.double().sum()) for p in model.parameters())
            seen.append({"step": state.global_step, "taken": gate.taken, "skipped": gate.skipped,
                         "lr": lr_scheduler.get_last_lr()[0], "weights": total})

    return Observer()


def checks(seen: list[dict[str, Any]], stats: dict[str, int], log: dict[str, Any], lr0: float) -> list[str]:
    failed = []
    taken, skipped = stats["steps_taken"], stats["groups_skipped"]
    if taken != STEPS:
        failed.append(f"{taken} steps taken, not {STEPS}")
    if len(seen) != taken + skipped or taken + skipped > STEPS * 10:
        failed.append(f"{len(seen)} trainer steps for {taken} taken + {skipped} skipped (cap {STEPS * 10})")
    prev_w, prev_lr, prev_taken = None, lr0, 0
    for s in seen:
        took = s["taken"] > prev_taken
        moved = prev_w is not None and s["weights"] != prev_w
        if prev_w is not None and took != moved:
            what = "taken but weights did not move" if took else "skipped but weights moved"
            failed.append(f"step {s['step']}: {what}")
        want_lr = lr0 * max(0.0, (STEPS - s["taken"]) / STEPS)
        if not math.isclose(s["lr"], want_lr, rel_tol=1e-9, abs_tol=1e-15):
            failed.append(f"step {s['step']}: learning rate {s['lr']}, want {want_lr}")
        if not took and s["lr"] != prev_lr:
            failed.append(f"step {s['step']}: skipped but the learning rate moved")
        prev_w, prev_lr, prev_taken = s["weights"], s["lr"], s["taken"]
    if log.get("groups") != taken + skipped or log.get("groups_with_signal") != taken:
        failed.append(f"training log: {log.get('groups')} groups, {log.get('groups_with_signal')} with a signal; "
                      f"gate: {taken} taken, {skipped} skipped")
    if log.get("signal_gate") != stats:
        failed.append(f"training log's signal_gate {log.get('signal_gate')} != {stats}")
    return failed


def main() -> None:
    from bandvalue import experiment as bv

    experiment = setup()
    seen: list[dict[str, Any]] = []
    plain = bv.train_arm

    def observed(rows: Any, *, callbacks: Any = (), **kwargs: Any) -> Any:
        gates = [c for c in callbacks if type(c).__name__ == "SignalGate"]
        return plain(rows, callbacks=[*callbacks, *(observer(g, seen) for g in gates)], **kwargs)

    bv.train_arm = observed  # train_run wraps this one with the gate; the observer goes after the gate
    try:
        stats = design.train_run(RUN, root=ROOT, design=smoke_design(), experiment=experiment)
    finally:
        bv.train_arm = plain
    log = json.loads((ROOT / "data" / "checkpoints" / RUN / "train_log.json").read_text(encoding="utf-8"))
    lr0 = yaml.safe_load(experiment.read_text(encoding="utf-8"))["grpo"]["learning_rate"]
    failed = checks(seen, stats, log, lr0)
    print(json.dumps({"ok": not failed, "failed": failed, "signal_gate": stats, "groups": log.get("groups"),
                      "groups_with_signal": log.get("groups_with_signal"), "seconds": log.get("seconds"),
                      "steps": [{k: s[k] for k in ("step", "taken", "skipped", "lr")} for s in seen]}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
