"""``is_the_answer``: the token before the last "... is the answer" (a walk back, linear on any text), or, for a
back-reference ("I think that's the answer."), the value the sentence before states."""

from __future__ import annotations

import re

from pipeline.verify.extract import (
    HEDGED,
    Extractor,
    Found,
    Read,
    clean_answer,
    conditional_before,
    register,
    until_sentence_end,
)

# "... is the answer": the phrase alone (a whitespace run is entered only at its start), the token found by a walk back
_IS_THE_ANSWER = re.compile(r"(?i)(?<!\s)\s++is\s++the\s++(?P<adj>final\s++|correct\s++|right\s++)?answer\b")
_TOKEN_CHARS = re.compile(r"[\w.,/^{}\\]")
_TOKEN_START = re.compile(r"[\s,;:]")
# "that's the answer", "this is the final answer", "it is the correct answer": the value is the previous sentence's
_BACKREF = re.compile(r"(?i)\b(?:that|this|it)(?:'s|\u2019s|\s++is)\s++(?:the|my|our)\s++"
                      r"(?P<adj>final\s++|correct\s++|right\s++)?answer\b")
_SENTENCE_ENDS = re.compile(r"\.(?!\d)|[!?\n]")
_VALUE = re.compile(r"(?<![\w.])-?\$?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?%?(?![\w])")


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


def _back_reference(completion: str, m: re.Match) -> str | None:
    """The value a back-reference points at: the last number of its own sentence before it ("so 9, that's the
    answer"), else of the sentence before ("... has 9 elements. I think that's the answer."); never further back."""
    ends = [e.end() for e in _SENTENCE_ENDS.finditer(completion, max(0, m.start() - 4096), m.start())]
    start = ends[-1] if ends else max(0, m.start() - 4096)
    own = _VALUE.findall(completion, start, m.start())
    if own:
        return own[-1]
    if not ends:
        return None
    prev = ends[-2] if len(ends) > 1 else max(0, m.start() - 4096)
    found = _VALUE.findall(completion, prev, start)
    return found[-1] if found else None


def _read_is_the_answer(completion: str) -> Read:
    """The last "... is the answer" phrase's token and policies (``(None, HEDGED)``: that phrase is a question or
    a condition; ``(None, ())``: no phrase with a token)."""
    token, last, limit = None, None, 0
    for m in _IS_THE_ANSWER.finditer(completion):
        t = _token_before(completion, m.start(), limit)
        if t is not None:
            token, last, limit = t, m, m.end()
    back = None
    for back in _BACKREF.finditer(completion):  # noqa: B007 - the last one
        pass
    if back is not None and last is not None and back.end() < last.end():
        back = None  # an "X is the answer" after it is the answer
    if back is not None and (value := _back_reference(completion, back)) is None:
        return None, ()  # "That is the answer." after a sentence with no value: it points at nothing readable
    if back is not None:
        if conditional_before(completion, back.start()) or until_sentence_end(completion[back.end():])[1]:
            return None, HEDGED
        return clean_answer(value), ("back_reference",)
    if last is None:
        return None, ()
    if conditional_before(completion, last.start()) or until_sentence_end(completion[last.end():])[1]:
        return None, HEDGED
    adj = (last.group("adj") or "").strip().lower()
    return clean_answer(token), ("right_answer",) if adj in ("right", "correct") else ()


@register
class IsTheAnswer(Extractor):
    """The token before the last "is the answer" ("So, 1708 is the answer.", "$1250 is the right answer."); none
    when that phrase is a question ("so 5 is the answer?") or a condition ("if 5 is the answer, ...")."""

    name = "is_the_answer"

    def read(self, completion: str) -> Found | None:
        answer, used = _read_is_the_answer(completion)
        return (answer, used) if answer is not None else None

    def passed_over(self, completion: str) -> bool:
        """Whether the last "... is the answer" phrase was passed over as a question or a condition."""
        return _read_is_the_answer(completion) == (None, HEDGED)
