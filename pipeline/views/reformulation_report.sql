-- Reformulation report: per method and policy, how the too-hard parents fared once reformulated
-- and re-measured on the same policy. One row per (method, policy_id); policy_id is NULL for a
-- method none of whose children has been measured yet. Rejected reformulations (per method,
-- all policies) by reason in reject_reasons.
WITH children AS (
    SELECT problem_id, parent_id, method FROM problems WHERE parent_id IS NOT NULL
),
rejected AS (
    SELECT source AS method, source_id AS parent_id, reason FROM rejects WHERE stage = 'reformulate'
),
attempts AS (
    SELECT method, count(DISTINCT parent_id) AS parents_tried
    FROM (SELECT method, parent_id FROM children UNION ALL SELECT method, parent_id FROM rejected)
    GROUP BY method
),
made AS (
    SELECT method, count(*) AS reformulations FROM children GROUP BY method
),
reasons AS (
    SELECT method, sum(n)::BIGINT AS rejected, map(list(reason ORDER BY reason), list(n ORDER BY reason)) AS reject_reasons
    FROM (SELECT method, reason, count(*) AS n FROM rejected GROUP BY ALL)
    GROUP BY method
),
pairs AS (  -- a child measured for the same policy as its parent
    SELECT c.method, cd.policy_id, c.parent_id, c.problem_id AS child_id,
           pd.pass_rate AS parent_pass_rate, cd.pass_rate AS child_pass_rate, cd.band AS child_band
    FROM children c
    JOIN difficulty cd ON cd.problem_id = c.problem_id
    JOIN difficulty pd ON pd.problem_id = c.parent_id AND pd.policy_id = cd.policy_id
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
           avg(child_pass_rate - parent_pass_rate) AS mean_pass_rate_shift
    FROM pairs
    GROUP BY method, policy_id
),
methods AS (
    SELECT method FROM attempts
)
SELECT m.method,
       ms.policy_id,
       coalesce(a.parents_tried, 0) AS parents_tried,
       coalesce(md.reformulations, 0) AS reformulations,
       coalesce(r.rejected, 0) AS rejected,
       coalesce(ms.children_measured, 0) AS children_measured,
       coalesce(ms.parents_with_learnable_child, 0) AS parents_with_learnable_child,
       coalesce(ms.children_learnable, 0) AS children_learnable,
       coalesce(ms.children_too_easy, 0) AS children_too_easy,
       coalesce(ms.children_still_hard, 0) AS children_still_hard,
       ms.mean_parent_pass_rate,
       ms.mean_child_pass_rate,
       ms.mean_pass_rate_shift,
       coalesce(r.reject_reasons, MAP {}::MAP(VARCHAR, BIGINT)) AS reject_reasons
FROM methods m
LEFT JOIN attempts a USING (method)
LEFT JOIN made md USING (method)
LEFT JOIN reasons r USING (method)
LEFT JOIN measured ms USING (method)
ORDER BY m.method, ms.policy_id
