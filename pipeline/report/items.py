"""The item browser's data, streamed: one record per problem (both table sets), never the whole rollouts table.

Two queries sorted by ``problem_id`` are merged here one item at a time: the items (problem, its measurements
by every policy, its children, the flags seen on it) and the shown rollouts (the first ones counted in each
pass rate, at most ``max_rollouts`` per item and policy, with the verdict of the verifier the difficulty row
names and the flags that fired). DuckDB sorts under its memory limit, spilling past it.
A record (what ``items/NNNNN.js`` holds)::

    {"id": "p_1c2e...", "source": "synthetic", "split": "train", "question": "What is 52 - 27?", "gold": "25",
     "parent": null, "method": null, "children": [{"id": "p_9a...", "method": "fobar"}],
     "policies": [{"policy": "smollm2-135m-3shot", "band": "learnable", "pass_rate": 0.5, "ci": [0.22, 0.78],
                   "n": 8, "n_correct": 4, "band_confidence": 0.71, "shown": 8,
                   "rollouts": [{"i": 0, "thinking": null, "final": " 25.", "extracted": "25", "verdict": "correct",
                                 "finish": "stop", "flags": [{"flag": "truncated", "evidence": "..."}]}]}]}
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

from pipeline.thinking import split as split_thinking

BATCH = 2048  # rows fetched from DuckDB at a time

ITEMS_SQL = """
WITH pol AS (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id),
meas AS (
    SELECT d.problem_id, list({'policy': coalesce(pol.name, d.policy_id), 'policy_id': d.policy_id, 'band': d.band,
                               'pass_rate': d.pass_rate, 'ci_low': d.ci_low, 'ci_high': d.ci_high, 'n': d.n,
                               'n_correct': d.n_correct, 'band_confidence': d.band_confidence}
                              ORDER BY coalesce(pol.name, d.policy_id), d.policy_id) AS measures
    FROM difficulty d LEFT JOIN pol USING (policy_id) GROUP BY d.problem_id
),
kids AS (
    SELECT parent_id AS problem_id, list({'id': problem_id, 'method': method} ORDER BY problem_id) AS children
    FROM problems WHERE parent_id IS NOT NULL GROUP BY parent_id
),
seen AS (SELECT problem_id, list(DISTINCT flag ORDER BY flag) AS flags FROM flags GROUP BY problem_id)
SELECT p.problem_id, p.source, p.split, p.question, p.answer, p.solution, p.parent_id, p.method,
       coalesce(m.measures, []) AS measures, coalesce(k.children, []) AS children, coalesce(s.flags, []) AS flags
FROM problems p
LEFT JOIN meas m USING (problem_id) LEFT JOIN kids k USING (problem_id) LEFT JOIN seen s USING (problem_id)
ORDER BY p.problem_id
"""

ROLLOUTS_SQL = """
WITH f AS (
    SELECT problem_id, policy_id, sample_idx, list({'flag': flag, 'evidence': evidence} ORDER BY flag) AS flags
    FROM flags GROUP BY ALL
)
SELECT r.problem_id, r.policy_id, r.sample_idx, r.completion, r.finish_reason, v.status, v.extracted,
       coalesce(f.flags, []) AS flags
FROM difficulty d
JOIN rollouts r ON r.problem_id = d.problem_id AND r.policy_id = d.policy_id AND r.sample_idx < least(d.n, $max)
LEFT JOIN verdicts v ON v.problem_id = r.problem_id AND v.policy_id = r.policy_id AND v.sample_idx = r.sample_idx
                    AND v.verifier_id = d.verifier_id
LEFT JOIN f ON f.problem_id = r.problem_id AND f.policy_id = r.policy_id AND f.sample_idx = r.sample_idx
ORDER BY r.problem_id, r.policy_id, r.sample_idx
"""


def _stream(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> Iterator[dict]:
    for batch in con.sql(sql, params=params or {}).to_arrow_reader(BATCH):
        yield from batch.to_pylist()


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
                         "n_correct": m["n_correct"], "band_confidence": m["band_confidence"], "shown": len(shown),
                         "rollouts": shown})
    return {"id": item["problem_id"], "source": item["source"], "split": item["split"], "question": item["question"],
            "gold": item["answer"], "solution": item["solution"], "parent": item["parent_id"],
            "method": item["method"], "children": item["children"], "flags": item["flags"], "policies": policies}


def records(con: duckdb.DuckDBPyConnection, *, max_rollouts: int) -> Iterator[dict]:
    """Every problem's record, in ``problem_id`` order, with at most ``max_rollouts`` rollouts per policy.

    Both queries run on their own cursor of ``con`` so they stream side by side."""
    items = _stream(con.cursor(), ITEMS_SQL)
    samples = _stream(con.cursor(), ROLLOUTS_SQL, {"max": max_rollouts})
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
