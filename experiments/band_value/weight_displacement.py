"""How far did each GRPO run move the weights, and what sets that distance? Read from the checkpoints present.

A GRPO group whose rewards are all equal has no advantage; with ``beta: 0`` its loss and gradient are zero.
One would expect a run with 2 groups with a signal in 16 steps to move the policy far less than a run with
13. AdamW (the trainer's optimizer: transformers' default, no weight decay, a linear learning-rate decay to
0) says otherwise: its step is ``lr * m_hat / sqrt(v_hat)``, about ``lr`` per parameter whatever the
gradient's size, and a zero-gradient step still moves by the momentum ``m`` left from the last signal. So
the distance should follow the learning-rate area left after the *first* step with a signal
(``sum(lr_k for k >= first)``), not the count of steps with one.

For every checkpoint in ``data/checkpoints`` (DVC's cache keeps the recent ones; ``results/`` keeps no
weights) this prints the relative distance ``||w - w0|| / ||w0||`` from the base model, the share of
weights that changed, the steps with a signal (from the run's ``train_log.json``) and the first of them,
and the learning-rate area left from that step (in units of full-rate steps); then Spearman's rho of the
distance against each predictor.

    .venv/bin/python experiments/band_value/weight_displacement.py [--base MODEL_DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import yaml
from signal_vs_gain import spearman  # beside this script

HERE = Path(__file__).resolve().parent
BASE = HERE.parent.parent / "data" / "models" / "smollm2-135m-instruct"


def lr_area(first: int | None, steps: int) -> float:
    """The linear schedule's learning rate summed over steps first..steps, in full-rate steps (step k: (steps-k+1)/steps)."""
    if first is None:
        return 0.0
    return sum((steps - k + 1) / steps for k in range(first, steps + 1))


def displacement(base: dict, weights: dict) -> tuple[float, float]:
    """(||w - w0|| / ||w0||, share of weights that changed) over the tensors both hold."""
    d2 = b2 = 0.0
    changed = total = 0
    for name, w0 in base.items():
        if name not in weights:
            continue
        w0 = w0.float()
        d = weights[name].float() - w0
        d2 += float((d * d).sum())
        b2 += float((w0 * w0).sum())
        changed += int((d != 0).sum())
        total += d.numel()
    return (d2 ** 0.5) / (b2 ** 0.5), changed / total


def runs(base_dir: Path, root: Path = HERE) -> list[dict]:
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    steps = yaml.safe_load((root / "band_value.yaml").read_text(encoding="utf-8"))["grpo"]["steps"]
    base = load_file(str(base_dir / "model.safetensors"))
    out = []
    for ck in sorted((root / "data" / "checkpoints").glob("*-d*-s*")):
        if not (ck / "model.safetensors").exists() or not (ck / "train_log.json").exists():
            continue
        log = json.loads((ck / "train_log.json").read_text(encoding="utf-8"))["log"]
        signal = [row["step"] for row in log if row["reward_std"] > 0]
        dist, changed = displacement(base, load_file(str(ck / "model.safetensors")))
        first = signal[0] if signal else None
        out.append({"run": ck.name, "arm": ck.name.rsplit("-d", 1)[0], "signal_steps": len(signal),
                    "first_signal_step": first, "lr_area_from_first": lr_area(first, steps),
                    "relative_distance": dist, "changed_share": changed})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, default=BASE, help="the base model's folder (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the rows and correlations as JSON")
    args = ap.parse_args()
    rows = runs(args.base)
    if not rows:
        raise SystemExit("no checkpoints in data/checkpoints (DVC's cache keeps them; results/ does not)")
    dist = np.array([r["relative_distance"] for r in rows])
    corr = {"signal_steps": spearman(np.array([r["signal_steps"] for r in rows], float), dist),
            "lr_area_from_first": spearman(np.array([r["lr_area_from_first"] for r in rows]), dist)}
    if args.json:
        print(json.dumps({"runs": rows, "spearman_with_distance": corr}, indent=2))
        return
    print("| run | steps with a signal | first | lr area from first | distance from base (relative) | weights changed |")
    print("|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["relative_distance"]):
        print(f"| {r['run']} | {r['signal_steps']} | {r['first_signal_step']} | {r['lr_area_from_first']:.2f} | "
              f"{r['relative_distance'] * 1e4:.2f}e-4 | {r['changed_share']:.2f} |")
    print(f"\n{len(rows)} runs. Spearman rho with the distance: steps with a signal {corr['signal_steps']:+.2f}, "
          f"lr area from the first signal {corr['lr_area_from_first']:+.2f}")


if __name__ == "__main__":
    main()
