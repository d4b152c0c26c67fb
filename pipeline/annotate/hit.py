"""What a flag detector returns when it fires (:mod:`pipeline.annotate.detectors`): a score and the evidence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    score: float | None
    evidence: str


__all__ = ["Hit"]
