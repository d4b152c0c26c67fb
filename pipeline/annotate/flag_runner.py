"""The flag runner: every registered detector (:mod:`pipeline.annotate.detectors`) over the verified rollouts.

A detector is a SQL predicate ``where`` over the ``samples`` view (one row per verified rollout, with its problem and
its group's counts) that selects the candidate rows cheaply inside DuckDB, and a Python ``detect(row)`` that
decides and writes the evidence. The runner (:func:`run_detectors`) streams only candidate rows out of DuckDB in
Arrow batches, so a detector never sees the rows it cannot fire on and never batches, counts or reports progress
itself; a detector that raises on a row gives it a ``detector_error`` row instead of stopping the stage.

Joining every rollout's text to its verdict is the expensive part at scale, so each detector
also names its ``side``: ``rollouts`` (its candidates are decided by the rollout's own columns
and its problem) or ``verdicts`` (by the verdict, the group's counts and the problem). A
``scan`` predicate over that side alone (default: ``where``) must hold whenever ``where`` does;
the candidate keys come from one scan of each side (:func:`candidate_keys_sql`), and only those
rows are joined into ``samples`` rows. Columns of a ``samples`` row::

    problem_id policy_id sample_idx status extracted completion n_tokens finish_reason
    question n n_correct pass_rate steps ref_steps median_correct_steps
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.annotate.detectors import Detector, Hit
from pipeline.schema import schema
from pipeline.sqltext import sql_literal

# -- steps: SQL and Python agree (tests check) ------------------------------------------------

STEPS_SQL = "(length({x}) - length(replace({x}, '=', '')))"
REF_STEPS_SQL = STEPS_SQL.format(x="regexp_replace({x}, '<<[^>]*>>', '', 'g')")


def steps(text: str) -> int:
    """Reasoning steps of a text: its '=' signs (GSM8K's <<48/2=24>> calculator notes removed)."""
    return re.sub(r"<<[^>]*>>", "", text).count("=")


# -- the runner --------------------------------------------------------------------------------

# the hits the runner yields: the flags table's columns, plus whether the flagged rollout was correct
HITS_SCHEMA = schema("flags").arrow.append(pa.field("correct", pa.bool_(), nullable=False))

SAMPLE_COLUMNS = ("problem_id", "policy_id", "sample_idx", "status", "extracted", "thinking_chars", "completion",
                  "n_tokens", "finish_reason", "question", "n", "n_correct", "pass_rate", "steps", "ref_steps",
                  "median_correct_steps")


def candidate_sql(detectors: Sequence[Detector], *, source: str = "samples") -> str:
    """One scan: every row that is a candidate of at least one detector, with a boolean column per detector."""
    preds = [f"({d.where_sql()})" for d in detectors]
    marks = (f"coalesce({p}, false) AS \"c_{d.name}\"" for p, d in zip(preds, detectors, strict=True))
    cols = ", ".join([*SAMPLE_COLUMNS, *marks])
    return f"SELECT {cols} FROM {source} WHERE " + " OR ".join(preds)


def candidate_keys_sql(detectors: Sequence[Detector], *, rollouts: str = "rollout_samples",
                       verdicts: str = "verdict_samples") -> str:
    """The keys of every candidate row: one scan of each side with the ``scan`` predicates of its detectors."""
    parts = []
    for side, source in (("rollouts", rollouts), ("verdicts", verdicts)):
        preds = [f"({d.scan_sql()})" for d in detectors if d.side == side]
        if preds:
            parts.append(f"SELECT problem_id, policy_id, sample_idx FROM {source} WHERE " + " OR ".join(preds))
    return " UNION ".join(parts)


def sql_hits_sql(detectors: Sequence[Detector], *, source: str) -> str:
    """The hits of the SQL-only detectors, as one UNION ALL over ``source`` (HITS_SCHEMA columns)."""
    parts = [f"SELECT problem_id, policy_id, sample_idx, {sql_literal(d.name)} AS flag, "
             f"({d.score_expr()})::DOUBLE AS score, "
             f"{d.evidence_expr()} AS evidence, status = 'correct' AS correct "
             f"FROM {source} WHERE \"c_{d.name}\"" for d in detectors if d.sql_only]
    return " UNION ALL ".join(parts)


@dataclass
class FlagCounts:
    candidates: dict[str, int]
    fired: dict[str, int]
    errors: dict[str, int] = field(default_factory=dict)  # detector -> rows where it raised (a detector_error row each)


# the flag a row gets when a detector raises on it (not a registered detector: no candidates, no rate of its own)
DETECTOR_ERROR = "detector_error"
_ERROR_MESSAGE_CHARS = 200


def error_hit(detector: str, exc: BaseException) -> Hit:
    """The record of a detector that raised on one rollout: no score, the detector and the exception as evidence."""
    message = " ".join(str(exc).split())[:_ERROR_MESSAGE_CHARS]
    return Hit(None, f"{detector}: error:{type(exc).__name__}" + (f": {message}" if message else ""))


def run_detectors(batches: Iterator[pa.RecordBatch], detectors: Sequence[Detector],
                  *, counts: FlagCounts | None = None, on_batch: Callable[[int], None] | None = None
                  ) -> Iterator[pa.RecordBatch]:
    """Apply each detector to its candidate rows; yield hit batches (``flags`` columns plus ``correct``, one per input batch).

    A detector that raises on a row gives that row a ``detector_error`` flag (score null, evidence
    ``"<detector>: error:<ExceptionType>: <message>"``), counted in ``counts.errors``; the other detectors and rows go on.
    """
    sch = HITS_SCHEMA
    for batch in batches:
        rows = batch.to_pylist()
        out: dict[str, list] = {c: [] for c in sch.names}
        for row in rows:
            for d in detectors:
                if not row[f"c_{d.name}"]:
                    continue
                if counts is not None:
                    counts.candidates[d.name] = counts.candidates.get(d.name, 0) + 1
                flag = d.name
                try:
                    hit = d.detect(row)
                except Exception as exc:  # one detector on one rollout: a recorded row, never a crashed stage
                    hit, flag = error_hit(d.name, exc), DETECTOR_ERROR
                    if counts is not None:
                        counts.errors[d.name] = counts.errors.get(d.name, 0) + 1
                if hit is None:
                    continue
                if counts is not None and flag != DETECTOR_ERROR:
                    counts.fired[d.name] = counts.fired.get(d.name, 0) + 1
                score = hit.score if hit.score is None or math.isfinite(hit.score) else None
                for k, v in (("problem_id", row["problem_id"]), ("policy_id", row["policy_id"]),
                             ("sample_idx", row["sample_idx"]), ("flag", flag), ("score", score),
                             ("evidence", hit.evidence), ("correct", row["status"] == "correct")):
                    out[k].append(v)
        if on_batch:
            on_batch(len(rows))
        if out["flag"]:
            yield pa.RecordBatch.from_pydict(out, schema=sch)
