-- Flags per policy and difficulty band: the counted rollouts (the first n of each problem, those its pass rate is
-- computed from) each flag fired on, their share of the band's counted rollouts, and the flag's precision measured
-- on labelled completions (flag_kinds; docs/flags.md). Every flag appears for every band a policy has (flagged 0).
WITH bands_of AS (
    SELECT d.policy_id, d.band, count(*) AS problems, sum(d.n) AS rollouts FROM difficulty d GROUP BY ALL
),
fired AS (
    SELECT d.policy_id, d.band, f.flag, count(*) AS flagged
    FROM flags f JOIN difficulty d ON d.problem_id = f.problem_id AND d.policy_id = f.policy_id AND f.sample_idx < d.n
    GROUP BY ALL
)
SELECT b.policy_id, pol.name AS policy, b.band, k.flag, k.kind, coalesce(fi.flagged, 0) AS flagged, b.rollouts,
       round(coalesce(fi.flagged, 0) / nullif(b.rollouts, 0), 4) AS rate, round(k.precision, 2) AS "precision (labelled)"
FROM bands_of b
CROSS JOIN flag_kinds k
LEFT JOIN fired fi ON fi.policy_id = b.policy_id AND fi.band = b.band AND fi.flag = k.flag
LEFT JOIN (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id) pol ON pol.policy_id = b.policy_id
LEFT JOIN bands bo ON bo.band = b.band
ORDER BY pol.name, b.policy_id, bo.band_order, list_position(['shortcut', 'risk', 'degeneracy'], k.kind), k.flag
