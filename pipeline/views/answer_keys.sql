-- One row a scored problem: its answer-key score (gold_suspicion: pooled over every policy's rollouts, so the same on
-- each of its difficulty rows) and whether it flags (gold_suspect). The one place the per-problem score is read from:
-- passband summary, the report, passband golds and annotate's metrics (over that stage's own difficulty file).
SELECT problem_id, any_value(gold_suspicion) AS gold_suspicion, bool_or(gold_suspect) AS gold_suspect
FROM difficulty
WHERE gold_suspicion IS NOT NULL
GROUP BY problem_id
