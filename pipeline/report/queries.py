"""What the report shows, read from the catalog's views (pipeline/views) over every set's tables.

Each summary is one bounded query: counts per policy and band, a histogram in 20 bins, the first
``listed`` rows of a list. The per-item data is streamed (:mod:`pipeline.report.items`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.catalog import open_views
from pipeline.config import Params

MEMORY_LIMIT_MB = 512  # DuckDB's limit for the sorts and joins; it spills to a temp folder past it
BINS = 20  # pass-rate histogram bins
SCATTER_POINTS = 2000  # source difficulty vs ours: at most this many points (a stable sample by problem_id hash)
SNIPPET = 300  # characters of a completion or question shown in a list


def open_tables(params: Params, *, root: Path, temp_dir: Path) -> duckdb.DuckDBPyConnection:
    """The catalog's views over every set's tables, under :data:`MEMORY_LIMIT_MB`."""
    return open_views(params, root=root, temp_dir=temp_dir, memory_limit_mb=MEMORY_LIMIT_MB)


def _stable(v):
    """A float to 10 significant digits: DuckDB's parallel sums add in any order, so an average's last bits vary
    run to run, and the report must be byte-identical for the same tables (DVC hashes it)."""
    return float(f"{v:.10g}") if isinstance(v, float) else v


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> list[dict]:
    rel = con.execute(sql, params or {})
    names = [d[0] for d in rel.description]
    return [{n: _stable(v) for n, v in zip(names, r, strict=True)} for r in rel.fetchall()]


@dataclass
class Summary:
    """Every table and chart input of the report's overview, each a list of view rows."""

    policies: list[dict] = field(default_factory=list)
    band_counts: list[dict] = field(default_factory=list)
    histogram: list[dict] = field(default_factory=list)
    flag_quality: list[dict] = field(default_factory=list)
    flags_by_band: list[dict] = field(default_factory=list)
    source_agreement: list[dict] = field(default_factory=list)
    source_points: list[dict] = field(default_factory=list)
    rare_successes: list[dict] = field(default_factory=list)
    unsupported: list[dict] = field(default_factory=list)
    flagged_correct: list[dict] = field(default_factory=list)
    suspect_golds: list[dict] = field(default_factory=list)  # the first ``listed`` rows of the suspect_golds view
    reformulation: list[dict] = field(default_factory=list)
    rungs: dict[str, dict] = field(default_factory=dict)  # method -> its ladder (reformulate.json's "methods")
    drift: list[dict] = field(default_factory=list)  # (policy_from, policy_to, band_from, band_to, problems)
    bands: list[str] = field(default_factory=list)
    colours: dict[str, str] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


def summary(con: duckdb.DuckDBPyConnection, *, listed: int, rungs: dict[str, dict] | None = None) -> Summary:
    """The overview's numbers, each from its view (``listed``: rows per list of suspicious items); ``rungs``: per
    reformulation method, the ladder's counts from the reformulate stage's metrics (absent: not shown)."""
    s = Summary(rungs=dict(rungs or {}))
    band_rows = rows(con, "SELECT band, colour FROM bands ORDER BY band_order")
    s.bands = [r["band"] for r in band_rows]
    s.colours = {r["band"]: r["colour"] for r in band_rows}
    s.policies = rows(con, "SELECT policy_id, any_value(name) AS name, any_value(model) AS model FROM policies "
                           "GROUP BY policy_id ORDER BY name, policy_id")
    s.band_counts = rows(con, 'SELECT * FROM band_counts JOIN bands USING (band) ORDER BY policy, policy_id, "set", '
                              "band_order")
    s.histogram = rows(con, f"""
        SELECT policy_id, band, least(floor(pass_rate * {BINS}), {BINS - 1}) / {BINS} AS bin, count(*) AS problems,
               avg(ci_high - ci_low) AS mean_interval_width
        FROM difficulty GROUP BY ALL ORDER BY policy_id, bin, band""")
    s.flag_quality = rows(con, "SELECT * FROM flag_quality")
    s.flags_by_band = rows(con, "SELECT * FROM flags_by_band")
    s.source_agreement = rows(con, "SELECT * FROM source_difficulty_agreement")
    s.source_points = rows(con, f"""
        SELECT problem_id, source, measure, source_difficulty, policy_id, policy, pass_rate, band FROM source_difficulty
        ORDER BY hash(problem_id), policy_id LIMIT {SCATTER_POINTS}""")
    s.rare_successes = rows(con, f"""
        SELECT problem_id, policy, sample_idx, advantage, n_correct, n, left(question, {SNIPPET}) AS question, gold,
               left(completion, {SNIPPET}) AS completion
        FROM rare_successes ORDER BY advantage DESC, problem_id, policy_id, sample_idx LIMIT $n""", {"n": listed})
    s.unsupported = rows(con, f"""
        SELECT f.problem_id, pol.name AS policy, f.sample_idx, v.status, v.extracted, p.answer AS gold,
               left(f.evidence, {SNIPPET}) AS evidence
        FROM flags f
        JOIN difficulty d ON d.problem_id = f.problem_id AND d.policy_id = f.policy_id
        JOIN problems p ON p.problem_id = f.problem_id
        LEFT JOIN verdicts v ON v.problem_id = f.problem_id AND v.policy_id = f.policy_id
                            AND v.sample_idx = f.sample_idx AND v.verifier_id = d.verifier_id
        LEFT JOIN (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id) pol
               ON pol.policy_id = f.policy_id
        WHERE f.flag = 'unsupported_answer'
        ORDER BY v.status = 'correct' DESC, f.problem_id, f.policy_id, f.sample_idx LIMIT $n""", {"n": listed})
    s.flagged_correct = rows(con, "SELECT * FROM flagged_correct WHERE flagged_share > 0 "
                                 "ORDER BY flagged_share DESC, problem_id, policy_id LIMIT $n", {"n": listed})
    s.suspect_golds = rows(con, f"""
        SELECT problem_id, policy, gold_suspicion, gold, modal_answer, modal_share, n, n_correct, suspect_policies,
               gold_issues, source, left(question, {SNIPPET // 2}) AS question
        FROM suspect_golds LIMIT $n""", {"n": listed})
    s.reformulation = rows(con, "SELECT r.*, pol.name AS policy FROM reformulation_report r LEFT JOIN "
                                "(SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id) pol "
                                "USING (policy_id)")
    s.drift = rows(con, """
        SELECT policy_from, policy_to, band_from, band_to, count(*) AS problems
        FROM drift WHERE policy_from < policy_to  -- each pair once (the view holds both directions)
        GROUP BY ALL ORDER BY ALL""")
    s.totals = rows(con, """
        SELECT (SELECT count(*) FROM problems) AS problems, (SELECT count(*) FROM difficulty) AS measured,
               (SELECT count(*) FROM rollouts) AS rollouts, (SELECT count(*) FROM flags) AS flags,
               (SELECT count(DISTINCT problem_id) FROM suspect_golds) AS suspect_golds""")[0]
    # the wrong keys the score expects (its posteriors summed, one per problem): in all, among the flagged
    s.totals.update(rows(con, """
        SELECT count(*) AS scored, coalesce(sum(gold_suspicion), 0) AS expected_wrong_keys,
               coalesce(sum(gold_suspicion) FILTER (WHERE gold_suspect), 0) AS expected_among_suspect
        FROM answer_keys""")[0])
    return s
