"""``passband publish`` and ``passband push``: the thin shells of the publish stage."""

from __future__ import annotations

import os
from pathlib import Path

import click

from pipeline.bands import LEARNABLE
from pipeline.cli_options import with_params
from pipeline.publish import plan_push, push_to_hub, read_build_info, run


def _shown(path: Path) -> str:
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else rel


@click.command()
@with_params
def command(*, params, root) -> None:
    """Build the Hub dataset folder (paths.published) from the difficulty tables.

    Configs: default (every kept item), one per band in publish.bands, reformulated, and
    rollouts (publish.rollouts: the completions behind the pass rates, one row per item and
    policy, with verdicts, flags, the prompt the policy saw and an SFT-ready `messages`); the
    card records the primary policy, the verifier, counts per band, a pass-rate histogram and
    how the folder was built. Trainer exports (verl, TRL, OpenRLHF) go under exports/.
    Nothing is uploaded: `passband push --repo-id ORG/NAME` does that.
    """
    result = run(params, root=root)
    ds = result.dataset
    folder = _shown(result.folder)
    click.echo(f"publish: {folder} ({len(result.files)} files), primary policy {ds.primary['name']} ({ds.primary['policy_id']})")
    click.echo("  rows: " + "; ".join(
        f"{config} {ds.rows(config)} (" + ", ".join(f"{s} {t.num_rows}" for s, t in splits.items()) + ")"
        for config, splits in ds.configs.items()))
    if (ro := result.rollouts) is not None:
        click.echo(f"  rollouts config: {ro.total_rows} rows, {ro.generations} generations ({ro.correct} correct, "
                   f"{ro.correct_unflagged} of them unflagged: the SFT rows)")
    if ds.unmeasured or ds.unmeasured_reformulated:
        click.echo(f"  not published: {ds.unmeasured} problems and {ds.unmeasured_reformulated} reformulations "
                   "without a measurement by the primary policy")
    cfg = LEARNABLE if LEARNABLE in ds.configs else "default"
    click.echo(f'  load it: datasets.load_dataset("{folder}", "{cfg}"); push it: passband push --repo-id ORG/NAME')


@click.command()
@click.option("--repo-id", required=True, help="Target Hub dataset repo, ORG/NAME (always explicit).")
@click.option("--dry-run", is_flag=True, help="List what would be uploaded, and the commit message; upload nothing.")
@click.option("--public", is_flag=True, help="Ask for a public repo (default: publish.private, which is private).")
@click.option("--allow-visibility-mismatch", is_flag=True,
              help="Upload to an existing repo whose visibility differs from the one asked for (it keeps its own).")
@click.option("--set-visibility", is_flag=True,
              help="Change an existing repo's visibility to the one asked for, then upload.")
@with_params
def push(*, repo_id: str, dry_run: bool, public: bool, allow_visibility_mismatch: bool, set_visibility: bool,
         params, root) -> None:
    """Upload the published folder (paths.published) to a Hub dataset repo in one commit.

    The token is HF_TOKEN or your `hf auth login`; passband never prints or stores it.
    A new repo is created with the visibility asked for; an existing repo's real visibility is
    checked first, and a mismatch is refused unless --allow-visibility-mismatch or --set-visibility.
    """
    folder = Path(root) / params.paths.published
    private = params.publish.private and not public
    the_plan = plan_push(folder, repo_id=repo_id, private=private, card_repo_id=params.publish.repo_id)
    total = sum(size for _, size in the_plan.files)
    if allow_visibility_mismatch and set_visibility:
        raise click.UsageError("--allow-visibility-mismatch and --set-visibility exclude each other: pick one")
    asked = "private" if private else "public"
    click.echo(f"push: {_shown(folder)} -> datasets/{repo_id} ({asked} asked for; an existing repo's visibility is "
               f"checked before upload), {len(the_plan.files)} files, {total} bytes")
    click.echo(f"commit: {the_plan.commit_message}")
    if dry_run:
        for path, size in the_plan.files:
            click.echo(f"  {size:>12}  {path}")
        click.echo("dry run: nothing uploaded (the Hub was not asked about the repo)")
        return
    result = push_to_hub(folder, the_plan, allow_mismatch=allow_visibility_mismatch, set_visibility=set_visibility)
    how = "created" if result.created else "made" if result.changed_visibility else "existing repo,"
    click.echo(f"pushed: {result.commit_url} ({how} {'private' if result.private else 'public'}, as the Hub reports)")
    rows = read_build_info(folder).get("rows", {})
    click.echo(f'load it: datasets.load_dataset("{repo_id}", "{LEARNABLE if rows.get(LEARNABLE) else "default"}")')
