"""passband's verifier as a reward, in each trainer's own form: one grading, three signatures.

Every reward here goes through :func:`pipeline.verify.judge_many`, the call the verify stage
grades with (same extractors, length cap, math-verify policies and worker-pool bounds), so a
completion earns 1.0 in training exactly when passband's verdict on it is ``correct``::

    >>> accuracy_reward(["3 + 5 = 8. The answer is 8."], answer=["8"])          # doctest: +SKIP
    [1.0]
    >>> compute_score("passband/synthetic", "#### 9", "8")                       # doctest: +SKIP
    0.0

- **TRL** (``GRPOTrainer(reward_funcs=accuracy_reward)``): ``completions`` plus the row's
  columns as keyword arguments; the gold is ``answer`` (passband's published configs) or
  ``solution`` (the TRL export, the gold in ``$...$``). Completions may be strings or
  conversational message lists.
- **verl** (``custom_reward_function.path=<reward.py>``, ``name=compute_score``):
  ``compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float``; and
  ``compute_score_batch`` for verl's batch reward manager (lists in, list out).
- **OpenRLHF** (``--remote_rm_url <reward_func.py>``): ``reward_func(queries, prompts, labels)``,
  where each query is its prompt followed by the response; returns ``{"rewards", "scores",
  "extra_logs"}`` as torch tensors.

Callable from any process with no set-up: a plain script without a main guard, a notebook, threads,
Ray tasks and actors, a trainer that has loaded torch (tests/test_rewards_callers.py). Plain-number
answers are scored in the caller's process in microseconds; the rest go to the verifier's persistent,
bounded worker pool (no process started per call; ``benchmarks/reward_overhead.py``).

Reasoning models: the answer is read only after the thinking's closing tag (``</think>``,
``<|end_of_thought|>``), and a completion whose thinking never closes (cut off at max_tokens) scores
0.0 (``no_answer``, ``unfinished_thinking``), never a grade from inside it. The default thinking mode is
``verify.thinking`` (``auto``: applied when the completion holds a tag); a trainer whose prompt opens
``<think>`` itself (R1 distills: the completion holds only ``</think>``) passes
``trl_reward(options={"thinking": "tags"})`` (docs/verifier.md)::

    >>> accuracy_reward(["<think>6*7 = 42. The answer is 42. Hmm, but it might be 41"], answer=["42"])  # doctest: +SKIP
    [0.0]

Scores: ``correct`` -> 1.0; ``incorrect`` and ``no_answer`` -> 0.0; ``timeout`` and ``error``
(undecidable) -> 0.0 too, since a trainer needs a number, and they are counted in OpenRLHF's
``extra_logs``. The exports ship :data:`VERL_REWARD_FILE` and :data:`OPENRLHF_REWARD_FILE`, two
thin files that import these functions (``pip install passband``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipeline.verify.judge import Judgement, judge_config, judge_many

__all__ = ["SCORES", "accuracy_reward", "compute_score", "compute_score_batch", "reward_func", "scores", "trl_reward"]

SCORES: Mapping[str, float] = {"correct": 1.0, "incorrect": 0.0, "no_answer": 0.0, "timeout": 0.0, "error": 0.0}


def _gold_from_solution(solution: str) -> str:
    """Undo the TRL export's ``$...$`` wrapping (pipeline.publish.exports.trl_solution)."""
    s = solution.strip()
    if len(s) >= 2 and s.startswith("$") and s.endswith("$") and not s.startswith("$$"):
        return s[1:-1]
    return s


def _text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or message lists for conversational prompts."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return "".join(str(m.get("content", "")) for m in completion if m.get("role", "assistant") == "assistant")
    raise TypeError(f"a completion is a string or a list of messages, got {type(completion).__name__}")


def judgements(golds: Sequence[str], completions: Sequence[str], *, options: Any = None,
               workers: int | None = None) -> list[Judgement]:
    if len(golds) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(golds)} gold answers")
    return judge_many(zip(golds, completions, strict=True), options=options, workers=workers)


def scores(golds: Sequence[str], completions: Sequence[str], *, options: Any = None,
           workers: int | None = None) -> list[float]:
    """The reward of each completion against its gold: :data:`SCORES` of passband's verdict."""
    return [SCORES[j.status] for j in judgements(golds, completions, options=options, workers=workers)]


def trl_reward(*, options: Any = None, workers: int | None = None) -> Callable[..., list[float]]:
    """A TRL reward function grading with ``options`` (the verify stage's settings: a VerifyConfig or a
    mapping of its keys; None: params.yaml's defaults). :func:`accuracy_reward` is ``trl_reward()``."""
    if options is not None:
        judge_config(options)  # a typo in a setting fails here, not at the first training step

    def accuracy_reward(completions: Sequence[Any], answer: Sequence[str] | None = None,
                        solution: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        """TRL reward function: 1.0 for each completion passband judges correct, else 0.0."""
        if answer is not None:
            golds = [str(a) for a in answer]
        elif solution is not None:
            golds = [_gold_from_solution(str(s)) for s in solution]
        else:
            raise ValueError("accuracy_reward needs the gold: an `answer` column (passband's configs) "
                             "or a `solution` column (the TRL export)")
        return scores(golds, [_text(c) for c in completions], options=options, workers=workers)

    return accuracy_reward


accuracy_reward = trl_reward()


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    """verl's custom reward: the score of one response against ``reward_model.ground_truth``."""
    return scores([str(ground_truth)], [str(solution_str)], workers=1)[0]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[str],
                        extra_infos: Sequence[Any] | None = None) -> list[float]:
    """verl's batch reward manager form: lists in, one score per response out (the shared worker pool's workers)."""
    return scores([str(g) for g in ground_truths], [str(s) for s in solution_strs])


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """OpenRLHF's custom reward (``--remote_rm_url reward_func.py --label_key label``).

    ``queries`` are prompt + response; the response is what follows the prompt.
    """
    import torch

    responses = [q[len(p):] if q.startswith(p) else q for q, p in zip(queries, prompts, strict=True)]
    found = judgements([str(x) for x in labels], responses)
    rewards = torch.tensor([SCORES[j.status] for j in found], dtype=torch.float32)
    undecided = torch.tensor([float(j.status in ("timeout", "error")) for j in found])
    return {"rewards": rewards, "scores": rewards.clone(), "extra_logs": {"verify_undecided": undecided}}


VERL_REWARD_FILE = '''"""verl reward for passband exports: passband's own verifier (pipeline.rewards), as the bands were measured.

Use: custom_reward_function.path=exports/verl/reward.py custom_reward_function.name=compute_score
(or name=compute_score_batch with reward_model.reward_manager=batch). Needs `pip install passband`.
"""

from pipeline.rewards import compute_score, compute_score_batch

__all__ = ["compute_score", "compute_score_batch"]
'''

OPENRLHF_REWARD_FILE = '''"""OpenRLHF reward for passband exports: passband's own verifier (pipeline.rewards).

Use: --remote_rm_url exports/openrlhf/reward_func.py --input_key input --label_key label --apply_chat_template
Needs `pip install passband`.
"""

from pipeline.rewards import reward_func

__all__ = ["reward_func"]
'''
