"""``passband reformulate`` and ``passband reformulate-report``: thin shells of the reformulate stage."""

from __future__ import annotations

import click

from pipeline.cli_options import progress_option, with_params
from pipeline.reformulate.report import write_report
from pipeline.reformulate.stage import run


@click.command()
@with_params
@progress_option
def command(*, params, root, progress: bool) -> None:
    """Rewrite the too-hard problems into easier forms that land in the learnable band (the reformulated table set).

    Parents: main-set problems whose band is in reformulate.bands and whose pass rate is at
    most reformulate.max_pass_rate, for the policies in reformulate.policies (default:
    rollout.policies). Each method in reformulate.methods (fobar, hint_prefix, llm_backward)
    offers each parent rungs (hint fractions, backward questions); the ladder measures them on
    the policy smallest first (rollout.k samples, verified, banded) and keeps the smallest in
    reformulate.target_bands, with parent_id, method, rung, writer and a checked gold, or a
    reject with its reason. Then: `passband rollout --set reformulated`, verify, annotate, and
    `passband reformulate-report`.
    """
    result = run(params, root=root, progress=progress)
    click.echo(f"reformulate: {result.parents} hard parents -> {result.problems.num_rows} reformulations, "
               f"{result.rejects.num_rows} rejects")
    for name, stats in result.per_method.items():
        reasons = ", ".join(f"{r} {n}" for r, n in stats["reject_reasons"].items()) or "none"
        rungs = ", ".join(f"{r} {n}" for r, n in stats["kept_per_rung"].items()) or "none"
        click.echo(f"  {name} ({stats['method_version']}): {stats['problems']} kept (by rung: {rungs}) after "
                   f"{stats['rungs_measured']} rungs measured in {stats['rounds']} rounds; rejected: {reasons}")


@click.command("reformulate-report")
@with_params
def report(*, params, root) -> None:
    """Per method: parents tried, children kept, parents whose child is learnable (re-measured),
    the mean pass-rate shift parent -> child with a 95 % interval, and the reward density (share
    of groups with a success and a failure) before and after; '(any)' counts a parent when some
    method's child is learnable. The reformulation_report view, written as DVC metrics to
    paths.metrics/reformulation_report.json, and paths.plots/reformulation_shift.png."""
    path, data = write_report(params, root=root)
    for method, m in data.items():
        click.echo(f"{method}: {m['parents_tried']} parents tried, {m['children_kept']} children kept, "
                   f"{m['rejected']} rejected")
        for pid, p in m["policies"].items():
            click.echo(f"  {pid}: {p['parents_with_learnable_child']} parents with a learnable child "
                       f"({_pct(p['share_parents_with_learnable_child'])}); mean shift {_signed(p['mean_pass_rate_shift'])} "
                       f"[{_signed(p['shift_ci_low'])}, {_signed(p['shift_ci_high'])}] over {p['children_measured']} "
                       f"children; reward density {_pct(p['reward_density_before'])} -> {_pct(p['reward_density_after'])}")
            share = p["share_parents_with_learnable_child"] or 0.0
            verdict = "reached" if share >= params.reformulate.goal else "NOT reached"
            click.echo(f"    goal {_pct(params.reformulate.goal)} of hard parents with a learnable child: {verdict}")
    click.echo(f"report: {path}")


def _pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:.0f} %"


def _signed(v) -> str:
    return "n/a" if v is None else f"{v:+.3f}"
