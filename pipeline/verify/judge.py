"""One public call for one verdict: ``judge(gold, completion)``, and ``judge_many`` for a batch.

The verify stage, the benchmarks and the trainers' reward functions all grade through here, so
a completion gets the same verdict wherever it is judged::

    >>> judge("8", "3 + 5 = 8. The answer is 8.")          # doctest: +SKIP
    Judgement(status='correct', extracted='8', extractor='answer_is', detail=None)
    >>> judge_many([("8", "#### 9"), ("1/2", "so $\\\\boxed{0.5}$")])   # doctest: +SKIP
    [Judgement(status='incorrect', extracted='9', extractor='gsm8k', detail=None),
     Judgement(status='correct', extracted='0.5', extractor='boxed', detail=None)]
    >>> judge("42", "<think>6*7 = 42. The answer is 42. Hmm, but it might be 41")   # doctest: +SKIP
    Judgement(status='no_answer', extracted=None, extractor=None, detail='unfinished_thinking', thinking_chars=51,
              thinking_closed=False)

Steps, for each (gold, completion): cut the text the answer is read from by the thinking mode
(:func:`pipeline.thinking.answer_section`: ``thinking="auto"`` by default, the ``verify.thinking`` setting:
only the text after ``</think>`` when the completion holds a thinking tag; ``"tags"`` also when the prompt
opened the thinking and the completion holds no tag; ``"off"`` the whole text). A thinking block that
never closes (truncated at max_tokens) is ``no_answer`` with detail ``unfinished_thinking``, never
graded from inside. Then extract the final answer with the extractors in order
(:mod:`pipeline.verify.extract`; default ``verify.extractors``), cap its length
(``max_answer_chars``), then grade it against the gold (:func:`pipeline.verify.grader.grade`).
Two plain numbers (integers, decimals, ``a/b``, ``\\frac{a}{b}``) are decided in the caller's process
by :func:`~pipeline.verify.grader.fast_grade` (exact arithmetic, microseconds, the verdict
math-verify gives); everything else goes to the bounded worker pool (:mod:`pipeline.verify.pool`):
each check runs in a worker process under a CPU-time bound (``timeout_s`` -> ``timeout``) and an
address-space limit (``memory_mb`` -> ``error``). No SIGALRM anywhere: the pool's kill is the only
clock. Extraction runs in the caller's process too, linear in the text and on its last
:data:`~pipeline.verify.extract.SEARCH_CHARS` characters only. Identical (gold, answer) pairs are
graded once per call.

``options`` are the stage's settings: a :class:`~pipeline.config.VerifyConfig`, or a mapping with
any of its keys (``timeout_s``, ``memory_mb``, ``max_answer_chars``, ``options`` for math-verify's
knobs, ...); an unknown key is an error. None means the defaults, which are params.yaml's.

Callable from anywhere, with no set-up: a plain script without an ``if __name__ == "__main__":``
guard, ``python -c``, a notebook, several threads at once, Ray tasks and actors, a process that has
loaded torch. The worker pool is persistent (:func:`pipeline.verify.pool.shared_pool`: started on the
first check that needs sympy, kept for the next call) and its workers never import the caller's main
module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config import ConfigError, VerifyConfig, parse_options
from pipeline.thinking import MODES, UNFINISHED, answer_section
from pipeline.verify.extract import extract, get_extractor, marked_final, refused
from pipeline.verify.grader import STATUSES, Grade, GradeOptions, fast_grade
from pipeline.verify.policies import detail_with, with_policies
from pipeline.verify.pool import shared_pool

__all__ = ["STATUSES", "Judgement", "judge", "judge_config", "judge_many"]


@dataclass(frozen=True)
class Judgement:
    """One verdict: ``status`` is one of :data:`STATUSES`; ``extracted`` the final answer found (None when
    none), ``extractor`` the rule that found it, ``detail`` why (for no_answer, timeout, error and policies);
    ``thinking_chars`` and ``thinking_closed`` the thinking block the mode read apart (None: none read)."""

    status: str
    extracted: str | None = None
    extractor: str | None = None
    detail: str | None = None
    thinking_chars: int | None = None
    thinking_closed: bool | None = None

    def __repr__(self) -> str:  # the thinking fields only when a thinking block was read
        shown = ["status", "extracted", "extractor", "detail"]
        if self.thinking_closed is not None:
            shown += ["thinking_chars", "thinking_closed"]
        return f"Judgement({', '.join(f'{k}={getattr(self, k)!r}' for k in shown)})"


@dataclass
class JudgedBatch:
    judgements: list[Judgement]
    checks: int  # distinct (gold, answer) pairs graded (in-process or in the pool)
    restarts: int  # workers killed (timeouts) or lost
    pooled: int = 0  # of the checks, those the worker pool graded (the rest: fast_grade in-process)


def judge_config(options: VerifyConfig | Mapping[str, Any] | None,
                 extractors: Sequence[str] | None = None, thinking: str | None = None) -> VerifyConfig:
    """The settings ``options`` stands for, with ``extractors`` and ``thinking`` (when given) in place of the
    configured ones."""
    if options is None:
        config = VerifyConfig()
    elif isinstance(options, VerifyConfig):
        config = options
    elif isinstance(options, Mapping):
        config = parse_options(VerifyConfig, dict(options), where="judge options")
    else:
        raise ConfigError(f"judge options must be a VerifyConfig or a mapping, got {type(options).__name__}")
    if extractors is not None:
        if isinstance(extractors, str):
            raise ConfigError(f"extractors must be a list of names, got the string {extractors!r}")
        config = config.model_copy(update={"extractors": list(extractors)})
    if thinking is not None:
        check_mode(thinking)
        config = config.model_copy(update={"thinking": thinking})
    for name in config.extractors:  # a bad name fails before any work
        get_extractor(name)
    return config


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"thinking must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def grade_options(config: VerifyConfig) -> GradeOptions:
    return parse_options(GradeOptions, config.options, where="verify.options")


CUT_UNMARKED = "cut at the token limit, and the answer is not marked final (\\boxed{}, ####, 'final answer')"


def judge_batch(pairs: Sequence[tuple[str, str]], *, config: VerifyConfig, workers: int | None = None,
                on_done: Callable[[int], None] | None = None, modes: Sequence[str] | None = None,
                cut: Sequence[bool] | None = None) -> JudgedBatch:
    """The work behind :func:`judge_many` (and the verify stage): ``on_done(n)`` as n more pairs are judged.
    ``modes``: each pair's thinking mode (None: ``config.thinking`` for all). ``cut``: whether each completion was
    cut at the token limit (finish_reason ``length``): such a one answers only from an explicit final marker
    (:func:`~pipeline.verify.extract.marked_final`; else ``no_answer``, policy ``cut_unmarked``)."""
    options = grade_options(config)
    n = len(pairs)
    if modes is not None and len(modes) != n:
        raise ValueError(f"{len(modes)} thinking modes for {n} pairs")
    if cut is not None and len(cut) != n:
        raise ValueError(f"{len(cut)} finish flags for {n} pairs")
    extracted: list[str | None] = [None] * n
    extractor: list[str | None] = [None] * n
    used: list[tuple[str, ...]] = [()] * n  # the policies each extraction used (named before the grade's own)
    grades: list[Grade | None] = [None] * n
    sections = []
    pending: dict[tuple[str, str], list[int]] = {}
    for i, (gold, text) in enumerate(pairs):
        section = answer_section(text, modes[i] if modes is not None else config.thinking)
        sections.append(section)
        if section.text is None:
            grades[i] = Grade("no_answer", UNFINISHED)
            continue
        found = extract(section.text, extractors=config.extractors)
        if found is None:
            grades[i] = Grade("no_answer", detail_with(refused(section.text, extractors=config.extractors),
                                                       "no extractor found an answer"))
            continue
        extractor[i] = found.extractor
        used[i] = found.policies
        if cut is not None and cut[i] and not marked_final(found, section.text):
            extracted[i] = found.answer[: config.max_answer_chars]
            grades[i] = Grade("no_answer", detail_with(("cut_unmarked",), CUT_UNMARKED))
            continue
        if len(found.answer) > config.max_answer_chars:
            extracted[i] = found.answer[: config.max_answer_chars]
            grades[i] = Grade("no_answer", f"answer has {len(found.answer)} characters (cap {config.max_answer_chars})")
            continue
        extracted[i] = found.answer
        pending.setdefault((gold, found.answer), []).append(i)
    settled = n - sum(map(len, pending.values()))
    if on_done and settled:
        on_done(settled)

    pooled: list[tuple[str, str]] = []
    fast = 0
    for check, idx in pending.items():
        g = fast_grade(*check, options)
        if g is None:
            pooled.append(check)
            continue
        for i in idx:
            grades[i] = g
        fast += len(idx)
    if on_done and fast:
        on_done(fast)
    restarts = 0
    if pooled:
        def done(j: int) -> None:
            if on_done:
                on_done(len(pending[pooled[j]]))

        pool = shared_pool(workers=workers or config.workers, timeout_s=config.timeout_s, memory_mb=config.memory_mb,
                           options=options)
        before = pool.restarts
        results = pool.map(pooled, on_done=done, workers=workers or config.workers)
        restarts = pool.restarts - before
        for check, g in zip(pooled, results, strict=True):
            for i in pending[check]:
                grades[i] = g
    judgements = [Judgement(g.status, extracted[i], extractor[i], with_policies(used[i], g.detail),  # type: ignore[union-attr]
                            sections[i].thinking_chars, sections[i].closed)
                  for i, g in enumerate(grades)]
    return JudgedBatch(judgements, len(pending), restarts, len(pooled))


def judge_many(pairs: Iterable[tuple[str, str]], extractors: Sequence[str] | None = None, *,
               options: VerifyConfig | Mapping[str, Any] | None = None, workers: int | None = None,
               thinking: str | None = None) -> list[Judgement]:
    """Judgements for (gold, completion) pairs, in order. ``workers`` defaults to the settings' ``workers``;
    ``thinking`` ("auto", "tags" or "off") to the settings' ``thinking`` ("auto" unless set)."""
    config = judge_config(options, extractors, thinking)
    pairs = [(str(g), str(c)) for g, c in pairs]
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    return judge_batch(pairs, config=config, workers=workers).judgements


def judge(gold: str, completion: str, extractors: Sequence[str] | None = None, *,
          options: VerifyConfig | Mapping[str, Any] | None = None, thinking: str | None = None) -> Judgement:
    """The verdict on one completion against one gold, with the stage's extraction, policies and bounds
    (``thinking``: as in :func:`judge_many`)."""
    return judge_many([(gold, completion)], extractors, options=options, workers=1, thinking=thinking)[0]
