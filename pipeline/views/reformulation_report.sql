-- Reformulation report: per method and policy, how the too-hard parents fared once reformulated and
-- re-measured on the same policy (the reformulated set's own rollouts, independent of the samples
-- the ladder chose a rung on). One row per (method, policy_id), plus method '(any)': a parent counts
-- there when some method's child is learnable. policy_id is NULL for a method none of whose children
-- has been measured yet. Rejected reformulations (per method, all policies) by reason in reject_reasons.
-- reward density = share of groups with at least one success and one failure (GRPO's signal).
WITH children AS (
    SELECT problem_id, parent_id, method FROM problems WHERE parent_id IS NOT NULL
),
rejected AS (
    SELECT source AS method, source_id AS parent_id, reason FROM rejects WHERE stage = 'reformulate'
),
tried AS (
    SELECT DISTINCT method, parent_id FROM (SELECT method, parent_id FROM children UNION ALL SELECT method, parent_id FROM rejected)
),
attempts AS (
    SELECT method, count(DISTINCT parent_id) AS parents_tried FROM tried GROUP BY method
    UNION ALL
    SELECT '(any)', count(DISTINCT parent_id) FROM tried HAVING count(*) > 0
),
made AS (
    SELECT method, count(*) AS children_kept FROM children GROUP BY method
    UNION ALL
    SELECT '(any)', count(*) FROM children
),
reasons AS (
    SELECT method, sum(n)::BIGINT AS rejected, map(list(reason ORDER BY reason), list(n ORDER BY reason)) AS reject_reasons
    FROM (SELECT method, reason, count(*) AS n FROM rejected GROUP BY ALL)
    GROUP BY method
    UNION ALL  -- for '(any)': the parents no method kept a child for
    SELECT '(any)', count(DISTINCT parent_id)::BIGINT, MAP {}::MAP(VARCHAR, BIGINT)
    FROM tried WHERE parent_id NOT IN (SELECT parent_id FROM children)
),
parents AS (  -- every tried parent's own group, per policy (the "before")
    SELECT t.method, pd.policy_id, t.parent_id, pd.pass_rate, pd.n_correct, pd.n
    FROM tried t JOIN difficulty pd ON pd.problem_id = t.parent_id
),
before AS (
    SELECT method, policy_id, avg(CASE WHEN n_correct > 0 AND n_correct < n THEN 1.0 ELSE 0.0 END) AS reward_density_before
    FROM parents GROUP BY ALL
    UNION ALL
    SELECT '(any)', policy_id, avg(CASE WHEN n_correct > 0 AND n_correct < n THEN 1.0 ELSE 0.0 END)
    FROM (SELECT DISTINCT policy_id, parent_id, n_correct, n FROM parents) GROUP BY ALL
),
pairs AS (  -- a child measured for the same policy as its parent
    SELECT c.method, cd.policy_id, c.parent_id, c.problem_id AS child_id,
           pd.pass_rate AS parent_pass_rate, cd.pass_rate AS child_pass_rate, cd.band AS child_band,
           cd.n_correct > 0 AND cd.n_correct < cd.n AS child_mixed
    FROM children c
    JOIN difficulty cd ON cd.problem_id = c.problem_id
    JOIN difficulty pd ON pd.problem_id = c.parent_id AND pd.policy_id = cd.policy_id
),
all_pairs AS (
    SELECT * FROM pairs UNION ALL SELECT '(any)' AS method, * EXCLUDE (method) FROM pairs
),
measured AS (
    SELECT method, policy_id,
           count(*) AS children_measured,
           count(DISTINCT parent_id) FILTER (WHERE child_band = 'learnable') AS parents_with_learnable_child,
           count(*) FILTER (WHERE child_band = 'learnable') AS children_learnable,
           count(*) FILTER (WHERE child_band = 'too_easy') AS children_too_easy,
           count(*) FILTER (WHERE child_band IN ('too_hard', 'unsolved')) AS children_still_hard,
           avg(parent_pass_rate) AS mean_parent_pass_rate,
           avg(child_pass_rate) AS mean_child_pass_rate,
           avg(child_pass_rate - parent_pass_rate) AS mean_pass_rate_shift,
           -- 95 % normal-approximation interval of the mean shift (NULL with fewer than two children)
           avg(child_pass_rate - parent_pass_rate) - 1.96 * stddev_samp(child_pass_rate - parent_pass_rate) / sqrt(count(*))
             AS shift_ci_low,
           avg(child_pass_rate - parent_pass_rate) + 1.96 * stddev_samp(child_pass_rate - parent_pass_rate) / sqrt(count(*))
             AS shift_ci_high,
           avg(CASE WHEN child_mixed THEN 1.0 ELSE 0.0 END) AS reward_density_after
    FROM all_pairs
    GROUP BY method, policy_id
),
methods AS (
    SELECT method FROM attempts
)
SELECT m.method,
       ms.policy_id,
       coalesce(a.parents_tried, 0) AS parents_tried,
       coalesce(md.children_kept, 0) AS children_kept,
       coalesce(r.rejected, 0) AS rejected,
       coalesce(ms.children_measured, 0) AS children_measured,
       coalesce(ms.parents_with_learnable_child, 0) AS parents_with_learnable_child,
       coalesce(ms.parents_with_learnable_child, 0) / nullif(a.parents_tried, 0) AS share_parents_with_learnable_child,
       coalesce(ms.children_learnable, 0) AS children_learnable,
       coalesce(ms.children_too_easy, 0) AS children_too_easy,
       coalesce(ms.children_still_hard, 0) AS children_still_hard,
       ms.mean_parent_pass_rate,
       ms.mean_child_pass_rate,
       ms.mean_pass_rate_shift,
       ms.shift_ci_low,
       ms.shift_ci_high,
       b.reward_density_before,
       ms.reward_density_after,
       coalesce(r.reject_reasons, MAP {}::MAP(VARCHAR, BIGINT)) AS reject_reasons
FROM methods m
LEFT JOIN attempts a USING (method)
LEFT JOIN made md USING (method)
LEFT JOIN reasons r USING (method)
LEFT JOIN measured ms USING (method)
LEFT JOIN before b ON b.method = m.method AND b.policy_id = ms.policy_id
ORDER BY m.method = '(any)', m.method, ms.policy_id
