"""``passband summary``: what the last `dvc repro` produced, in a few short tables.

Band counts per policy (main problems and reformulations apart), each flag's rate next to its measured
precision and recall, the reformulation report, for imported policies the agreement of the dump's own grader
with passband's verdicts,
the suspect golds per policy, and how to load the published folder. Read-only: it queries the catalog's views.
"""

from __future__ import annotations

import click
import polars as pl

from pipeline.bands import LEARNABLE
from pipeline.catalog import query
from pipeline.cli_options import with_params
from pipeline.publish import read_build_info

BANDS = """
SELECT policy, "set", band, problems, round(mean_pass_rate, 3) AS mean_pass_rate,
       round(mean_band_confidence, 3) AS mean_band_confidence
FROM band_counts JOIN bands USING (band) ORDER BY policy, "set", band_order
"""

REPORT = """
SELECT method, parents_tried, children_kept AS kept, parents_with_learnable_child AS learnable_parents,
       round(share_parents_with_learnable_child, 3) AS share, round(mean_pass_rate_shift, 3) AS mean_shift,
       '[' || round(shift_ci_low, 3) || ', ' || round(shift_ci_high, 3) || ']' AS shift_95ci,
       round(reward_density_before, 3) AS density_before, round(reward_density_after, 3) AS density_after
FROM reformulation_report ORDER BY method = '(any)', method
"""

# per problem (the score is one per problem, pooled over its policies): how many are suspect, and how many wrong
# keys the score expects among them and in all
SUSPECTS = """
SELECT count(*) FILTER (WHERE gold_suspect) AS suspect, count(*) AS scored,
       round(sum(gold_suspicion) FILTER (WHERE gold_suspect), 2) AS among, round(sum(gold_suspicion), 2) AS expected
FROM answer_keys
"""

# per imported policy: its samples that the dump graded too, and how often the dump's grader and passband agree
IMPORTS = """
SELECT pol.name AS policy, count(*) AS graded_by_both,
       count(*) FILTER (WHERE u.upstream_correct = (v.status = 'correct')) AS agree,
       round(count(*) FILTER (WHERE u.upstream_correct = (v.status = 'correct')) / count(*), 4) AS agreement,
       count(*) FILTER (WHERE u.upstream_correct AND v.status <> 'correct') AS only_upstream_correct,
       count(*) FILTER (WHERE NOT u.upstream_correct AND v.status = 'correct') AS only_passband_correct
FROM upstream u JOIN difficulty d USING (problem_id, policy_id)
     JOIN verdicts v ON v.problem_id = u.problem_id AND v.policy_id = u.policy_id AND v.sample_idx = u.sample_idx
                    AND v.verifier_id = d.verifier_id
     JOIN policies pol ON pol.policy_id = u.policy_id
WHERE u.sample_idx < d.n
GROUP BY 1 ORDER BY 1
"""

# each flag's rate next to the precision and recall measured on the labelled set (the flag_quality view)
FLAGS = "SELECT * FROM flag_quality"


def _show(title: str, df: pl.DataFrame | None) -> None:
    click.echo(f"\n{title}")
    if df is None or df.is_empty():
        click.echo("  (nothing yet)")
        return
    with pl.Config(tbl_rows=50, tbl_cols=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_width_chars=160):
        click.echo(str(df))


@click.command()
@with_params
def summary(*, params, root) -> None:
    """Print band counts per policy, flag rates with their measured precision, the reformulation report, the suspect
    answer keys (gold_suspect, with the wrong keys the score expects) and how to load the published dataset."""
    _show("Difficulty bands (band_counts view: the main set and the reformulated set apart)", query(params, BANDS, root=root))
    _show("Flags (flag_quality view; precision/recall measured on labelled completions, docs/flags.md)",
          query(params, FLAGS, root=root))
    _show("Reformulation (reformulation_report view)", query(params, REPORT, root=root))
    imports = query(params, IMPORTS, root=root)
    if imports is not None and not imports.is_empty():
        _show("Imported policies: the dump's own grader against passband's verdicts (upstream view)", imports)
    k = query(params, SUSPECTS, root=root).row(0, named=True)
    line = (f"{k['suspect']} of {k['scored']} problems; the score expects {k['among'] or 0.0} wrong keys among them, "
            f"{k['expected']} in all (passband golds --out FILE: the review queue)") if k["scored"] else "(nothing yet)"
    click.echo(f"\nSuspect answer keys (suspect_golds view): {line}")
    folder = root / params.paths.published
    build = folder / "build.json"
    click.echo("\nPublished dataset")
    if not build.is_file():
        click.echo("  (not built yet: passband publish)")
        return

    rows = read_build_info(folder).get("rows", {})
    click.echo("  " + ", ".join(f"{c}: {n}" for c, n in rows.items()))
    cfg = LEARNABLE if rows.get(LEARNABLE) else "default"
    click.echo(f'  load it:  datasets.load_dataset("{params.paths.published}", "{cfg}")')
    click.echo("  SQL:      passband sql \"SELECT band, count(*) FROM difficulty GROUP BY 1\"")
    click.echo("  push it:  passband push --repo-id ORG/NAME --dry-run")
