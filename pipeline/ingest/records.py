"""What a source yields: a raw row to validate, or a row already rejected while reading it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RawRow:
    """One input row, mapped onto problem fields but not yet validated.

    ``question``/``answer``/``solution`` may hold anything the input had (wrong types
    included): validation is the core's job, so every source gets the same rules.
    ``gold_from`` says how to get the gold: ``answer`` (the answer field as is),
    ``gsm8k`` (after ``####`` in the answer field) or ``boxed`` (last ``\\boxed{}`` of the
    solution field).
    """

    source: str
    source_id: str
    question: Any
    answer: Any = None
    solution: Any = None
    gold_from: str = "answer"
    split: str | None = None
    subject: Any = None
    level: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    excerpt: str = ""


@dataclass(slots=True)
class RawReject:
    """A row that could not even be read (bad bytes, bad JSON, not an object)."""

    source: str
    source_id: str
    reason: str
    detail: str
    excerpt: str = ""
