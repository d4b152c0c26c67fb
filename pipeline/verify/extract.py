"""Final-answer extractors: one signature, one registry, tried in the configured order.

An extractor takes a completion and returns the final answer it finds (a string) or None.
Markdown emphasis (``**47**``, ``**Final Answer:** 47``) is removed before any rule runs.
The embedded model's few-shot style ends "... 3 + 5 = 8. The answer is 8." and MATH-style
completions end "... so the answer is $\\boxed{\\frac{1}{2}}$"::

    >>> extract("3 + 5 = 8. The answer is 8.", extractors=["boxed", "gsm8k", "answer_is"])
    Extraction(answer='8', extractor='answer_is')
    >>> extract("#### 42\\nExtra 7", extractors=["gsm8k"])
    Extraction(answer='42', extractor='gsm8k')

Registered: ``boxed`` (content of the last ``\\boxed{}``/``\\fbox{}``), ``gsm8k`` (the rest of
the line after the last ``####``), ``answer_is`` (after the last "the answer is", "final answer:"
or "answer:", up to the end of its sentence), ``is_the_answer`` (the token before "... is the
answer"), ``last_number`` (the last number anywhere: lenient, off by default).
:func:`candidates` lists *every* answer the rules see, for the ``multiple_answers`` flag.

Bounded on any text: only the last :data:`SEARCH_CHARS` characters of a completion are searched
(a final answer is at its end; a looping or padded completion costs the same as a short one),
every rule is linear in what it reads (no pattern that backtracks over its own matches: is_the_answer
walks back from each phrase instead), and an "answer is" span is read up to :data:`ANSWER_SPAN_CHARS`
characters (longer ones are past ``verify.max_answer_chars`` anyway).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipeline.config import unknown_name
from pipeline.gold import GoldError, last_boxed
from pipeline.numbers import ANYWHERE

Extractor = Callable[[str], str | None]
EXTRACTORS: dict[str, Extractor] = {}

SEARCH_CHARS = 32_768  # the tail of a completion the extractors search for its final answer
ANSWER_SPAN_CHARS = 2_048  # how far past "the answer is" its sentence is read


@dataclass(frozen=True)
class Extraction:
    answer: str
    extractor: str


def register(name: str) -> Callable[[Extractor], Extractor]:
    def deco(fn: Extractor) -> Extractor:
        EXTRACTORS[name] = fn
        return fn

    return deco


def get_extractor(name: str) -> Extractor:
    if name not in EXTRACTORS:
        raise unknown_name("extractor", name, EXTRACTORS)
    return EXTRACTORS[name]


# A sentence ends at a period that is not a decimal point, or at a newline.
_SENTENCE_END = re.compile(r"(?<!\\)\.(?!\d)|\n")
_DOLLAR = re.compile(r"(?<!\\)\$")
_ANSWER_IS = re.compile(r"(?i)\b(?:the\s++)?(?:final\s++)?answer(?:\s++to\s++(?:the|this)\s++(?:question|problem))?"
                        r"(?:\s++is|(?=\s*+:))(?!\s*+(?:correct|right|wrong|incorrect|not|unknown)\b)\s*+[:=]?\s*+")
# markdown emphasis around an answer or a label: "**47**", "**Final Answer:** 47", "__47__"
_EMPHASIS = re.compile(r"\*\*|__")
# "... is the answer": the phrase alone (a whitespace run is entered only at its start), the token found by a walk back
_IS_THE_ANSWER = re.compile(r"(?i)(?<!\s)\s++is\s++the\s++(?:final\s++|correct\s++)?answer\b")
_TOKEN_CHARS = re.compile(r"[\w.,/^{}\\]")
_TOKEN_START = re.compile(r"[\s,;:]")


def _until_sentence_end(text: str) -> str:
    """Text up to the end of its sentence (read up to :data:`ANSWER_SPAN_CHARS`); ``$...$`` spans are kept whole
    (they may hold periods)."""
    text = text[:ANSWER_SPAN_CHARS]
    pos, in_math = 0, False
    while m := _SENTENCE_END.search(text, pos):
        # an escaped \$ is a currency sign, not a delimiter
        in_math ^= len(_DOLLAR.findall(text, pos, m.start())) % 2 == 1
        if not in_math:
            return text[:m.start()]
        close = _DOLLAR.search(text, m.start())  # the end of this math span: the next sentence end is after it
        if close is None:
            return text
        pos, in_math = close.end(), False
    return text


_FILLER = re.compile(r"(?i)^(?:also|just|simply|now|then|therefore|thus|so|exactly|clearly|actually)\s+(?=\S)")


def _clean(answer: str) -> str | None:
    """Trim the answer: surrounding space, trailing punctuation, a leading filler word ("also 6" is 6)."""
    answer = _FILLER.sub("", answer.strip()).rstrip(".,;:!").strip()
    return answer or None


@register("boxed")
def boxed(completion: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched); an unclosed one (truncated text) is no answer."""
    try:
        found = last_boxed(completion)
    except GoldError:
        return None
    return _clean(found) if found is not None else None


@register("gsm8k")
def gsm8k(completion: str) -> str | None:
    """The rest of the line after the last ``####``: ``"#### 42\\nExtra 7"`` gives 42, never 7."""
    if "####" not in completion:
        return None
    line = completion.rsplit("####", 1)[1].lstrip(" \t").split("\n", 1)[0]
    return _clean(line)


@register("answer_is")
def answer_is(completion: str) -> str | None:
    """After the last "the answer is" (or "final answer is:"), up to the end of that sentence."""
    last = None
    for last in _ANSWER_IS.finditer(completion):  # noqa: B007 - the last one is wanted
        pass
    if last is None:
        return None
    rest = completion[last.end():last.end() + ANSWER_SPAN_CHARS]
    if rest.startswith(("\\boxed", "\\fbox")):  # "the answer is \boxed{8}." (None when the box never closes)
        return boxed(rest)
    return _clean(_until_sentence_end(rest))


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


@register("is_the_answer")
def is_the_answer(completion: str) -> str | None:
    """The token before the last "is the answer" ("So, 1708 is the answer.")."""
    found, limit = None, 0
    for m in _IS_THE_ANSWER.finditer(completion):
        token = _token_before(completion, m.start(), limit)
        if token is not None:
            found, limit = token, m.end()
    return _clean(found) if found is not None else None


@register("last_number")
def last_number(completion: str) -> str | None:
    """The last number in the text (lenient: any number the model wrote last). Not in the default list."""
    nums = ANYWHERE.findall(completion)
    return nums[-1] if nums else None


def strip_emphasis(text: str) -> str:
    """Markdown bold/underline markers removed: ``So the final answer is **47**.`` reads as ``... is 47.``"""
    return _EMPHASIS.sub("", text) if "**" in text or "__" in text else text


def extract(completion: str, *, extractors: Sequence[str]) -> Extraction | None:
    """The first configured extractor that finds an answer wins (markdown emphasis removed first), in the
    completion's last :data:`SEARCH_CHARS` characters."""
    completion = strip_emphasis(completion[-SEARCH_CHARS:])
    for name in extractors:
        found = get_extractor(name)(completion)
        if found is not None:
            return Extraction(found, name)
    return None


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*+\{")
_BRACE = re.compile(r"\\.|[{}]", re.S)


def _all_boxed(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}``, brace-matched, in text order: one pass with a stack of open
    braces (linear, also on ``\\boxed{`` repeated without end)."""
    opens = {m.end(): m for m in _BOX_OPEN.finditer(text)}  # position after the box's "{" -> its match
    found: list[tuple[int, str]] = []
    stack: list[int] = []
    for m in _BRACE.finditer(text):
        c = m.group()
        if c == "{":
            stack.append(m.end())
        elif c == "}" and stack:
            start = stack.pop()
            if start in opens and (b := text[start:m.start()].strip()):
                found.append((start, b))
    return [b for _, b in sorted(found)]


def candidates(completion: str) -> list[Extraction]:
    """Every final answer the rules see, in text order of rule (boxed, gsm8k markers, answer-is phrases), in the
    completion's last :data:`SEARCH_CHARS` characters."""
    completion = strip_emphasis(completion[-SEARCH_CHARS:])
    found = [Extraction(b, "boxed") for b in _all_boxed(completion)]
    for part in completion.split("####")[1:]:
        if a := _clean(part.lstrip(" \t").split("\n", 1)[0]):
            found.append(Extraction(a, "gsm8k"))
    for m in _ANSWER_IS.finditer(completion):
        rest = completion[m.end():m.end() + ANSWER_SPAN_CHARS]
        if rest.lstrip().startswith(("\\boxed", "\\fbox")):
            continue  # already counted as a box
        if a := _clean(_until_sentence_end(rest)):
            found.append(Extraction(a, "answer_is"))
    return found
