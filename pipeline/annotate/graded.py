"""The text a flag reads: the part of a completion the verify stage graded (kept apart from pipeline.thinking, whose
source is part of every verdict's key)."""

from __future__ import annotations

from pipeline.thinking import final_section


def graded_text(text: str, thinking_read: bool = True) -> str:
    """The text verify graded a completion's answer on, for the flags to read the same: its final section when verify
    read a thinking block apart (the verdict's ``thinking_chars`` is not null), else the whole completion (a policy
    whose thinking is ``off``: an RL checkpoint whose whole answer ends in a stray ``</think>``)."""
    return final_section(text) if thinking_read else text


def thinking_read(row: dict) -> bool:
    """Whether verify read the row's thinking apart (its ``thinking_chars`` is not null). A row built without the
    column (a caller's own dict) is read as before the column existed: after its thinking."""
    return row.get("thinking_chars", 0) is not None
