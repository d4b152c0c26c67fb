"""``passband drift``: how bands moved from one policy snapshot to another (pipeline/annotate/drift.py).

Reads the set's difficulty and policies tables; prints the band transition matrix and the
credible changes; writes the matrix as a PNG under paths.plots and the counts as DVC metrics
(paths.metrics/drift.json, one entry per pair). Pairs come from --from/--to or from ``drift.pairs``.
"""

from __future__ import annotations

from pathlib import Path

import click
import pyarrow.compute as pc

from pipeline.annotate.drift import drift, matrix_png, render_matrix, summary
from pipeline.cli_options import with_params
from pipeline.config import ConfigError, Params
from pipeline.io import atomic_write_bytes, path_in, read_table, write_metrics
from pipeline.run_metrics import RunStats
from pipeline.tablesets import SETS, table_set


def policy_ids(params: Params, root: Path, set_name: str, ref: str) -> str:
    """A policy name or policy_id -> the policy_id measured in this set (an ambiguous or unknown name is an error)."""
    ts = table_set(params, set_name)
    pols = read_table(ts.dir("policies", root), name="policies", columns=["policy_id", "name"])
    ids = pols.column("policy_id").to_pylist()
    if ref in ids:
        return ref
    named = sorted({i for i, n in zip(ids, pols.column("name").to_pylist(), strict=True) if n == ref})
    if len(named) == 1:
        return named[0]
    if named:
        raise ConfigError(f"policy name {ref!r} names several snapshots {named}; pass one policy_id")
    raise ConfigError(f"unknown policy {ref!r} in {ts.dir('policies', root)}; known: "
                      f"{', '.join(sorted(set(pols.column('name').to_pylist())))}")


def run(params: Params, *, root: Path, set_name: str = "main", pairs: list[tuple[str, str]] | None = None) -> dict:
    ts = table_set(params, set_name)
    pairs = pairs if pairs is not None else [tuple(p) for p in params.drift.pairs]
    difficulty = read_table(ts.dir("difficulty", root), name="difficulty")
    out: dict = {}
    for a, b in pairs:
        ia, ib = policy_ids(params, root, set_name, a), policy_ids(params, root, set_name, b)
        rows = drift(difficulty, policy_from=ia, policy_to=ib)
        s = summary(rows)
        name = f"{a}->{b}"
        s["text"] = render_matrix(s["transitions"], label_from=a, label_to=b)
        # the names come from the policies table or the command line: path_in refuses one that would lead out
        png = path_in(root / params.paths.plots, f"drift-{a}-{b}{'' if set_name == 'main' else '-' + set_name}.png")
        atomic_write_bytes(png, matrix_png(s["transitions"], label_from=a, label_to=b))
        s["png"], s["rows"] = str(png.relative_to(root)), rows
        out[name] = s
    metrics = {k: {m: v for m, v in s.items() if m not in ("text", "rows", "png")} for k, s in out.items()}
    write_metrics(ts.metrics_file("drift", root), RunStats.of({"pairs": metrics}), root=root)
    return out


@click.command()
@with_params
@click.option("--from", "from_", help="Policy (name or policy_id) the bands moved from.")
@click.option("--to", help="Policy they moved to.")
@click.option("--set", "set_name", type=click.Choice(SETS), default="main", show_default=True)
@click.option("--show", default=10, show_default=True, help="Credible changes to list.")
def command(*, params, root, from_: str | None, to: str | None, set_name: str, show: int) -> None:
    """Band drift between two policies: transition matrix, credible rises/falls (P >= 0.95), PNG and metrics.

    Without --from/--to, every pair in drift.pairs of params.yaml.
    """
    if (from_ is None) != (to is None):
        raise click.UsageError("give both --from and --to, or neither (drift.pairs)")
    res = run(params, root=root, set_name=set_name, pairs=[(from_, to)] if from_ else None)
    if not res:
        click.echo("drift: no pairs (drift.pairs is empty; pass --from A --to B)")
    for name, s in res.items():
        click.echo(f"drift {name}: {s['problems']} problems, {s['band_changed']} changed band, "
                   f"{s['credible_rose']} credibly rose, {s['credible_fell']} credibly fell; {s['png']}")
        click.echo(s["text"])
        rows = s["rows"]
        moved = rows.filter(pc.not_equal(rows.column("change"), "none")).to_pylist()[:show]
        for r in moved:
            click.echo(f"  {r['problem_id']}  {r['band_from']} {r['n_correct_from']}/{r['n_from']} -> "
                       f"{r['band_to']} {r['n_correct_to']}/{r['n_to']}  P(rose) {r['p_rose']:.3f} {r['change']}")
