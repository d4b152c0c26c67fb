"""What a rollout's own working says about its answer, for the answer-key score (:mod:`.gold_suspicion`).

A policy that repeats one wrong answer usually repeats one slip: the 135M model answers "8 * 4 = 24. The answer is
24." on eight samples of eight, and a key moved by one is met by "3 + 5 = 8. The answer is 8." on most samples. The
counts cannot tell these apart; the working can. Each read rollout gets one of :data:`KINDS`:

- ``false``: its working (the text verify graded, :func:`~pipeline.annotate.graded.graded_text`) holds an arithmetic
  statement that is false (``8 * 4 = 24``), read exactly by :mod:`pipeline.arith` as ``unsupported_answer`` reads it;
- ``supported``: no false statement, and a true one computes its answer (or an equation it solves has the answer as
  its root);
- ``none``: neither (no working, working in words, or an answer this reader cannot evaluate).

The score weighs a class of rollouts by the majority kind of its first :data:`READ_PER_CLASS` rollouts, against how
often the run's right-answer classes and its wrong-answer classes show each kind (fitted per run: nothing here says
which kind means what).
"""

from __future__ import annotations

from functools import lru_cache

import duckdb
import pyarrow as pa

from pipeline.annotate.answer_classes import classed_sql
from pipeline.annotate.graded import graded_text
from pipeline.arith import answer_value, gives, solutions, statements

KINDS = ("false", "supported", "none")
READ_PER_CLASS = 3  # rollouts read per (problem, answer class): a class repeats one working, and reading is the cost
_CACHED_CHARS = 2000  # a class's samples often repeat one short text


def working_kind(completion: str, extracted: str | None, thinking: bool = True) -> str:
    """``false``, ``supported`` or ``none`` (:data:`KINDS`) for one rollout and its extracted answer; ``thinking``:
    verify read the completion's thinking apart (its verdict's ``thinking_chars`` is not null)."""
    if len(completion) <= _CACHED_CHARS:
        return _kind_cached(completion, extracted, thinking)
    return _kind(completion, extracted, thinking)


@lru_cache(maxsize=65536)
def _kind_cached(completion: str, extracted: str | None, thinking: bool) -> str:
    return _kind(completion, extracted, thinking)


def _kind(completion: str, extracted: str | None, thinking: bool) -> str:
    working = graded_text(completion, thinking)
    stmts = statements(working)
    if any(s.ok is False for s in stmts):
        return "false"
    answer = answer_value(extracted) if extracted is not None else None
    if answer is not None and (any(gives(s, answer) for s in stmts) or answer in solutions(working)):
        return "supported"
    return "none"


def read_sql(samples: str) -> str:
    """SQL: the rows of ``samples`` whose working the score reads (:mod:`.working`): the first
    :data:`~.working.READ_PER_CLASS` (by policy and sample) of every answer class, pooled over the policies, that holds
    two rollouts or more: ``problem_id, policy_id, sample_idx``."""
    return f"""SELECT problem_id, policy_id, sample_idx FROM (
        SELECT problem_id, policy_id, sample_idx, count(*) OVER w AS n_class,
               row_number() OVER (w ORDER BY policy_id, sample_idx) AS i
        FROM ({classed_sql(samples)}) WINDOW w AS (PARTITION BY problem_id, answer_class))
        WHERE n_class >= 2 AND i <= {READ_PER_CLASS}"""


def read_working(con: duckdb.DuckDBPyConnection, *, samples: str, rollouts: str, batch_rows: int = 4096) -> str:
    """Read the working of the rows :func:`read_sql` selects from ``samples`` (which carries ``thinking_chars``), their
    text from ``rollouts``, into the temp table ``_working`` (``problem_id, policy_id, sample_idx, working``); returns
    its name, for :func:`prepare`. Streams the text ``batch_rows`` rows at a time; keeps only the keys and kinds."""
    keys: dict[str, list] = {"problem_id": [], "policy_id": [], "sample_idx": [], "working": []}
    reader = con.sql(f"""SELECT s.problem_id, s.policy_id, s.sample_idx, r.completion, s.extracted,
                                s.thinking_chars IS NOT NULL AS thinking
        FROM ({read_sql(samples)}) k JOIN {samples} s USING (problem_id, policy_id, sample_idx)
        JOIN {rollouts} r USING (problem_id, policy_id, sample_idx)""").to_arrow_reader(batch_rows)
    for batch in reader:
        cols = batch.to_pydict()
        for k in ("problem_id", "policy_id", "sample_idx"):
            keys[k].extend(cols[k])
        keys["working"].extend(working_kind(t, x, th)
                               for t, x, th in zip(cols["completion"], cols["extracted"], cols["thinking"], strict=True))
    table = pa.table(keys, schema=pa.schema([("problem_id", pa.string()), ("policy_id", pa.string()),
                                             ("sample_idx", pa.int64()), ("working", pa.string())]))
    con.register("_working_arrow", table)
    con.execute("CREATE OR REPLACE TEMP TABLE _working AS SELECT * FROM _working_arrow")
    con.unregister("_working_arrow")
    return "_working"


def class_kinds_sql(samples: str, working: str) -> str:
    """Per (problem, answer class) read (:func:`read_sql`), the majority working kind of its read rows: ``false``
    when half or more are, else ``supported`` when more than half are, else ``none``."""
    return f"""SELECT problem_id, answer_class,
               CASE WHEN 2 * count(*) FILTER (WHERE w.working = 'false') >= count(*) THEN 'false'
                    WHEN 2 * count(*) FILTER (WHERE w.working = 'supported') > count(*) THEN 'supported'
                    ELSE 'none' END AS kind
        FROM ({classed_sql(samples)}) s JOIN ({read_sql(samples)}) r USING (problem_id, policy_id, sample_idx)
        JOIN {working} w USING (problem_id, policy_id, sample_idx)
        WHERE w.working IS NOT NULL GROUP BY ALL"""
