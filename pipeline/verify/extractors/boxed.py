"""``boxed``: the content of the last ``\\boxed{}``/``\\fbox{}`` (brace-matched)."""

from __future__ import annotations

from pipeline.verify.extract import read_box, register_detailed, repeated_box

REPEATED_BOX = ("repeated_box",)


@register_detailed("boxed")
def boxed(completion: str) -> tuple[str, tuple[str, ...]] | None:
    """Content of the last ``\\boxed{...}`` (brace-matched). An unclosed last one (text cut at the token limit) is no
    answer, unless the two closed boxes before it state the same answer: a completion looping on its final box
    until it was cut (``repeated_box``)."""
    found = read_box(completion)
    if found is not None:
        return found, ()
    again = repeated_box(completion)
    return (again, REPEATED_BOX) if again is not None else None
