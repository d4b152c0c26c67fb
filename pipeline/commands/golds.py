"""``passband golds``: the review queue of suspect answer keys, a file a person works through.

One row per problem, most suspect first: its source, question, gold and the gold lint's findings
(``gold_issues``), ``gold_suspicion`` (the probability that the key is wrong, pipeline/annotate/gold_suspicion.py),
``gold_suspect``, ``expected_precision`` (the mean score of this row and the ones above it: the share of wrong keys
the score expects among them, where a reviewer can choose to stop), and per policy its pass rate and answer
distribution (every extracted answer of the counted rollouts with its verdict and count, most frequent first). Two
empty columns are for the reviewer: ``review`` (``key_ok``, ``key_wrong`` or ``unsure``) and ``corrected_gold``. By
default the flagged problems; ``--min-score`` adds every problem scored at least that. Read-only over the catalog's
views; the file is written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import polars as pl

from pipeline.catalog import query
from pipeline.cli_options import with_params
from pipeline.io import atomic_path

QUEUE_SQL = """
WITH pol AS (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id),
queued AS (SELECT * FROM answer_keys WHERE gold_suspect OR gold_suspicion >= $min_score),
answers AS (
    SELECT d.problem_id, coalesce(pol.name, d.policy_id) AS policy, d.pass_rate, d.n, v.extracted, v.status,
           count(*) AS rollouts
    FROM difficulty d
    JOIN verdicts v ON v.problem_id = d.problem_id AND v.policy_id = d.policy_id AND v.verifier_id = d.verifier_id
                   AND v.sample_idx < d.n
    LEFT JOIN pol ON pol.policy_id = d.policy_id
    WHERE d.problem_id IN (SELECT problem_id FROM queued)
    GROUP BY ALL
),
per_policy AS (
    SELECT problem_id, policy, any_value(pass_rate) AS pass_rate, any_value(n) AS n,
           list({'answer': extracted, 'verdict': status, 'rollouts': rollouts}
                ORDER BY rollouts DESC, extracted NULLS LAST, status) AS answers
    FROM answers GROUP BY problem_id, policy
)
SELECT q.problem_id, any_value(p.source) AS source, any_value(p.question) AS question, any_value(p.answer) AS gold,
       any_value(p.gold_issues) AS gold_issues, round(any_value(q.gold_suspicion), 4) AS gold_suspicion,
       any_value(q.gold_suspect) AS gold_suspect,
       round(avg(any_value(q.gold_suspicion)) OVER (ORDER BY any_value(q.gold_suspicion) DESC, q.problem_id
                                                     ROWS UNBOUNDED PRECEDING), 4) AS expected_precision,
       list({'policy': pp.policy, 'pass_rate': pp.pass_rate, 'n': pp.n, 'answers': pp.answers} ORDER BY pp.policy)
         AS policies,
       NULL::VARCHAR AS review, NULL::VARCHAR AS corrected_gold
FROM queued q JOIN problems p USING (problem_id) JOIN per_policy pp USING (problem_id)
GROUP BY q.problem_id
ORDER BY gold_suspicion DESC, q.problem_id
LIMIT $limit
"""

FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def review_queue(params, *, root: Path, min_score: float = 1.0, limit: int = 10_000) -> pl.DataFrame:
    """The queue's rows (see the module's doc): the flagged problems, and every one scored at least ``min_score``."""
    sql = QUEUE_SQL.replace("$min_score", repr(float(min_score))).replace("$limit", str(int(limit)))
    return query(params, sql, root=root)


def write_queue(df: pl.DataFrame, out: Path) -> None:
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise click.BadParameter(f"{out.name}: the queue is written as .jsonl, .csv or .parquet", param_hint="--out")
    with atomic_path(out) as tmp:
        if fmt == "jsonl":
            df.write_ndjson(tmp)
        elif fmt == "parquet":
            df.write_parquet(tmp)
        else:  # a spreadsheet: the nested columns as JSON text
            flat = df.with_columns(pl.Series("policies", [json.dumps(p, ensure_ascii=False) for p in df["policies"]
                                                          .to_list()], dtype=pl.String),
                                   pl.col("gold_issues").list.join("; ") if df.schema["gold_issues"] == pl.List(pl.String)
                                   else pl.col("gold_issues"))
            flat.write_csv(tmp)


@click.command()
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The queue's file: .jsonl (one problem a line), .csv (a spreadsheet; the answers as JSON text) "
                   "or .parquet.")
@click.option("--min-score", type=click.FloatRange(0, 1), default=1.0, show_default=True,
              help="Also queue every problem whose gold_suspicion is at least this (default: only the flagged ones).")
@click.option("--limit", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="At most this many problems, the most suspect first.")
@with_params
def golds(*, out: Path, min_score: float, limit: int, params, root) -> None:
    """Write the review queue of suspect answer keys: per problem the gold, the lint's findings, the probability that
    the key is wrong, each policy's answer distribution, and empty review / corrected_gold columns to fill in."""
    df = review_queue(params, root=root, min_score=min_score, limit=limit)
    write_queue(df, out)
    expected = float(df["gold_suspicion"].sum() or 0.0) if df.height else 0.0
    click.echo(f"golds: {df.height} problems queued in {out} (the score expects {expected:.2f} wrong keys among them); "
               "fill in review (key_ok, key_wrong, unsure) and corrected_gold")
