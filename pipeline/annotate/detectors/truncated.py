"""``truncated``: the generation hit max_tokens, so the completion is cut off."""

from __future__ import annotations

from pipeline.annotate.detectors import Hit, register


@register("truncated", kind="degeneracy", label="truncated", where="finish_reason = 'length'",
          score_sql="n_tokens::DOUBLE",
          evidence_sql="format('stopped at max_tokens after {{}} tokens ({{}})', n_tokens, status)")
def truncated(row: dict, opts) -> Hit | None:
    """Generation stopped at max_tokens (finish_reason = length). Score: tokens generated."""
    return Hit(float(row["n_tokens"]), f"stopped at max_tokens after {row['n_tokens']} tokens ({row['status']})")
