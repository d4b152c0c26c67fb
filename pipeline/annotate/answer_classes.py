"""Answer classes: the rollouts that give one answer, for the answer-key score (:mod:`.gold_suspicion`).

A ``correct`` rollout is in the gold's class (math-verify said it equals the gold: a null ``answer_class``), an
``incorrect`` one in the class of its extracted answer's normalised form (:data:`NORMALISED_SQL`); ``no_answer``,
``timeout`` and ``error`` rollouts are in none.
"""

from __future__ import annotations

from pipeline.numbers import IN_TEXT_SQL

__all__ = ["NORMALISED_SQL", "classed_sql", "classes_sql"]

# the normalised form of an extracted answer, in DuckDB (``{x}``: the column). A number's unit is no part of its
# class: "135 \text{ kWh}", "135" and "135\,\text{kWh}" are one wrong answer (three policies that agree), as are
# "25\%" and "25", "30^\circ" and "30"
NORMALISED_SQL = r"""(CASE
    WHEN regexp_matches(n0, '^-?\d{{1,3}}(,\d{{3}})+(\.\d+)?$') THEN replace(n0, ',', '')
    ELSE n0 END)""".replace("n0", r"""regexp_replace(regexp_replace(regexp_replace(regexp_replace(lower({x}),
        '\s+|\\?\$|\\left|\\right|\\displaystyle|\\[!,;]', '', 'g'), '\\[dt]frac', '\\frac', 'g'),
        '^(NUMBER)(\\(text|mbox|mathrm|textrm)\{{[a-z.]*\}}|\\?%|\^\{{?\\circ\}}?|°)+$', '\1'),
        '(\.0+)?\.?$', '')""").replace("NUMBER", IN_TEXT_SQL)


def classed_sql(samples: str) -> str:
    """Each format-valid row of ``samples`` (``problem_id, policy_id, status, extracted``, ...) with its
    ``answer_class`` (null: the gold's)."""
    norm = NORMALISED_SQL.format(x="extracted")
    return (f"SELECT *, CASE WHEN status = 'correct' THEN NULL ELSE {norm} END AS answer_class FROM {samples} "
            "WHERE status IN ('correct', 'incorrect')")


def classes_sql(samples: str) -> str:
    """Per (problem, policy, answer class): its count and its most frequent extracted text (the gold's class: a null
    ``answer_class``); ``samples`` names a relation with ``problem_id, policy_id, status, extracted``."""
    return f"""
        SELECT problem_id, policy_id, answer_class, count(*) AS n_class, mode(extracted ORDER BY extracted) AS shown
        FROM ({classed_sql(samples)}) GROUP BY ALL"""
