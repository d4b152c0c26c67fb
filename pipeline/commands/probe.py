"""``passband probe``: the thin shell of the probe (docs/probe.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from pipeline.cli_options import with_params
from pipeline.params_loader import load_params
from pipeline.probe import ProbeConfig, SAEConfig, run_report
from pipeline.probe import run as run_probe

_PARAMS = click.option("--params", "params_path", default="params.yaml", show_default=True,
                       type=click.Path(dir_okay=False, path_type=Path),
                       help="Parameters file; every path in it is relative to its folder.")


@click.group(invoke_without_command=True)
@click.option("--policy", default=None, help="Policy name in params.yaml (default: the first of rollout.policies).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Probe only the first N rollouts (by key).")
@click.option("--layer", type=click.IntRange(min=0), default=15, show_default=True,
              help="Residual stream entering this decoder layer (0: the embeddings).")
@click.option("--latents", type=click.IntRange(min=8), default=1024, show_default=True, help="SAE width.")
@click.option("--steps", type=click.IntRange(min=1), default=1500, show_default=True, help="Training steps of each SAE.")
@click.option("--top-k", type=click.IntRange(min=1), default=8, show_default=True,
              help="High-level features kept per rollout in the features table.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads (default: torch's).")
@_PARAMS
@click.pass_context
def command(ctx, *, params_path, policy, limit, layer, latents, steps, top_k, threads) -> None:
    """Train a temporal sparse autoencoder (and a plain SAE baseline) on one policy's rollouts; write per-rollout features.

    Activations: teacher-forced passes of each rollout through the policy's checkpoint (transformers).
    Writes data/probe/<sae_id>/ (weights, report.json: quality of both SAEs, top-activating spans) and
    a data/features shard; the same config, model and rollouts again does nothing.
    `passband probe report` writes the reports (shortcut probe, drift, enrichment).
    """
    if ctx.invoked_subcommand is not None:
        return
    params = load_params(params_path)
    root = params_path.resolve().parent
    cfg = ProbeConfig(layer=layer, top_k=top_k, sae=dataclasses.replace(SAEConfig(), n_latents=latents, steps=steps))
    r = run_probe(params, root=root, policy=policy, limit=limit, config=cfg, threads=threads)
    if r.skipped:
        click.echo(f"probe: {r.sae_id} already trained for these {r.rollouts} rollouts; nothing to do ({r.out_dir})")
        return
    q = r.quality
    click.echo(f"probe: {r.sae_id} on {r.rollouts} rollouts ({r.tokens} completion tokens), {r.rows} feature rows; "
               f"{r.seconds['total']} s")
    for kind in ("tsae", "plain"):
        click.echo(f"  {kind}: FVE {q[kind]['fve']:.3f}, reconstruction cosine {q[kind]['recon_cosine']:.3f}, "
                   f"adjacent-token high-level cosine {q[kind]['adjacent_high_cosine']:.3f} "
                   f"(random pairs {q[kind]['random_pair_high_cosine']:.3f})")


@command.command("report")
@click.option("--policy", default=None, help="Policy name in params.yaml (default: the first of rollout.policies).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N rollouts (by key).")
@click.option("--checkpoint", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="A GRPO checkpoint with records/ (passband band-value train): drift to it, and the probe on its "
                   "recorded rollouts.")
@click.option("--problems", type=click.Path(file_okay=False, exists=True, path_type=Path), multiple=True,
              help="A problems table the checkpoint's records draw from; repeat it for several (an arm of "
                   "reformulated children: the pool's and the reformulated one). Default: <checkpoint>/../../problems.")
@click.option("--drift-limit", type=click.IntRange(min=0), default=None,
              help="Drift over the first N of the policy's rollouts (and the checkpoint's records); default: all.")
@click.option("--layer", type=click.IntRange(min=0), default=15, show_default=True,
              help="Residual stream entering this decoder layer (0: the embeddings).")
@click.option("--latents", type=click.IntRange(min=8), default=512, show_default=True, help="T-SAE width.")
@click.option("--steps", type=click.IntRange(min=1), default=1500, show_default=True, help="T-SAE training steps.")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-validation folds.")
@click.option("--labelled/--no-labelled", default=True, show_default=True,
              help="Also probe the labelled set (pipeline/annotate/flag_labels.jsonl: human labels and its text flags).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.json and report.md (default: data/probe/reports/<report_id>).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Activations cache (default: data/probe/acts).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads (default: torch's).")
@with_params
def report(*, params, root, policy, limit, checkpoint, problems, drift_limit, layer, latents, steps, folds, labelled,
           out, cache, threads) -> None:
    """The probe's reports: a feature-based shortcut probe, drift to a checkpoint, per-band enrichment, hard items.

    Trains (or reuses) a T-SAE on the policy's rollouts; cross-validates a logistic probe on per-rollout
    high-level features for unsupported_answer and computation_skip (text flags as weak labels; the
    labelled set's human labels); writes data/probe/reports/<report_id>/report.json and report.md.
    Activations are cached under data/probe/acts/.
    """
    cfg = ProbeConfig(layer=layer, sae=dataclasses.replace(SAEConfig(), n_latents=latents, steps=steps))
    r = run_report(params, root=root, policy=policy, limit=limit, config=cfg, checkpoint=checkpoint, problems=problems,
            drift_limit=drift_limit, folds=folds, use_labelled=labelled, out=out, cache=cache, threads=threads)
    sizes = ", ".join(f"{k} {v['rollouts']}" for k, v in r["sizes"].items())
    click.echo(f"probe report {r['report_id']}: {sizes} rollouts; SAE {r['sae_id']}; {r['seconds']['total']} s; "
               f"{r['out']}/report.md")
