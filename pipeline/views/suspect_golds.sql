-- Golds the rollouts doubt: the policy's rollouts agree on one answer that is not the gold (gold_suspect: gold_suspicion
-- at or above annotate.gold_suspicion_threshold), with the policies that agree and the gold lint's findings.
SELECT d.problem_id, pol.name AS policy, round(d.gold_suspicion, 4) AS gold_suspicion, p.answer AS gold,
       d.modal_answer, round(d.modal_share, 3) AS modal_share, d.n, d.n_correct, d.pass_rate,
       count(*) OVER (PARTITION BY d.problem_id) AS suspect_policies, p.gold_issues, p.source, p.question
FROM difficulty d
JOIN problems p USING (problem_id)
LEFT JOIN policies pol ON pol.policy_id = d.policy_id
WHERE d.gold_suspect
ORDER BY d.gold_suspicion DESC, suspect_policies DESC, d.problem_id, policy
