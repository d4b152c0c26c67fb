"""``gsm8k``: the rest of the line after the last ``####`` (GSM8K's own answer marker)."""

from __future__ import annotations

from pipeline.verify.extract import Extractor, clean_answer, register


@register
class Gsm8k(Extractor):
    """The rest of the line after the last ``####``: ``"#### 42\\nExtra 7"`` gives 42, never 7."""

    name = "gsm8k"

    def read(self, completion: str) -> str | None:
        if "####" not in completion:
            return None
        line = completion.rsplit("####", 1)[1].lstrip(" \t").split("\n", 1)[0]
        return clean_answer(line)
