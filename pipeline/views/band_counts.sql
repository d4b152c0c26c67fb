-- Problems per policy and difficulty band, with the mean pass rate and band confidence.
SELECT policy_id, band, count(*) AS problems, avg(pass_rate) AS mean_pass_rate,
       avg(band_confidence) AS mean_band_confidence
FROM difficulty
GROUP BY policy_id, band
ORDER BY policy_id, list_position(['too_easy', 'learnable', 'too_hard', 'unsolved'], band)
