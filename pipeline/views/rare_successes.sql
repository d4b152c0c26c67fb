-- Correct rollouts in rarely solved groups, with the GRPO advantage each would get (rare_success flag).
SELECT f.problem_id, f.policy_id, pol.name AS policy, f.sample_idx, f.score AS advantage, d.n_correct, d.n, d.pass_rate,
       p.question, p.answer AS gold, r.completion
FROM flags f
JOIN difficulty d USING (problem_id, policy_id)
JOIN problems p USING (problem_id)
JOIN rollouts r USING (problem_id, policy_id, sample_idx)
LEFT JOIN policies pol ON pol.policy_id = f.policy_id
WHERE f.flag = 'rare_success'
ORDER BY advantage DESC, f.problem_id, f.sample_idx
