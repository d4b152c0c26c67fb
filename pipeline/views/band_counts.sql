-- Problems per policy and difficulty band, with the mean pass rate and band confidence.
-- Bands are ordered by the bands view (pipeline/bands.py); policy names come from the policies table.
SELECT d.policy_id, any_value(p.name) AS policy, d.band, count(*) AS problems, avg(d.pass_rate) AS mean_pass_rate,
       avg(d.band_confidence) AS mean_band_confidence
FROM difficulty d
LEFT JOIN bands b USING (band)
LEFT JOIN policies p USING (policy_id)
GROUP BY d.policy_id, d.band
ORDER BY d.policy_id, any_value(b.band_order)
