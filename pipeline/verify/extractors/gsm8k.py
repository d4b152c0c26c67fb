"""``gsm8k``: the rest of the line after the last ``####`` (GSM8K's own answer marker)."""

from __future__ import annotations

from pipeline.verify.extract import clean_answer, register


@register("gsm8k")
def gsm8k(completion: str) -> str | None:
    """The rest of the line after the last ``####``: ``"#### 42\\nExtra 7"`` gives 42, never 7."""
    if "####" not in completion:
        return None
    line = completion.rsplit("####", 1)[1].lstrip(" \t").split("\n", 1)[0]
    return clean_answer(line)
