"""What a rollout's own working says about its answer, for the answer-key score (:mod:`.gold_suspicion`).

A policy that repeats one wrong answer usually repeats one slip: the 135M model answers "8 * 4 = 24. The answer is
24." on eight samples of eight, and a key moved by one is met by "3 + 5 = 8. The answer is 8." on most samples. The
counts cannot tell these apart; the working can. Each read rollout gets one of :data:`KINDS`:

- ``false``: its working (the text verify graded, :func:`~pipeline.annotate.graded.graded_text`) holds an arithmetic
  statement that is false (``8 * 4 = 24``), read exactly by :mod:`pipeline.arith` as ``unsupported_answer`` reads it;
- ``supported``: no false statement, and a true one computes its answer (or an equation it solves has the answer as
  its root);
- ``none``: neither (no working, working in words, or an answer this reader cannot evaluate).

The score weighs a class of rollouts by the majority kind of its first :data:`READ_PER_CLASS` rollouts, against how
often the run's right-answer classes and its wrong-answer classes show each kind (fitted per run: nothing here says
which kind means what).
"""

from __future__ import annotations

from functools import lru_cache

from pipeline.annotate.graded import graded_text
from pipeline.arith import answer_value, gives, solutions, statements

KINDS = ("false", "supported", "none")
READ_PER_CLASS = 3  # rollouts read per (problem, answer class): a class repeats one working, and reading is the cost
_CACHED_CHARS = 2000  # a class's samples often repeat one short text


def working_kind(completion: str, extracted: str | None, thinking: bool = True) -> str:
    """``false``, ``supported`` or ``none`` (:data:`KINDS`) for one rollout and its extracted answer; ``thinking``:
    verify read the completion's thinking apart (its verdict's ``thinking_chars`` is not null)."""
    if len(completion) <= _CACHED_CHARS:
        return _kind_cached(completion, extracted, thinking)
    return _kind(completion, extracted, thinking)


@lru_cache(maxsize=65536)
def _kind_cached(completion: str, extracted: str | None, thinking: bool) -> str:
    return _kind(completion, extracted, thinking)


def _kind(completion: str, extracted: str | None, thinking: bool) -> str:
    working = graded_text(completion, thinking)
    stmts = statements(working)
    if any(s.ok is False for s in stmts):
        return "false"
    answer = answer_value(extracted) if extracted is not None else None
    if answer is not None and (any(gives(s, answer) for s in stmts) or answer in solutions(working)):
        return "supported"
    return "none"
