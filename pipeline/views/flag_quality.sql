-- Each flag's rate over all rollouts next to the precision and recall measured on labelled completions (docs/flags.md).
SELECT k.flag, k.kind, count(f.flag) AS flagged, round(count(f.flag) / (SELECT count(*) FROM rollouts), 4) AS rate,
       round(k.precision, 2) AS "precision (labelled)", round(k.recall, 2) AS "recall (labelled)"
FROM flag_kinds k LEFT JOIN flags f USING (flag)
GROUP BY k.flag, k.kind, k.precision, k.recall
ORDER BY list_position(['shortcut', 'risk', 'degeneracy'], k.kind), k.flag
