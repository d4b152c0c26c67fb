-- Problems per policy, table set and difficulty band, with the mean pass rate and band confidence.
-- "set": main (the ingested problems) or reformulated (the children the reformulate stage wrote): the published
-- default config holds the main set's bands, the reformulated config the other; sum over "set" for every problem.
-- Bands are ordered by the bands view (pipeline/bands.py); policy names come from the policies table.
SELECT d.policy_id, any_value(pol.name) AS policy,
       CASE WHEN any_value(p.parent_id) IS NULL THEN 'main' ELSE 'reformulated' END AS "set", d.band,
       count(*) AS problems, avg(d.pass_rate) AS mean_pass_rate, avg(d.band_confidence) AS mean_band_confidence
FROM difficulty d
LEFT JOIN problems p USING (problem_id)
LEFT JOIN bands b USING (band)
LEFT JOIN (SELECT policy_id, any_value(name) AS name FROM policies GROUP BY policy_id) pol USING (policy_id)
GROUP BY d.policy_id, p.parent_id IS NULL, d.band
ORDER BY d.policy_id, "set", any_value(b.band_order)
