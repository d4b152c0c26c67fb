"""``passband reformulate`` and ``passband reformulate-report``: thin shells of the reformulate stage."""

from __future__ import annotations

import click

from pipeline.options import progress_option, with_params


@click.command()
@with_params
@progress_option
def command(*, params, root, progress: bool) -> None:
    """Rewrite the too-hard problems into easier backward forms (the reformulated table set).

    Parents: main-set problems whose band is in reformulate.bands and whose pass rate is at
    most reformulate.max_pass_rate, for the policies in reformulate.policies (default:
    rollout.policies). Each method in reformulate.methods (fobar, hint_prefix, llm_backward)
    makes one new problem per parent, with parent_id, method, method_version and a checked
    gold, or a reject with its reason. Then: `passband rollout --set reformulated`, verify,
    annotate, and `passband reformulate-report`.
    """
    from pipeline.reformulate import run

    result = run(params, root=root, progress=progress)
    click.echo(f"reformulate: {result.parents} hard parents -> {result.problems.num_rows} reformulations, "
               f"{result.rejects.num_rows} rejects")
    for name, stats in result.per_method.items():
        reasons = ", ".join(f"{r} {n}" for r, n in stats["reject_reasons"].items()) or "none"
        click.echo(f"  {name} ({stats['method_version']}): {stats['problems']} made; rejected: {reasons}")


@click.command("reformulate-report")
@with_params
def report(*, params, root) -> None:
    """Per method: hard parents that got a reformulation in the learnable band, the pass-rate
    shift parent -> child on the same policy, and rejects by reason (the reformulation_report
    view, written as DVC metrics to paths.metrics/reformulation_report.json)."""
    from pipeline.reformulate.report import write_report

    path, data = write_report(params, root=root)
    for method, m in data.items():
        click.echo(f"{method}: {m['parents_tried']} parents tried, {m['reformulations']} reformulations, "
                   f"{m['rejected']} rejected")
        for pid, p in m["policies"].items():
            shift = p["mean_pass_rate_shift"]
            click.echo(f"  {pid}: {p['parents_with_learnable_child']} parents with a learnable child; "
                       f"mean shift {shift:+.3f} ({p['children_measured']} children measured)")
    click.echo(f"report: {path}")
