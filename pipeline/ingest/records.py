"""What a source yields (a raw row to validate, or a row already rejected while reading it), and the caps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.config import IngestConfig, VerifyConfig, field_default


@dataclass(frozen=True)
class Limits:
    """Size caps (``ingest.max_*``; defaults: IngestConfig's): a row over one of them is a reject, never stored or truncated."""

    max_question_chars: int = field_default(IngestConfig, "max_question_chars")
    max_answer_chars: int = field_default(VerifyConfig, "max_answer_chars")  # ingest's follows verify's by default
    max_solution_chars: int = field_default(IngestConfig, "max_solution_chars")
    max_field_chars: int = field_default(IngestConfig, "max_field_chars")
    max_metadata_chars: int = field_default(IngestConfig, "max_metadata_chars")
    max_line_bytes: int = field_default(IngestConfig, "max_line_bytes")


@dataclass(slots=True)
class RawRow:
    """One input row, mapped onto problem fields but not yet validated.

    ``question``/``answer``/``solution`` may hold anything the input had (wrong types
    included): validation is the core's job, so every source gets the same rules.
    ``gold_from`` says how to get the gold: ``answer`` (the answer field as is),
    ``gsm8k`` (after ``####`` in the answer field) or ``boxed`` (last ``\\boxed{}`` of the
    solution field). ``source_difficulty`` is the source's own difficulty value as read (a number,
    a fraction ``"3/8"`` or a label ``"Level 3"``, checked by the core), ``source_difficulty_measure``
    what it measures (see :mod:`pipeline.ingest.presets`).
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
    source_difficulty: Any = None
    source_difficulty_measure: str | None = None


@dataclass(slots=True)
class RawReject:
    """A row that could not even be read (bad bytes, bad JSON, too long, too deep, not an object)."""

    source: str
    source_id: str
    reason: str
    detail: str
    excerpt: str = ""
