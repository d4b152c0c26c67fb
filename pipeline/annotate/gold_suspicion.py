"""Answer-key suspicion: when a policy's rollouts agree on one answer that is not the gold, the gold may be wrong.

Per (problem, policy), over the *format-valid* rollouts (verdict ``correct`` or ``incorrect``: an answer was read
and graded; ``no_answer``, ``timeout`` and ``error`` are left out):

- answers are put in classes: every ``correct`` rollout is in the gold's class (math-verify said it equals the
  gold, so the verifier's own equivalence decides), every ``incorrect`` one in the class of its extracted answer's
  normalised form (:data:`NORMALISED_SQL`: case, spaces, ``$``, ``\\left``/``\\right``, thin spaces,
  ``\\dfrac``/``\\tfrac``, thousands separators, a trailing ``.`` and ``.0`` removed);
- ``modal_answer`` is the biggest class (the gold's class wins a tie), shown as its most frequent extracted text;
  ``modal_share`` its share of the format-valid rollouts; ``modal_is_gold`` whether it is the gold's class;
- ``gold_suspicion`` is 0 when the modal answer is the gold, else the posterior probability (uniform prior) that
  the modal wrong answer is the majority answer, with that answer's count ``m`` and the format-valid count ``v``
  pooled over every policy that measured the problem: ``P(Binomial(v + 1, 1/2) <= m)`` (:func:`suspicion`).
  Many rollouts agreeing raise it (8 of 8: 0.998; 4 of 4: 0.97; 1 of 1: 0.75), rollouts that reach the gold
  lower it (4 of 8: 0.5), a second policy giving the same wrong answer raises it again (6 of 8 and 6 of 8: 0.98);
  a second policy that finds the gold lowers it. Null when no rollout was format-valid.
- ``gold_suspect`` is ``gold_suspicion >= annotate.gold_suspicion_threshold``.

It cannot tell a wrong gold from a policy that is wrong the same way every time: a weak policy's confident
mistakes on items it cannot solve score as high as a wrong gold (docs/tables.md measures how often).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from math import comb

import duckdb
import pyarrow as pa

__all__ = ["NORMALISED_SQL", "classes_sql", "prepare", "suspicion"]

# the normalised form of an extracted answer, in DuckDB (``{x}``: the column)
NORMALISED_SQL = r"""(CASE
    WHEN regexp_matches(n0, '^-?\d{{1,3}}(,\d{{3}})+(\.\d+)?$') THEN replace(n0, ',', '')
    ELSE n0 END)""".replace("n0", r"""regexp_replace(regexp_replace(regexp_replace(lower({x}),
        '\s+|\\?\$|\\left|\\right|\\displaystyle|\\[!,;]', '', 'g'), '\\[dt]frac', '\\frac', 'g'),
        '(\.0+)?\.?$', '')""")


def suspicion(m: int, v: int) -> float:
    """``P(theta > 1/2)`` for ``theta ~ Beta(m + 1, v - m + 1)``, exactly: ``P(Binomial(v + 1, 1/2) <= m)``.

        >>> suspicion(4, 8), suspicion(8, 8), round(suspicion(1, 1), 2)
        (0.5, 0.998046875, 0.75)
    """
    if not 0 <= m <= v:
        raise ValueError(f"agreeing rollouts {m} must lie in 0..{v}")
    return float(Fraction(sum(comb(v + 1, j) for j in range(m + 1)), 2 ** (v + 1)))


def classes_sql(samples: str) -> str:
    """Per (problem, policy, answer class): its count and its most frequent extracted text (the gold's class: a null
    ``answer_class``); ``samples`` names a relation with ``problem_id, policy_id, status, extracted``."""
    norm = NORMALISED_SQL.format(x="extracted")
    return f"""
        SELECT problem_id, policy_id, CASE WHEN status = 'correct' THEN NULL ELSE {norm} END AS answer_class,
               count(*) AS n_class, mode(extracted ORDER BY extracted) AS shown
        FROM {samples} WHERE status IN ('correct', 'incorrect') GROUP BY ALL"""


def prepare(con: duckdb.DuckDBPyConnection, *, samples: str, threshold: float) -> None:
    """Create ``_modal`` (problem_id, policy_id, modal_answer, modal_share, modal_is_gold, gold_suspicion,
    gold_suspect) from the verdict rows in ``samples``."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _classes AS {classes_sql(samples)}")
    con.execute("""CREATE OR REPLACE TEMP TABLE _mode AS
        SELECT * FROM (
            SELECT *, sum(n_class) OVER (PARTITION BY problem_id, policy_id) AS n_valid,
                   row_number() OVER (PARTITION BY problem_id, policy_id
                                      ORDER BY n_class DESC, answer_class IS NULL DESC, answer_class) AS rank
            FROM _classes) WHERE rank = 1""")
    # the wrong modal answer's count and the format-valid count, over every policy that measured the problem
    con.execute("""CREATE OR REPLACE TEMP TABLE _pooled AS
        SELECT m.problem_id, m.policy_id,
               (SELECT coalesce(sum(c.n_class), 0) FROM _classes c
                WHERE c.problem_id = m.problem_id AND c.answer_class = m.answer_class)::BIGINT AS m,
               (SELECT sum(c.n_class) FROM _classes c WHERE c.problem_id = m.problem_id)::BIGINT AS v
        FROM _mode m WHERE m.answer_class IS NOT NULL""")
    pairs = con.execute("SELECT DISTINCT m, v FROM _pooled").fetchall()
    con.register("_suspicion_lut", _lut(pairs))
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _modal AS
        SELECT m.problem_id, m.policy_id, m.shown AS modal_answer, m.n_class / m.n_valid AS modal_share,
               m.answer_class IS NULL AS modal_is_gold,
               CASE WHEN m.answer_class IS NULL THEN 0.0 ELSE s.gold_suspicion END AS gold_suspicion,
               coalesce(s.gold_suspicion, 0.0) >= {float(threshold)!r} AS gold_suspect
        FROM _mode m LEFT JOIN _pooled p USING (problem_id, policy_id)
        LEFT JOIN _suspicion_lut s USING (m, v)""")
    con.unregister("_suspicion_lut")
    for t in ("_classes", "_mode", "_pooled"):
        con.execute(f"DROP TABLE {t}")


def _lut(pairs: Iterable[tuple[int, int]]) -> pa.Table:
    pairs = list(pairs)
    return pa.table({"m": pa.array([m for m, _ in pairs], pa.int64()), "v": pa.array([v for _, v in pairs], pa.int64()),
                     "gold_suspicion": pa.array([suspicion(m, v) for m, v in pairs], pa.float64())})
