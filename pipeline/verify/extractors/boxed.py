"""``boxed``: the content of the last ``\\boxed{}``/``\\fbox{}`` (brace-matched)."""

from __future__ import annotations

from pipeline.verify.extract import read_box, register


@register("boxed")
def boxed(completion: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched); an unclosed one (truncated text) is no answer."""
    return read_box(completion)
