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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipeline.config import unknown_name
from pipeline.gold import GoldError, last_boxed

Extractor = Callable[[str], str | None]
EXTRACTORS: dict[str, Extractor] = {}


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
_ANSWER_IS = re.compile(r"(?i)\b(?:the\s+)?(?:final\s+)?answer(?:\s+to\s+(?:the|this)\s+(?:question|problem))?(?:\s+is|(?=\s*:))"
                        r"(?!\s*(?:correct|right|wrong|incorrect|not|unknown)\b)\s*[:=]?\s*")
# markdown emphasis around an answer or a label: "**47**", "**Final Answer:** 47", "__47__"
_EMPHASIS = re.compile(r"\*\*|__")
_IS_THE_ANSWER = re.compile(r"(?i)(?:^|[\s,;:])(-?\$?[\w.,/^{}\\]+?)\$?\s+is\s+the\s+(?:final\s+|correct\s+)?answer\b")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def _until_sentence_end(text: str) -> str:
    """Text up to the end of its sentence; ``$...$`` spans are kept whole (they may hold periods)."""
    if "$" not in text:  # the common case, without the walk
        m = _SENTENCE_END.search(text)
        return text[:m.start()] if m else text
    out, i, in_math = [], 0, False
    while i < len(text):
        c = text[i]
        if c == "$" and text[i - 1:i] != "\\":  # an escaped \$ is a currency sign, not a delimiter
            in_math = not in_math
        elif not in_math and _SENTENCE_END.match(text, i):
            break
        out.append(c)
        i += 1
    return "".join(out)


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
    matches = list(_ANSWER_IS.finditer(completion))
    if not matches:
        return None
    rest = completion[matches[-1].end():]
    if rest.startswith(("\\boxed", "\\fbox")):  # "the answer is \boxed{8}." (None when the box never closes)
        return boxed(rest)
    return _clean(_until_sentence_end(rest))


@register("is_the_answer")
def is_the_answer(completion: str) -> str | None:
    """The token before the last "is the answer" ("So, 1708 is the answer.")."""
    matches = list(_IS_THE_ANSWER.finditer(completion))
    return _clean(matches[-1].group(1)) if matches else None


@register("last_number")
def last_number(completion: str) -> str | None:
    """The last number in the text (lenient: any number the model wrote last). Not in the default list."""
    nums = _NUMBER.findall(completion)
    return nums[-1] if nums else None


def strip_emphasis(text: str) -> str:
    """Markdown bold/underline markers removed: ``So the final answer is **47**.`` reads as ``... is 47.``"""
    return _EMPHASIS.sub("", text) if "**" in text or "__" in text else text


def extract(completion: str, *, extractors: Sequence[str]) -> Extraction | None:
    """The first configured extractor that finds an answer wins (markdown emphasis removed first)."""
    completion = strip_emphasis(completion)
    for name in extractors:
        found = get_extractor(name)(completion)
        if found is not None:
            return Extraction(found, name)
    return None


def _all_boxed(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}``, brace-matched, in text order."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "\\":
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0 and (b := text[m.end():i - 1].strip()):
            out.append(b)
    return out


def candidates(completion: str) -> list[Extraction]:
    """Every final answer the rules see, in text order of rule (boxed, gsm8k markers, answer-is phrases)."""
    completion = strip_emphasis(completion)
    found = [Extraction(b, "boxed") for b in _all_boxed(completion)]
    for part in completion.split("####")[1:]:
        if a := _clean(part.lstrip(" \t").split("\n", 1)[0]):
            found.append(Extraction(a, "gsm8k"))
    for m in _ANSWER_IS.finditer(completion):
        rest = completion[m.end():]
        if rest.lstrip().startswith(("\\boxed", "\\fbox")):
            continue  # already counted as a box
        if a := _clean(_until_sentence_end(rest)):
            found.append(Extraction(a, "answer_is"))
    return found
