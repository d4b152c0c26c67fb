-- Band drift: every problem measured by two policies, for each ordered pair (policy_from, policy_to):
-- both bands, pass rates and 95 % intervals, and whether the change is credible. In SQL the credible
-- test is the intervals' non-overlap (rose: ci_low_to > ci_high_from), a conservative stand-in for
-- the posterior probability >= 0.95 that `passband drift --from A --to B` computes exactly.
SELECT a.problem_id, a.policy_id AS policy_from, b.policy_id AS policy_to,
       a.n AS n_from, a.n_correct AS n_correct_from, a.pass_rate AS pass_rate_from,
       a.ci_low AS ci_low_from, a.ci_high AS ci_high_from, a.band AS band_from,
       b.n AS n_to, b.n_correct AS n_correct_to, b.pass_rate AS pass_rate_to,
       b.ci_low AS ci_low_to, b.ci_high AS ci_high_to, b.band AS band_to,
       a.band <> b.band AS band_changed,
       CASE WHEN b.ci_low > a.ci_high THEN 'rose' WHEN b.ci_high < a.ci_low THEN 'fell' ELSE 'none' END AS change
FROM difficulty a JOIN difficulty b ON a.problem_id = b.problem_id AND a.policy_id <> b.policy_id
