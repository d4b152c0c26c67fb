"""``boxed``: the content of the last ``\\boxed{}``/``\\fbox{}`` (brace-matched)."""

from __future__ import annotations

from pipeline.verify.extract import Extractor, Found, read_box, register, repeated_box

REPEATED_BOX = ("repeated_box",)


@register
class Boxed(Extractor):
    """Content of the last ``\\boxed{...}`` (brace-matched). An unclosed last one (text cut at the token limit) is no
    answer, unless the two closed boxes before it state the same answer: a completion looping on its final box
    until it was cut (``repeated_box``)."""

    name = "boxed"

    def read(self, completion: str) -> str | Found | None:
        found = read_box(completion)
        if found is not None:
            return found
        again = repeated_box(completion)
        return (again, REPEATED_BOX) if again is not None else None
