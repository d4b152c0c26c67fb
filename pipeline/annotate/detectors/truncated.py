"""``truncated``: the generation hit max_tokens, so the completion is cut off."""

from __future__ import annotations

from pipeline.annotate.detectors import Detector, Hit, register


@register
class Truncated(Detector):
    """Generation stopped at max_tokens (finish_reason = length). Score: tokens generated."""

    name = "truncated"
    kind = "degeneracy"
    label = "truncated"
    where = "finish_reason = 'length'"
    score_sql = "n_tokens::DOUBLE"
    evidence_sql = "format('stopped at max_tokens after {{}} tokens ({{}})', n_tokens, status)"

    def detect(self, row: dict) -> Hit | None:
        return Hit(float(row["n_tokens"]), f"stopped at max_tokens after {row['n_tokens']} tokens ({row['status']})")
