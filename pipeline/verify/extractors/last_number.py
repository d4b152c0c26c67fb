"""``last_number``: the last number anywhere (lenient: off by default)."""

from __future__ import annotations

from pipeline.numbers import ANYWHERE
from pipeline.verify.extract import register


@register("last_number")
def last_number(completion: str) -> str | None:
    """The last number in the text (lenient: any number the model wrote last). Not in the default list."""
    nums = ANYWHERE.findall(completion)
    return nums[-1] if nums else None
