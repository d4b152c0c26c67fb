"""``repetition_loop``: the text loops (few distinct word 4-grams, or it compresses to almost nothing)."""

from __future__ import annotations

import zlib
from collections import Counter

from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.config import Model


def _loop_words(text: str) -> list[str]:
    """The words of ``text``, a word holding a digit as ``#``. Each distinct word is tested once: a long chain of
    thought repeats its words, and the test of every word was the largest cost of annotate on long completions."""
    words = text.split()
    mark = {w: "#" if any(ch.isdigit() for ch in w) else w for w in set(words)}
    return [mark[w] for w in words]


# prefilter: min_words words need at least that many characters and a space between each two
@register
class RepetitionLoop(Detector):
    """The text loops: few distinct word 4-grams, or text that compresses to almost nothing.

    Fires when distinct 4-grams / all 4-grams < ``max_distinct_ratio`` (with at least
    ``min_words`` words; a word holding a digit counts as ``#``, so "She has 72 stickers.
    She has 720 stickers. ..." loops), or zlib shrinks 200+ characters below 15 %. Score: 1 - distinct ratio.
    """

    name = "repetition_loop"
    kind = "degeneracy"
    label = "repetition"
    where = "length(completion) >= 2 * {opts.min_words} - 1"

    class Options(Model):
        min_words: int = Field(24, ge=8, description="words a completion needs before its 4-grams are read")
        max_distinct_ratio: float = Field(0.5, gt=0, lt=1,
                                          description="distinct word 4-grams / all 4-grams below this is a loop")

    def detect(self, row: dict) -> Hit | None:
        text = row["completion"]
        words = _loop_words(text)
        if len(words) >= self.options.min_words:
            grams = Counter(zip(words, words[1:], words[2:], words[3:], strict=False))
            ratio = len(grams) / sum(grams.values())
            if ratio < self.options.max_distinct_ratio:
                gram, n = grams.most_common(1)[0]
                return Hit(1 - ratio, f"{ratio:.0%} distinct 4-grams; {' '.join(gram)!r} x{n}")
        if len(text) >= 200:
            packed = len(zlib.compress(text.encode())) / len(text.encode())
            if packed < 0.15:
                return Hit(1 - packed, f"compresses to {packed:.0%} of {len(text)} characters")
        return None
