-- Per problem and policy: correct rollouts and how many carry a shortcut flag, with the flags seen.
-- Problems whose correct samples are mostly flagged: WHERE flagged_share > 0.5.
SELECT d.problem_id, d.policy_id, pol.name AS policy, d.band, d.n_correct, d.flagged_correct_rate AS flagged_share,
       list_sort(list_distinct(list(f.flag) FILTER (WHERE f.flag IS NOT NULL))) AS flags_seen
FROM difficulty d
LEFT JOIN flags f ON f.problem_id = d.problem_id AND f.policy_id = d.policy_id
  AND f.flag IN (SELECT flag FROM flag_kinds WHERE kind = 'shortcut')
LEFT JOIN policies pol ON pol.policy_id = d.policy_id
WHERE d.n_correct > 0
GROUP BY d.problem_id, d.policy_id, pol.name, d.band, d.n_correct, d.flagged_correct_rate
ORDER BY flagged_share DESC, d.problem_id
