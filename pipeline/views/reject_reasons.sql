-- Rejected rows per stage, source and reason.
SELECT stage, source, reason, count(*) AS n
FROM rejects
GROUP BY ALL
ORDER BY n DESC
