"""``last_number``: the last number anywhere (lenient: off by default)."""

from __future__ import annotations

from pipeline.numbers import ANYWHERE
from pipeline.verify.extract import Extractor, register


@register
class LastNumber(Extractor):
    """The last number in the text (lenient: any number the model wrote last). Not in the default list."""

    name = "last_number"

    def read(self, completion: str) -> str | None:
        nums = ANYWHERE.findall(completion)
        return nums[-1] if nums else None
