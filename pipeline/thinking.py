"""A completion's thinking and its final answer section: the verifier grades the final section, the flags read both.

A reasoning model writes ``<think>...</think>`` (or ``<|begin_of_thought|>...<|end_of_thought|>``) before its
final answer; with an R1-distill prompt the opening tag is in the prompt, so only the closing one is in the
completion. :func:`split` finds them in linear time (``str.find``/``rfind``)::

    >>> split("<think>6*7 = 42. The answer is 42.</think> The answer is \\\\boxed{42}.")
    Thinking(thinking='6*7 = 42. The answer is 42.', final=' The answer is \\\\boxed{42}.', closed=True)
    >>> split("<think>6*7 = 42. The answer is 42. Hmm, but it might be 41")   # truncated: no final section
    Thinking(thinking='6*7 = 42. The answer is 42. Hmm, but it might be 41', final='', closed=False)
    >>> split(" 52 - 27 = 25. The answer is 25.")                               # no thinking
    Thinking(thinking=None, final=' 52 - 27 = 25. The answer is 25.', closed=None)

Which part a verdict is graded on is decided by a thinking *mode* (:data:`MODES`), per policy (derived from
its prompt by :func:`mode_for_prompt`) or per call of ``judge``; :func:`answer_section` applies it::

    >>> answer_section("<think>6*7 = 42. The answer is 42. Hmm, but it might be 41", "tags")  # never graded
    Section(text=None, thinking_chars=51, closed=False)
    >>> answer_section("Let me think.</think> So \\\\boxed{42}.", "tags")  # R1: the prompt opened the thinking
    Section(text=' So \\\\boxed{42}.', thinking_chars=13, closed=True)

This module sits below ``verify`` and ``annotate``, which both import it (verify never imports annotate).
"""

from __future__ import annotations

import json
from typing import Literal, NamedTuple

TAGS = (("<think>", "</think>"), ("<|begin_of_thought|>", "<|end_of_thought|>"))
# a SQL predicate over `completion` that holds whenever split() finds a thinking block
SQL_HAS_THINKING = " OR ".join(f"contains(completion, '{tag}')" for pair in TAGS for tag in pair)


class Thinking(NamedTuple):
    thinking: str | None  # the thinking's text (None: the completion has no thinking block)
    final: str  # the text after the thinking ('' when the thinking never closes)
    closed: bool | None  # None: no thinking block


def split(text: str) -> Thinking:
    """The completion's thinking and final section (the last closing tag ends the thinking)."""
    for open_tag, close_tag in TAGS:
        close = text.rfind(close_tag)
        start = text.find(open_tag)
        if close >= 0:
            begin = start + len(open_tag) if 0 <= start < close else 0
            return Thinking(text[begin:close], text[close + len(close_tag):], True)
        if start >= 0:
            return Thinking(text[start + len(open_tag):], "", False)
    return Thinking(None, text, None)


def final_section(text: str) -> str:
    """The text a final answer is read from: after the thinking ('' if it never closes), else all of it."""
    return split(text).final


Mode = Literal["auto", "tags", "off"]
# off: grade the whole completion. tags: the completion is a thinking block (its opening tag may be in the prompt)
# then the answer; the answer is read only after the closing tag, and without one there is none. auto: as tags
# when the completion holds a tag of :data:`TAGS`, else as off.
MODES: tuple[str, ...] = ("auto", "tags", "off")
UNFINISHED = "unfinished_thinking"  # the no_answer detail of a completion whose thinking never closes


class Section(NamedTuple):
    text: str | None  # the text to grade (None: the thinking never closed, there is no answer)
    thinking_chars: int | None  # the thinking's length in characters (None: no thinking block read)
    closed: bool | None  # whether the thinking closed (None: no thinking block read)


def has_tag(text: str) -> bool:
    """Whether ``text`` holds an opening or closing tag of :data:`TAGS`."""
    return any(tag in text for pair in TAGS for tag in pair)


def answer_section(text: str, mode: str) -> Section:
    """The part of a completion a verdict is graded on, under thinking ``mode`` (one of :data:`MODES`).

    Under tags (and auto with a tag present) the answer is the text after the last closing tag, cut at a
    thinking block opened again after it; a thinking block that never closes (truncated at max_tokens, or a
    ``tags`` completion with no tag at all: the prompt opened it) leaves nothing to grade.
    """
    if mode not in MODES:
        raise ValueError(f"unknown thinking mode {mode!r}; known: {', '.join(MODES)}")
    if mode == "off" or (mode == "auto" and not has_tag(text)):
        return Section(text, None, None)
    part = split(text)
    if part.thinking is None:  # tags, no tag at all: the prompt opened the thinking and it never closed
        return Section(None, len(text), False)
    if not part.closed:
        return Section(None, len(part.thinking), False)
    final = part.final
    for open_tag, _ in TAGS:
        again = final.find(open_tag)
        if again >= 0:
            final = final[:again]
    return Section(final, len(part.thinking), True)


def mode_for_prompt(rendered: str | None, *, enable_thinking: bool | None = None) -> str:
    """A policy's default mode from its prompt: ``tags`` when the template turns thinking on (Qwen3's
    ``enable_thinking: true``) or the rendered prompt ends inside an open thinking block (R1-distill's
    ``<think>\\n``); else ``auto``."""
    if enable_thinking:
        return "tags"
    if rendered:
        for open_tag, close_tag in TAGS:
            start = rendered.rfind(open_tag)
            if start >= 0 and rendered.find(close_tag, start) < 0 and not rendered[start + len(open_tag):].strip():
                return "tags"
    return "auto"


def thinking_of(identity_json: str) -> str | None:
    """A policies row's own thinking mode, from its ``identity`` column (None: the verifier's default)."""
    mode = json.loads(identity_json).get("thinking")
    return mode if mode in MODES else None
