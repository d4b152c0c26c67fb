"""Trainer rollouts are measurements: each GRPO group's completions and rewards as ``rollouts`` + ``verdicts``.

TRL's ``GRPOTrainer`` already samples k completions per prompt and grades them; this module keeps
them. :meth:`RolloutRecorder.reward` is a TRL reward function that grades with passband's verifier
(:func:`pipeline.verify.judge.judge_many`, the call :func:`pipeline.rewards.trl_reward` makes) and
turns the *same* judgements into the reward and into verdict rows: no second grading. The policy
of a row is the trained model during a window of steps, named by run and window::

    >>> rec = RolloutRecorder("data/train-rollouts", base_policy=base_row, run="lr1e-5-s0", window_steps=8)
    >>> trainer = GRPOTrainer(..., reward_funcs=rec.reward(), callbacks=[rec.callback()])   # doctest: +SKIP
    # steps [0, 8) -> policy "smollm2-135m-3shot@lr1e-5-s0[0,8)" (pol_…), one shard per table:
    #   rollouts/lr1e-5-s0-0000000-0000008-r0.parquet, verdicts/…, policies/…

Rows: ``sample_idx`` counts the samples of a problem within the window (a problem drawn at two
steps of one window has 2k samples), ``seed`` is :func:`pipeline.keys.sample_seed` of the key (TRL's
own seed is per step, not per sample), ``n_tokens`` the completion's token count and
``finish_reason`` ``length`` when it hit ``max_completion_length`` without an end token, else
``stop``. The dataset needs a ``problem_id`` column (passband's problem key) and the gold in
``answer``.

Writes: the rows of a window stay in memory until the window closes (the callback's
``on_step_end`` after its last step; ``on_train_end`` for the last, partial one, named by the
steps it covers), then each table gets one shard through :func:`pipeline.io.write_table`
(schema-checked, temp name, rename). A killed run loses at most its open window. Each process
writes its own shards (``-r<rank>``; ``sample_idx`` interleaved by rank so keys never collide);
only rank 0 writes the policies rows. A re-run with the same ``run`` replaces its windows' shards.

Listeners (``listeners=[sampler.update]``, :mod:`pipeline.train.sampler`) get, after each reward
call, ``(problem_id, n_correct, n)`` per problem of the call: the online update of a sampler.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import keys
from pipeline.errors import PassbandError
from pipeline.io import claim_table_dir, write_table
from pipeline.rewards import SCORES
from pipeline.schema import schema
from pipeline.verify.core import gold_digest, verifier_id
from pipeline.verify.judge import judge_config, judge_many

__all__ = ["Observation", "RecorderError", "RolloutRecorder", "window_policy"]

TABLES = ("rollouts", "verdicts", "policies")
_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
Observation = tuple[str, int, int]  # (problem_id, n_correct, n): one problem's rewards in one reward call


class RecorderError(PassbandError):
    """The recorder cannot record what the trainer passed (a missing column, a bad run name)."""


@dataclass
class _Sample:
    problem_id: str
    step: int
    completion: str
    n_tokens: int
    finish_reason: str
    status: str
    extracted: str | None
    extractor: str | None
    detail: str | None
    gold_digest: str


@dataclass
class RecorderStats:
    """What the recorder did, and the time it cost beyond grading (the step's overhead)."""

    reward_calls: int = 0
    samples: int = 0
    groups: int = 0
    shards: int = 0
    grading_seconds: float = 0.0  # judge_many: the reward's own cost, paid with or without recording
    recording_seconds: float = 0.0  # row bookkeeping, listeners and shard writes: the recorder's overhead
    windows: list[tuple[int, int]] = field(default_factory=list)


def window_policy(base: Mapping[str, Any], *, run: str, start: int, end: int, sampling: Mapping[str, Any]) -> dict:
    """The ``policies`` row of the policy trained from ``base`` (a policies row) during steps ``[start, end)`` of ``run``.

    Its identity hashes the base policy_id, the run, the window, the engine (``trl``) and the sampling;
    ``name`` is ``<base name>@<run>[start,end)``."""
    if not 0 <= start < end:
        raise RecorderError(f"a step window needs 0 <= start < end, got [{start}, {end})")
    sampling = {"temperature": float(sampling["temperature"]), "top_p": float(sampling["top_p"]),
                "top_k": int(sampling["top_k"]), "max_tokens": int(sampling["max_tokens"]),
                "stop": [str(s) for s in sampling.get("stop", [])]}
    identity = {"base_policy_id": base["policy_id"], "run": run, "steps": [start, end], "engine": "trl",
                "sampling": sampling}
    return {**{k: base.get(k) for k in schema("policies").names}, **sampling,
            "policy_id": keys.policy_id(identity), "name": f"{base['name']}@{run}[{start},{end})",
            "revision": f"{base['revision']}+grpo:{run}:steps[{start},{end})", "engine": "trl",
            "identity": keys.canonical_json(identity)}


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):  # conversational
        return "".join(str(m.get("content", "")) for m in completion if m.get("role", "assistant") == "assistant")
    raise RecorderError(f"a completion is a string or a list of messages, got {type(completion).__name__}")


class RolloutRecorder:
    """Records a GRPO run's groups as passband tables under ``out_dir`` (``rollouts/``, ``verdicts/``, ``policies/``).

    ``base_policy``: the ``policies`` row of the snapshot training starts from (its prompt template
    and model). ``sampling``: temperature, top_p, top_k, max_tokens, stop of the trainer's generation
    (None: read from the trainer's args when the callback sees the run begin). ``eos_ids``: the token
    ids that end a completion (None: only the length decides ``finish_reason``). ``verify_options``:
    the verify stage's settings (None: params.yaml's defaults), as :func:`pipeline.rewards.trl_reward` takes them.
    """

    def __init__(self, out_dir: str | Path, *, base_policy: Mapping[str, Any], run: str, window_steps: int = 8,
                 sampling: Mapping[str, Any] | None = None, eos_ids: Iterable[int] | None = None,
                 verify_options: Any = None, workers: int | None = 1,
                 listeners: Sequence[Callable[[list[Observation]], Any]] = ()) -> None:
        if not _RUN.match(run):
            raise RecorderError(f"run name {run!r} must be letters, digits, '.', '_' or '-' (it names shards and "
                                "policies); pick another")
        if window_steps < 1:
            raise RecorderError(f"window_steps must be >= 1, got {window_steps}")
        missing = sorted({"policy_id", "name", "revision"} - set(base_policy))
        if missing:
            raise RecorderError(f"base_policy is not a policies row: it lacks {missing}; pass the row of the "
                                "snapshot training starts from (pipeline.rollout.policy.Policy.row())")
        self.out_dir = Path(out_dir)
        self.base_policy = dict(base_policy)
        self.run = run
        self.window_steps = window_steps
        self.sampling = dict(sampling) if sampling is not None else None
        self.eos_ids = frozenset(eos_ids) if eos_ids is not None else None
        self.config = judge_config(verify_options)
        self.verifier_id = verifier_id(self.config)
        self.workers = workers
        self.listeners = list(listeners)
        self.rank, self.world_size = 0, 1
        self.stats = RecorderStats()
        self._open: dict[int, list[_Sample]] = defaultdict(list)  # window index -> samples
        self._last_step = -1
        for t in TABLES:
            claim_table_dir(self.out_dir / t, name=t)

    # ---- the core: grade once, keep the rows -------------------------------------------------------------
    def record(self, *, step: int, problem_ids: Sequence[str], golds: Sequence[str], completions: Sequence[Any],
               completion_ids: Sequence[Sequence[int]] | None = None) -> list[float]:
        """Grade ``completions`` (one verifier call), keep them as step ``step``'s samples, return the rewards."""
        n = len(completions)
        if not (len(problem_ids) == len(golds) == n) or (completion_ids is not None and len(completion_ids) != n):
            raise RecorderError(f"{n} completions but {len(problem_ids)} problem_ids, {len(golds)} golds"
                                + (f", {len(completion_ids)} completion_ids" if completion_ids is not None else ""))
        texts = [_text(c) for c in completions]
        t0 = time.perf_counter()
        found = judge_many(zip(map(str, golds), texts, strict=True), options=self.config, workers=self.workers)
        t1 = time.perf_counter()
        rewards = [SCORES[j.status] for j in found]
        max_tokens = self.sampling["max_tokens"] if self.sampling else None
        window = self._open[step // self.window_steps]
        digests = {g: gold_digest(str(g)) for g in set(golds)}
        for i, j in enumerate(found):
            ids = completion_ids[i] if completion_ids is not None else None
            n_tok = len(ids) if ids is not None else 0
            ended = ids is not None and len(ids) > 0 and self.eos_ids is not None and ids[-1] in self.eos_ids
            length = max_tokens is not None and n_tok >= max_tokens and not ended
            window.append(_Sample(str(problem_ids[i]), step, texts[i], n_tok, "length" if length else "stop",
                                  j.status, j.extracted, j.extractor, j.detail, digests[golds[i]]))
        self._last_step = max(self._last_step, step)
        obs = self._observations(problem_ids, rewards)
        for listen in self.listeners:
            listen(obs)
        self.stats.reward_calls += 1
        self.stats.samples += n
        self.stats.groups += len(obs)
        self.stats.grading_seconds += t1 - t0
        self.stats.recording_seconds += time.perf_counter() - t1
        return rewards

    @staticmethod
    def _observations(problem_ids: Sequence[str], rewards: Sequence[float]) -> list[Observation]:
        n, c = Counter(), Counter()
        for pid, r in zip(problem_ids, rewards, strict=True):
            n[pid] += 1
            c[pid] += r == 1.0
        return [(pid, c[pid], n[pid]) for pid in n]

    # ---- windows -> shards --------------------------------------------------------------------------------
    def flush(self, *, upto_step: int | None = None) -> list[Path]:
        """Write every open window that ends at or before ``upto_step`` (None: all, the last one partial)."""
        t0 = time.perf_counter()
        written: list[Path] = []
        for w in sorted(self._open):
            start, end = w * self.window_steps, (w + 1) * self.window_steps
            if upto_step is not None and end > upto_step:
                continue
            samples = self._open.pop(w)
            if upto_step is None:  # the run ended: the window covers the steps it saw
                end = min(end, max(s.step for s in samples) + 1)
            written += self._write(samples, start, end)
        self.stats.recording_seconds += time.perf_counter() - t0
        return written

    def _write(self, samples: list[_Sample], start: int, end: int) -> list[Path]:
        if self.sampling is None:
            raise RecorderError("the recorder does not know the trainer's sampling settings: pass sampling=... "
                                "or add recorder.callback() to the trainer's callbacks")
        pol = window_policy(self.base_policy, run=self.run, start=start, end=end, sampling=self.sampling)
        pid_pol = pol["policy_id"]
        count: Counter[str] = Counter()
        rows_r, rows_v = [], []
        for s in samples:
            idx = count[s.problem_id] * self.world_size + self.rank
            count[s.problem_id] += 1
            rows_r.append({"problem_id": s.problem_id, "policy_id": pid_pol, "sample_idx": idx,
                           "seed": keys.sample_seed(s.problem_id, pid_pol, idx), "completion": s.completion,
                           "n_tokens": s.n_tokens, "finish_reason": s.finish_reason})
            rows_v.append({"problem_id": s.problem_id, "policy_id": pid_pol, "sample_idx": idx,
                           "verifier_id": self.verifier_id, "status": s.status, "extracted": s.extracted,
                           "extractor": s.extractor, "detail": s.detail, "gold_digest": s.gold_digest})
        shard = f"{self.run}-{start:07d}-{end:07d}-r{self.rank}.parquet"
        tables: list[tuple[str, pa.Table]] = [("rollouts", schema("rollouts").from_rows(rows_r)),
                                              ("verdicts", schema("verdicts").from_rows(rows_v))]
        if self.rank == 0:
            tables.append(("policies", schema("policies").from_rows([pol])))
        # the policies row last: a window whose policy is listed has its rows on disk
        paths = [write_table(t, self.out_dir / name / shard, name=name) for name, t in tables]
        self.stats.shards += len(paths)
        self.stats.windows.append((start, end))
        return paths

    # ---- TRL ----------------------------------------------------------------------------------------------
    def reward(self) -> Callable[..., list[float]]:
        """A TRL reward function (``reward_funcs=``): passband's reward, with every graded completion recorded."""

        def passband_recorded_reward(completions: Sequence[Any], answer: Sequence[str] | None = None,
                                     problem_id: Sequence[str] | None = None, trainer_state: Any = None,
                                     completion_ids: Sequence[Sequence[int]] | None = None, **kwargs: Any) -> list[float]:
            """TRL reward: 1.0 for each completion passband judges correct, else 0.0; recorded as verdicts."""
            if answer is None or problem_id is None:
                lacking = [c for c, v in (("answer", answer), ("problem_id", problem_id)) if v is None]
                raise RecorderError(f"the training dataset lacks column(s) {lacking}: the recorder needs passband's "
                                    "problem key (problem_id) and the gold (answer) in each row")
            step = int(trainer_state.global_step) if trainer_state is not None else self._last_step + 1
            return self.record(step=step, problem_ids=problem_id, golds=answer, completions=completions,
                               completion_ids=completion_ids)

        return passband_recorded_reward

    def callback(self):
        """A transformers ``TrainerCallback``: learns the sampling and rank at train begin, flushes closed windows
        at each step end and the open one at train end."""
        from transformers import TrainerCallback

        rec = self

        class RecorderCallback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kw) -> None:
                rec.rank, rec.world_size = int(args.process_index), int(args.world_size)
                if rec.sampling is None:
                    rec.sampling = {"temperature": args.temperature, "top_p": args.top_p,
                                    "top_k": args.top_k if args.top_k else -1,
                                    "max_tokens": args.max_completion_length, "stop": []}

            def on_step_end(self, args, state, control, **kw) -> None:
                if state.global_step % rec.window_steps == 0:
                    rec.flush(upto_step=state.global_step)

            def on_train_end(self, args, state, control, **kw) -> None:
                rec.flush()

        return RecorderCallback()
