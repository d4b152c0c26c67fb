"""Annotate core: verdicts + rollouts + problems in, ``flags`` and ``difficulty`` out, in DuckDB.

The core works on a DuckDB connection that has the input tables as views (``verdicts``,
``rollouts``, ``problems``: Parquet globs in the stage, Arrow tables in tests) and touches no
files. Everything row-wise runs inside DuckDB, streaming and under its memory limit; Python
only sees (a) the distinct (n, n_correct) pairs, whose statistics it computes once each
(:mod:`pipeline.pass_rate_stats`, :mod:`pipeline.bands`), and (b) the candidate rows
of each flag detector (:mod:`pipeline.annotate.detectors`). One real difficulty row::

    "What is 52 - 27?"  n 8, n_correct 1, pass_rate 0.125, ci [0.014, 0.454], band too_hard,
    band_confidence 0.66, pass_at_k {1: 0.125, 2: 0.25, 4: 0.5, 8: 1.0}, learnability 0.109

Steps: :func:`prepare` (group counts; the views of the two sides), :func:`flag_batches` (candidates as ``samples``
rows, then the detectors),
:func:`difficulty_sql` (the final SELECT, given a relation holding the flag hits), :func:`difficulty_batches`
(its rows as batches of the declared schema).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.annotate import gold_suspicion
from pipeline.annotate.detector_pool import pooled_detectors
from pipeline.annotate.detectors import check_options, get_detectors
from pipeline.annotate.flag_runner import (
    HITS_SCHEMA,
    REF_STEPS_SQL,
    SAMPLE_COLUMNS,
    STEPS_SQL,
    Detector,
    FlagCounts,
    candidate_keys_sql,
    candidate_sql,
    sql_hits_sql,
    sql_literal,
)
from pipeline.bands import assign_band, band_confidence
from pipeline.config import AnnotateConfig, ConfigError
from pipeline.pass_rate_stats import group_stats
from pipeline.schema import schema


def flag_options(config: AnnotateConfig) -> dict[str, dict[str, Any]]:
    """The detectors' knobs: ``annotate.options`` (detector name -> its knobs), checked, with rare_success's threshold
    from its own key (annotate.rare_success_max_pass_rate: the card and the docs name it; refused here)."""
    options = {name: dict(knobs or {}) for name, knobs in config.options.items()}
    if "max_pass_rate" in options.get("rare_success", {}):
        raise ConfigError("annotate.options.rare_success.max_pass_rate: set annotate.rare_success_max_pass_rate "
                          "instead (its one home)")
    options.setdefault("rare_success", {})["max_pass_rate"] = config.rare_success_max_pass_rate
    check_options(options)
    return options


@dataclass
class Annotation:
    """What :func:`prepare` set up on the connection."""

    con: duckdb.DuckDBPyConnection
    config: AnnotateConfig
    verifier_id: str
    detectors: list[Detector]  # each built with its knobs (annotate.options.<name>)
    counts: FlagCounts = field(default_factory=lambda: FlagCounts({}, {}))
    gold_model: gold_suspicion.GoldModel | None = None  # behind difficulty.gold_suspicion

    @property
    def n_groups(self) -> int:
        return self.con.execute("SELECT count(*) FROM _groups").fetchone()[0]

    @property
    def n_samples(self) -> int:
        return self.con.execute("SELECT coalesce(sum(n), 0) FROM _groups").fetchone()[0]


def prepare(con: duckdb.DuckDBPyConnection, *, config: AnnotateConfig, verifier_id: str,
            selection: str | None = None) -> Annotation:
    """Group counts (``_groups``), the stats of each distinct (n, n_correct) (``_lut``) and the two sides' views
    (``rollout_samples``, ``verdict_samples``) that the detectors' candidate scans read.

    ``selection`` names a relation of :data:`pipeline.annotate.selection.SELECTION_SCHEMA`: only the samples
    0..n-1 it selects per (problem, policy) count. None: every verdict of ``verifier_id`` (budget ``none``)."""
    detectors = get_detectors(config.flags, flag_options(config))
    vid = sql_literal(verifier_id)
    # the thinking columns (verdicts written before passband read thinking blocks, hand-built tables: null when absent)
    have = {r[0] for r in con.execute("DESCRIBE verdicts").fetchall()}
    thinking = ", ".join(c if c in have else f"NULL::{t} AS {c}"
                         for c, t in (("thinking_chars", "BIGINT"), ("thinking_closed", "BOOLEAN")))
    if selection is None:
        con.execute(f"""CREATE OR REPLACE TEMP VIEW _v AS
            SELECT problem_id, policy_id, sample_idx, status, extracted, {thinking},
                   'none' AS budget, 'all' AS stop_reason, NULL::VARCHAR AS prior_policy_id
            FROM verdicts WHERE verifier_id = {vid}""")
    else:
        con.execute(f"""CREATE OR REPLACE TEMP VIEW _v AS
            SELECT v.problem_id, v.policy_id, v.sample_idx, v.status, v.extracted, {thinking},
                   s.budget, s.stop_reason, s.prior_policy_id
            FROM verdicts v JOIN {selection} s USING (problem_id, policy_id)
            WHERE v.verifier_id = {vid} AND v.sample_idx < s.n""")
    con.execute("""CREATE OR REPLACE TEMP TABLE _groups AS
        SELECT v.problem_id, v.policy_id, v.budget, v.stop_reason, v.prior_policy_id, count(*) AS n,
               count(*) FILTER (WHERE v.status = 'correct') AS n_correct,
               count(*) FILTER (WHERE v.status = 'no_answer') AS n_no_answer,
               count(*) FILTER (WHERE v.status IN ('timeout', 'error')) AS n_failed,
               avg(r.n_tokens) FILTER (WHERE v.status = 'correct') AS mean_tokens_correct,
               stddev_samp(r.n_tokens) FILTER (WHERE v.status = 'correct') AS std_tokens_correct,
               avg(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS mean_tokens_incorrect,
               stddev_samp(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS std_tokens_incorrect,
               avg(v.thinking_chars) AS mean_thinking_chars,
               avg(CASE WHEN v.thinking_closed THEN 0.0 ELSE 1.0 END)
                   FILTER (WHERE v.thinking_closed IS NOT NULL) AS unfinished_thinking_rate
        FROM _v v JOIN rollouts r USING (problem_id, policy_id, sample_idx)
        GROUP BY ALL""")
    # the answer-key score's strata by source and level (hand-built problem tables without them: one stratum)
    labelled = {"source", "level"} <= {r[0] for r in con.execute("DESCRIBE problems").fetchall()}
    gold_model = gold_suspicion.prepare(con, samples="_v", threshold=config.gold_suspicion_threshold,
                                        prior=config.gold_error_prior,
                                        strata=f"({gold_suspicion.strata_sql('problems')})" if labelled else None,
                                        review_precision=config.gold_review_precision,
                                        working=gold_suspicion.read_working(con, samples="_v", rollouts="rollouts"))
    con.execute("DROP TABLE _working")
    pairs = con.execute("SELECT DISTINCT n, n_correct FROM _groups ORDER BY ALL").fetchall()
    con.register("_lut_arrow", _lut(pairs, config))
    con.execute("CREATE OR REPLACE TEMP TABLE _lut AS SELECT * FROM _lut_arrow")
    con.unregister("_lut_arrow")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _problems AS
        SELECT problem_id, question,
               CASE WHEN solution IS NULL THEN NULL ELSE {REF_STEPS_SQL.format(x='solution')} END AS ref_steps
        FROM problems WHERE problem_id IN (SELECT DISTINCT problem_id FROM _groups)""")
    steps = STEPS_SQL.format(x="r.completion")
    # the median steps of correct samples, only for problems without a usable reference solution (skipped, with
    # its scan of the rollouts, when every problem has one)
    no_ref = con.execute("SELECT count(*) FROM _problems WHERE coalesce(ref_steps, 0) = 0").fetchone()[0]
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _median AS
        SELECT v.problem_id, v.policy_id, median({steps}) AS median_correct_steps
        FROM _v v JOIN rollouts r USING (problem_id, policy_id, sample_idx)
        WHERE {'true' if no_ref else 'false'} AND v.status = 'correct'
          AND v.problem_id IN (SELECT problem_id FROM _problems WHERE coalesce(ref_steps, 0) = 0)
        GROUP BY ALL""")
    # each side on its own, for the detectors' candidate scans (flags.SIDE_COLUMNS), then both joined
    con.execute(f"CREATE OR REPLACE TEMP VIEW rollout_samples AS {_rollout_samples_sql('rollouts')}")
    con.execute("""CREATE OR REPLACE TEMP VIEW verdict_samples AS
        SELECT v.problem_id, v.policy_id, v.sample_idx, v.status, v.extracted, p.question, g.n, g.n_correct,
               g.n_correct / g.n AS pass_rate
        FROM _v v JOIN _groups g USING (problem_id, policy_id) JOIN _problems p USING (problem_id)""")
    return Annotation(con, config, verifier_id, detectors, gold_model=gold_model)


def _rollout_samples_sql(rollouts: str) -> str:
    """The rollouts side of the candidate scans: each row of ``rollouts`` with its question and steps."""
    return f"""
        SELECT r.problem_id, r.policy_id, r.sample_idx, r.completion, r.n_tokens, r.finish_reason, p.question,
               {STEPS_SQL.format(x="r.completion")} AS steps, p.ref_steps, m.median_correct_steps
        FROM {rollouts} r JOIN _problems p USING (problem_id) LEFT JOIN _median m USING (problem_id, policy_id)"""


def _samples_sql(verdicts: str, rollouts: str) -> str:
    """One row per verified rollout with its problem, its group's counts and its steps (flags.SAMPLE_COLUMNS)."""
    return f"""
        SELECT v.problem_id, v.policy_id, v.sample_idx, v.status, v.extracted, v.thinking_chars, r.completion, r.n_tokens,
               r.finish_reason, p.question, g.n, g.n_correct, g.n_correct / g.n AS pass_rate,
               {STEPS_SQL.format(x="r.completion")} AS steps, p.ref_steps, m.median_correct_steps
        FROM {verdicts} v JOIN {rollouts} r USING (problem_id, policy_id, sample_idx)
        JOIN _groups g USING (problem_id, policy_id)
        JOIN _problems p USING (problem_id)
        LEFT JOIN _median m USING (problem_id, policy_id)"""


def _lut(pairs: Sequence[tuple[int, int]], config: AnnotateConfig) -> pa.Table:
    cols: dict[str, list] = {k: [] for k in ("n", "n_correct", "pass_rate", "ci_low", "ci_high", "pass_at_k",
                                             "learnability", "band", "band_confidence")}
    for n, c in pairs:
        s = group_stats(n, c)
        band = assign_band(c, n, config.bands)
        for k, v in (("n", n), ("n_correct", c), *s.items(), ("band", band),
                     ("band_confidence", band_confidence(c, n, band, config.bands))):
            cols[k].append(v)
    sch = schema("difficulty").arrow
    fields = [pa.field("n", pa.int64()), pa.field("n_correct", pa.int64())] + [sch.field(k) for k in list(cols)[2:]]
    return pa.table(cols, schema=pa.schema(fields))


# text per batch of candidate rows the Python detectors read. Each is held as Arrow and as Python rows, in the stage
# and in a worker, two in flight per worker: 32 MB batches were ~115 MiB of the stage's peak past DuckDB's limit at
# 240,000 rollouts, 16 MB ones 36 MiB more than at 48,000, for the same CPU (docs/scale.md)
BATCH_TEXT_BYTES = 16 << 20
# fewer candidate rows than this run in the stage's process: a worker's start (imports) costs about what the
# detectors take on ~500 rows of long completions
POOL_MIN_ROWS = 1_000
BATCHES_PER_WORKER = 8  # at least this many batches per detector worker, so none waits while another finishes


def flag_batches(ann: Annotation, *, batch_rows: int = 16_384, on_batch: Callable[[int], None] | None = None,
                 rerun: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the candidate rows through the detectors; yield hit batches (``HITS_SCHEMA``).

    ``rerun`` (incremental, :mod:`pipeline.annotate.incremental`): the connection holds ``_reuse``, the groups whose
    stored rows stand; on those only the detectors named in ``rerun`` run, every detector on the other groups."""
    if not ann.detectors:
        return
    # the candidate keys from one scan of each side, then only those rows joined (the join of every rollout's
    # text to its verdict was most of the stage's time), with a mark per detector: a small temp table
    con = ann.con
    rollouts, sides, scratch = "rollouts", {}, ["_keys", "_cand_v", "_cand_r"]
    unchanged = rerun is not None and not rerun  # no detector changed: the reused groups' rows all stand
    if unchanged and _mostly_reused(con):
        # only the other groups are scanned, their rollouts copied first (a second copy of their text beside
        # _cand_r's, hence only for a minority): scan predicates over a view joined to the new groups are pushed
        # under the join and read every text (0.9 s of a rerun with nothing new at 50,000 rollouts)
        con.execute("""CREATE OR REPLACE TEMP TABLE _new_r AS SELECT * FROM rollouts SEMI JOIN (
                SELECT problem_id, policy_id FROM _groups ANTI JOIN _reuse USING (problem_id, policy_id))
            USING (problem_id, policy_id)""")
        con.execute(f"CREATE OR REPLACE TEMP VIEW _new_rs AS {_rollout_samples_sql('_new_r')}")
        con.execute("CREATE OR REPLACE TEMP VIEW _new_vs AS SELECT * FROM verdict_samples "
                    "ANTI JOIN _reuse USING (problem_id, policy_id)")
        rollouts, sides = "_new_r", {"rollouts": "_new_rs", "verdicts": "_new_vs"}
        scratch.append("_new_r")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _keys AS {candidate_keys_sql(ann.detectors, **sides)}")
    if unchanged and not sides:  # most groups new: every group scanned, the reused ones' keys dropped
        con.execute("DELETE FROM _keys k USING _reuse r WHERE k.problem_id = r.problem_id AND k.policy_id = r.policy_id")
    key = f"USING ({', '.join(schema('rollouts').key)})"
    con.execute(f"CREATE OR REPLACE TEMP TABLE _cand_v AS SELECT * FROM _v SEMI JOIN _keys {key}")
    con.execute("CREATE OR REPLACE TEMP TABLE _cand_r AS SELECT problem_id, policy_id, sample_idx, completion, n_tokens, "
                f"finish_reason FROM {rollouts} SEMI JOIN _keys {key}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _cand AS "
                f"{candidate_sql(ann.detectors, source='(' + _samples_sql('_cand_v', '_cand_r') + ')')}")
    for t in ("_new_rs", "_new_vs"):
        con.execute(f"DROP VIEW IF EXISTS {t}")
    for t in scratch:
        con.execute(f"DROP TABLE {t}")
    if rerun:  # a reused group keeps the candidates of the detectors to rerun only
        marks = ", ".join(f'"c_{d.name}"' if d.name in rerun else f'"c_{d.name}" AND NOT _reused AS "c_{d.name}"'
                          for d in ann.detectors)
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _cand AS SELECT * FROM (
            SELECT {', '.join(SAMPLE_COLUMNS)}, {marks} FROM (
                SELECT c.*, r.problem_id IS NOT NULL AS _reused FROM _cand c
                LEFT JOIN _reuse r USING (problem_id, policy_id)))
            WHERE {' OR '.join(f'"c_{d.name}"' for d in ann.detectors)}""")
    sql_dets = [d for d in ann.detectors if d.sql_only]
    py_dets = [d for d in ann.detectors if not d.sql_only]
    if sql_dets:  # DuckDB writes these hits itself: no row goes through Python
        for batch in ann.con.sql(sql_hits_sql(sql_dets, source="_cand")).to_arrow_reader(batch_rows):
            for name, n in Counter(batch.column("flag").to_pylist()).items():
                ann.counts.candidates[name] = ann.counts.candidates.get(name, 0) + n
                ann.counts.fired[name] = ann.counts.fired.get(name, 0) + n
            yield pa.RecordBatch.from_arrays(batch.columns, schema=HITS_SCHEMA)
    if py_dets:
        where = " OR ".join(f'"c_{d.name}"' for d in py_dets)
        # batches of about BATCH_TEXT_BYTES of text, not a fixed row count: 16k rows of 64 KB chains of thought would
        # be 1 GiB of Arrow, twice that as Python rows
        n_rows, mean_bytes = con.execute(f"SELECT count(*), avg(strlen(completion) + strlen(question)) FROM _cand "
                                         f"WHERE {where}").fetchall()[0]
        rows = max(16, min(batch_rows, int(BATCH_TEXT_BYTES // (mean_bytes or 1))))
        workers = ann.config.workers if n_rows >= POOL_MIN_ROWS else 1
        if workers > 1:  # enough batches for every worker to get several (a small job is one batch otherwise)
            rows = max(16, min(rows, -(-n_rows // (workers * BATCHES_PER_WORKER))))
        reader = ann.con.sql(f"SELECT * FROM _cand WHERE {where}").to_arrow_reader(rows)
        yield from pooled_detectors(reader, py_dets, workers=workers, counts=ann.counts, on_batch=on_batch)


def _mostly_reused(con: duckdb.DuckDBPyConnection) -> bool:
    """At least half of ``_groups`` is in ``_reuse``."""
    new, total = con.execute("SELECT (SELECT count(*) FROM _groups) - (SELECT count(*) FROM _reuse), "
                             "(SELECT count(*) FROM _groups)").fetchone()
    return 2 * new <= total


def difficulty_sql(ann: Annotation, *, hits: str) -> str:
    """The difficulty table as one SELECT; ``hits`` names a relation with ``HITS_SCHEMA`` columns.

    ``flag_rates`` comes out as a list of ``{key, value}`` structs; :func:`difficulty_batches` makes it the MAP.
    """
    shortcut = [d.name for d in ann.detectors if d.kind == "shortcut"]
    counts = ", ".join(f"count(*) FILTER (WHERE flag = {sql_literal(d.name)}) AS \"f_{d.name}\"" for d in ann.detectors)
    in_short = ", ".join(sql_literal(s) for s in shortcut) or "NULL"
    # flag_rates as a list of (key, value) structs: DuckDB's map construction costs ~6 us a row (7 s for 1.25M
    # groups); :func:`difficulty_batches` turns the list into the declared MAP in Arrow, without copying
    entries = ", ".join(f"{{'key': {sql_literal(d.name)}, 'value': coalesce(f.\"f_{d.name}\", 0) / g.n}}" for d in ann.detectors)
    flag_rates = f"[{entries}]" if entries else "[]::STRUCT(key VARCHAR, value DOUBLE)[]"
    agg = (f"SELECT problem_id, policy_id, {counts + ',' if counts else ''} "
           f"count(DISTINCT sample_idx) FILTER (WHERE correct AND flag IN ({in_short})) AS flagged_correct "
           f"FROM {hits} GROUP BY ALL")
    return f"""
        SELECT g.problem_id, g.policy_id, {sql_literal(ann.verifier_id)} AS verifier_id,
               g.n, g.n_correct, g.n_no_answer, g.n_failed,
               s.pass_rate, s.ci_low, s.ci_high, s.pass_at_k, s.learnability, s.band, s.band_confidence,
               g.mean_tokens_correct, g.std_tokens_correct, g.mean_tokens_incorrect, g.std_tokens_incorrect,
               g.mean_thinking_chars, g.unfinished_thinking_rate,
               {flag_rates} AS flag_rates,
               CASE WHEN g.n_correct = 0 THEN NULL ELSE coalesce(f.flagged_correct, 0) / g.n_correct END AS flagged_correct_rate,
               g.budget, g.stop_reason, g.prior_policy_id,
               md.modal_answer, md.modal_share, md.modal_is_gold, md.gold_suspicion, md.gold_suspect
        FROM _groups g JOIN _lut s USING (n, n_correct)
        LEFT JOIN ({agg}) f USING (problem_id, policy_id)
        LEFT JOIN _modal md USING (problem_id, policy_id)"""


def difficulty_batches(ann: Annotation, *, hits: str, batch_rows: int = 16_384) -> Iterator[pa.RecordBatch]:
    """The difficulty rows in key order, as validated batches of the declared schema.

    ``batch_rows``: 16k rows keep the stage's peak ~115 MiB lower than 64k at 10M rollouts, for ~0.5 s more."""
    sch = schema("difficulty")
    reader = ann.con.sql(difficulty_sql(ann, hits=hits) + " ORDER BY problem_id, policy_id").to_arrow_reader(batch_rows)
    for batch in reader:
        entries = batch.column("flag_rates")  # list<struct<key, value>>: offsets and children reused as the map's
        rates = pa.MapArray.from_arrays(entries.offsets, entries.values.field("key"), entries.values.field("value"),
                                        type=sch.arrow.field("flag_rates").type)
        batch = batch.set_column(batch.schema.get_field_index("flag_rates"), "flag_rates", rates)
        yield from sch.validate(pa.Table.from_batches([batch])).to_batches()


def annotate_tables(verdicts: pa.Table, rollouts: pa.Table, problems: pa.Table, *, config: AnnotateConfig,
                    verifier_id: str) -> tuple[pa.Table, pa.Table]:
    """In-memory convenience (tests, small data): (difficulty, flags) as validated Arrow tables."""
    con = duckdb.connect(":memory:")
    try:
        for name, t in (("verdicts", verdicts), ("rollouts", rollouts), ("problems", problems)):
            con.register(name, t)
        ann = prepare(con, config=config, verifier_id=verifier_id)
        hits = pa.Table.from_batches(list(flag_batches(ann)), schema=HITS_SCHEMA)
        con.register("_hits", hits)
        difficulty = pa.Table.from_batches(list(difficulty_batches(ann, hits="_hits")), schema=schema("difficulty").arrow)
        order = [(k, "ascending") for k in schema("flags").key]
        flags = hits.drop_columns(["correct"]).sort_by(order)
        return schema("difficulty").validate(difficulty), schema("flags").validate(flags)
    finally:
        con.close()
