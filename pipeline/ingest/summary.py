"""The counts of one ingest run and the invariant they keep: every row read is a problem, a reject or a duplicate.

Below both :mod:`pipeline.ingest.core` (which checks rows) and :mod:`pipeline.ingest.fold` (which counts them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.errors import PassbandError


class InvariantError(PassbandError):
    pass


@dataclass
class IngestSummary:
    """The counts of one ingest run (what ``data/metrics/ingest.json`` holds)."""

    rows_read: int
    problems: int
    rejects: int
    duplicates: int
    per_source: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    # source -> gold lint defect -> problems with it (and rows rejected for an unusable one): pipeline/ingest/gold_lint.py
    gold_issues: dict[str, dict[str, int]] = field(default_factory=dict)

    def metrics(self) -> dict:
        return {
            "rows_read": self.rows_read,
            "problems": self.problems,
            "rejects": self.rejects,
            "duplicates": self.duplicates,
            "reject_reasons": dict(sorted(self.reasons.items())),
            "sources": self.per_source,
            "gold_issues": self.gold_issues,
        }


def check_invariant(result: IngestSummary) -> None:
    total = result.problems + result.rejects + result.duplicates
    if total != result.rows_read:
        raise InvariantError(
            f"rows read {result.rows_read} != problems {result.problems} + rejects "
            f"{result.rejects} + duplicates {result.duplicates}"
        )
    for src, c in result.per_source.items():
        if c["read"] != c["problems"] + c["rejects"] + c["duplicates"]:
            raise InvariantError(f"source {src}: {c}")


__all__ = ["IngestSummary", "InvariantError", "check_invariant"]
