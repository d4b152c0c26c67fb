"""The item browser's data, streamed: one record per problem (both table sets), never the whole rollouts table.

Two queries sorted by ``problem_id`` are merged here one item at a time: the items (problem, its measurements
by every policy, its children, the flags seen on it) and the shown rollouts (the first ones counted in each
pass rate, at most ``max_rollouts`` per item and policy, with the verdict of the verifier the difficulty row
names and the flags that fired). DuckDB sorts the shown rollouts' keys under its memory limit, spilling past it;
their text is gathered into buckets and read back one bucket at a time (pipeline/text_gather.py), never sorted.
A record (what ``items/NNNNN.js`` holds)::

    {"id": "p_1c2e...", "source": "synthetic", "split": "train", "question": "What is 52 - 27?", "gold": "25",
     "parent": null, "method": null, "children": [{"id": "p_9a...", "method": "fobar"}],
     "policies": [{"policy": "smollm2-135m-3shot", "band": "learnable", "pass_rate": 0.5, "ci": [0.22, 0.78],
                   "n": 8, "n_correct": 4, "band_confidence": 0.71, "gold_suspicion": 0.02, "gold_suspect": false,
                   "answers": [["25", "correct", 4], ["27", "incorrect", 3], [null, "no_answer", 1]],
                   "distinct_answers": 3, "shown": 8,
                   "rollouts": [{"i": 0, "thinking": null, "final": " 25.", "extracted": "25", "verdict": "correct",
                                 "finish": "stop", "flags": [{"flag": "truncated", "evidence": "..."}]}]}]}
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb

from pipeline import text_gather
from pipeline.thinking import split as split_thinking

BUCKET_BYTES = text_gather.BUCKET_BYTES  # shown text gathered per bucket

ANSWERS_SHOWN = 6  # per item and policy: the most frequent extracted answers of the counted rollouts

ITEMS_SQL = f"""
WITH pol AS (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id),
answer_counts AS (  -- the counted rollouts' extracted answers, with the verdict of the verifier the row names
    SELECT v.problem_id, v.policy_id, v.extracted, v.status, count(*) AS n
    FROM difficulty d
    JOIN verdicts v ON v.problem_id = d.problem_id AND v.policy_id = d.policy_id AND v.verifier_id = d.verifier_id
                   AND v.sample_idx < d.n
    GROUP BY ALL
),
answers AS (
    SELECT problem_id, policy_id,
           list({{'answer': extracted, 'status': status, 'n': n}} ORDER BY n DESC, extracted NULLS LAST, status)
             [1:{ANSWERS_SHOWN}] AS answers,
           count(*) AS distinct_answers
    FROM answer_counts GROUP BY ALL
),
meas AS (
    SELECT d.problem_id, list({{'policy': coalesce(pol.name, d.policy_id), 'policy_id': d.policy_id, 'band': d.band,
                               'pass_rate': d.pass_rate, 'ci_low': d.ci_low, 'ci_high': d.ci_high, 'n': d.n,
                               'n_correct': d.n_correct, 'band_confidence': d.band_confidence,
                               'gold_suspicion': d.gold_suspicion, 'gold_suspect': d.gold_suspect,
                               'answers': coalesce(a.answers, []), 'distinct_answers': coalesce(a.distinct_answers, 0)}}
                              ORDER BY coalesce(pol.name, d.policy_id), d.policy_id) AS measures
    FROM difficulty d LEFT JOIN pol USING (policy_id) LEFT JOIN answers a USING (problem_id, policy_id)
    GROUP BY d.problem_id
),
kids AS (
    SELECT parent_id AS problem_id, list({{'id': problem_id, 'method': method}} ORDER BY problem_id) AS children
    FROM problems WHERE parent_id IS NOT NULL GROUP BY parent_id
),
seen AS (SELECT problem_id, list(DISTINCT flag ORDER BY flag) AS flags FROM flags GROUP BY problem_id)
SELECT p.problem_id, p.source, p.split, p.question, p.answer, p.solution, p.parent_id, p.method,
       coalesce(m.measures, []) AS measures, coalesce(k.children, []) AS children, coalesce(s.flags, []) AS flags
FROM problems p
LEFT JOIN meas m USING (problem_id) LEFT JOIN kids k USING (problem_id) LEFT JOIN seen s USING (problem_id)
ORDER BY p.problem_id
"""

SHOWN_SQL = """
CREATE OR REPLACE TABLE _shown AS
WITH f AS (
    SELECT problem_id, policy_id, sample_idx, list({{'flag': flag, 'evidence': evidence}} ORDER BY flag) AS flags
    FROM flags GROUP BY ALL
), s AS (
    SELECT row_number() OVER (ORDER BY r.problem_id, r.policy_id, r.sample_idx, r.file, r.file_row) - 1 AS pos,
           r.problem_id, r.policy_id, r.sample_idx, r.finish_reason, r.size, r.file, r.file_row, v.status,
           v.extracted, coalesce(f.flags, []) AS flags
    FROM difficulty d
    JOIN _report_keys r ON r.problem_id = d.problem_id AND r.policy_id = d.policy_id AND r.sample_idx < least(d.n, $max)
    LEFT JOIN verdicts v ON v.problem_id = r.problem_id AND v.policy_id = r.policy_id AND v.sample_idx = r.sample_idx
                        AND v.verifier_id = d.verifier_id
    LEFT JOIN f ON f.problem_id = r.problem_id AND f.policy_id = r.policy_id AND f.sample_idx = r.sample_idx
)
SELECT *, {bucket_sql} FROM s
"""


def _shown(con: duckdb.DuckDBPyConnection, *, max_rollouts: int, files: list[str], spill: Path) -> Iterator[dict]:
    """The shown rollouts in (problem, policy, sample) order, each with its completion: DuckDB sorts their keys
    (the table ``_shown``, no text), the text is gathered into buckets under ``spill`` (pipeline/text_gather.py)."""
    if not files:
        return
    bucket = text_gather.register_keys(con, files, name="_report_keys", bucket=BUCKET_BYTES)
    con.execute(SHOWN_SQL.format(bucket_sql=text_gather.BUCKET_SQL), {"max": max_rollouts, "bucket": bucket})
    text_gather.scatter(con, "_shown", spill)
    keys = text_gather.rows_in_order(con, "SELECT pos, bucket, problem_id, policy_id, sample_idx, finish_reason, "
                                          "status, extracted, flags FROM _shown ORDER BY pos")
    try:
        for r, completion in text_gather.with_text(keys, spill, what="report"):
            yield {**r, "completion": completion}
    finally:
        con.execute("DROP TABLE IF EXISTS _shown")


def _rollout(r: dict) -> dict:
    t = split_thinking(r["completion"] or "")
    return {"i": r["sample_idx"], "thinking": t.thinking, "final": t.final, "closed": t.closed,
            "extracted": r["extracted"], "verdict": r["status"] or "unverified", "finish": r["finish_reason"],
            "flags": r["flags"]}


def _record(item: dict, rollouts: list[dict]) -> dict:
    by_policy: dict[str, list[dict]] = {}
    for r in rollouts:
        by_policy.setdefault(r["policy_id"], []).append(_rollout(r))
    policies = []
    for m in item["measures"]:
        shown = by_policy.get(m["policy_id"], [])
        policies.append({"policy": m["policy"], "policy_id": m["policy_id"], "band": m["band"],
                         "pass_rate": m["pass_rate"], "ci": [m["ci_low"], m["ci_high"]], "n": m["n"],
                         "n_correct": m["n_correct"], "band_confidence": m["band_confidence"],
                         "gold_suspicion": m["gold_suspicion"], "gold_suspect": bool(m["gold_suspect"]),
                         "answers": [[a["answer"], a["status"], a["n"]] for a in m["answers"]],
                         "distinct_answers": m["distinct_answers"], "shown": len(shown), "rollouts": shown})
    return {"id": item["problem_id"], "source": item["source"], "split": item["split"], "question": item["question"],
            "gold": item["answer"], "solution": item["solution"], "parent": item["parent_id"],
            "method": item["method"], "children": item["children"], "flags": item["flags"], "policies": policies}


def records(con: duckdb.DuckDBPyConnection, *, max_rollouts: int, files: list[str], spill: Path) -> Iterator[dict]:
    """Every problem's record, in ``problem_id`` order, with at most ``max_rollouts`` rollouts per policy.

    ``files``: every set's rollouts shards (:func:`pipeline.catalog.rollout_files`); ``spill``: a folder for the
    text's buckets. The items and the shown rollouts stream side by side, each on its own cursor of ``con``."""
    items = text_gather.rows_in_order(con.cursor(), ITEMS_SQL)
    samples = _shown(con.cursor(), max_rollouts=max_rollouts, files=files, spill=spill)
    pending = next(samples, None)
    for item in items:
        pid = item["problem_id"]
        while pending is not None and pending["problem_id"] < pid:  # a rollout of no known problem: not shown
            pending = next(samples, None)
        group = []
        while pending is not None and pending["problem_id"] == pid:
            group.append(pending)
            pending = next(samples, None)
        yield _record(item, group)
