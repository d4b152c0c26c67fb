"""``is_the_answer``: the token before the last "... is the answer" (a walk back, linear on any text)."""

from __future__ import annotations

import re

from pipeline.verify.extract import HEDGED, Read, clean_answer, conditional_before, register_detailed, until_sentence_end

# "... is the answer": the phrase alone (a whitespace run is entered only at its start), the token found by a walk back
_IS_THE_ANSWER = re.compile(r"(?i)(?<!\s)\s++is\s++the\s++(?P<adj>final\s++|correct\s++|right\s++)?answer\b")
_TOKEN_CHARS = re.compile(r"[\w.,/^{}\\]")
_TOKEN_START = re.compile(r"[\s,;:]")


def _token_before(text: str, end: int, limit: int) -> str | None:
    """The token that ends at ``end`` (before "is the answer"), not reaching back past ``limit``: what
    ``(?:^|[\\s,;:])(-?\\$?[\\w.,/^{}\\\\]+?)\\$?`` would match there, found by one walk back (linear)."""
    if end - 1 >= limit and text[end - 1] == "$":
        end -= 1
    i = end
    while i - 1 >= limit and _TOKEN_CHARS.match(text, i - 1):
        i -= 1
    if i == end:
        return None
    start = i
    if start - 1 >= limit and text[start - 1] == "$":
        start -= 1
    if start - 1 >= limit and text[start - 1] == "-":
        start -= 1
    for s in dict.fromkeys((start, i)):  # with the sign and dollar, then without them
        if s == 0 or (s - 1 >= limit and _TOKEN_START.match(text, s - 1)):
            return text[s:end]
    comma = text.find(",", i, end - 1)  # the token may start after a comma (itself a separator) inside the run
    return text[comma + 1:end] if comma >= 0 else None


def _read_is_the_answer(completion: str) -> Read:
    """The last "... is the answer" phrase's token and policies (``(None, HEDGED)``: that phrase is a question or
    a condition; ``(None, ())``: no phrase with a token)."""
    token, last, limit = None, None, 0
    for m in _IS_THE_ANSWER.finditer(completion):
        t = _token_before(completion, m.start(), limit)
        if t is not None:
            token, last, limit = t, m, m.end()
    if last is None:
        return None, ()
    if conditional_before(completion, last.start()) or until_sentence_end(completion[last.end():])[1]:
        return None, HEDGED
    adj = (last.group("adj") or "").strip().lower()
    return clean_answer(token), ("right_answer",) if adj in ("right", "correct") else ()


def hedged(completion: str) -> bool:
    """Whether the last "... is the answer" phrase was passed over as a question or a condition."""
    return _read_is_the_answer(completion) == (None, HEDGED)


@register_detailed("is_the_answer", hedged=hedged)
def is_the_answer(completion: str) -> tuple[str, tuple[str, ...]] | None:
    """The token before the last "is the answer" ("So, 1708 is the answer.", "$1250 is the right answer."); none
    when that phrase is a question ("so 5 is the answer?") or a condition ("if 5 is the answer, ...")."""
    answer, used = _read_is_the_answer(completion)
    return (answer, used) if answer is not None else None
