"""Rollout core: problems + a policy + the keys already done + an engine -> new rollout shards.

Touches no files. A rollout is keyed by (problem_id, policy_id, sample_idx) and sampled with
``keys.sample_seed`` of that key, so its text does not depend on batching, order or
resumption. Only missing keys are generated: adding problems, raising k or adding a policy
does only the new work. Missing keys are grouped by problem into shards of ``shard_size``
problems; a shard is yielded (for the shell to write atomically) as soon as its last sample
is done, while the engine keeps generating the next ones::

    for name, table in rollout(problems, policy=pol, k=8, existing=set(), engine=engine):
        write_table(table, out / f"{name}.parquet", name="rollouts")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import keys
from pipeline.config import RolloutConfig, field_default
from pipeline.engines import FINISH_REASONS, Engine, EngineError, Request, Sample
from pipeline.rollout.policy import Policy
from pipeline.schema import schema

Key = tuple[str, int]  # (problem_id, sample_idx) within one policy


@dataclass(frozen=True)
class Work:
    """The missing samples of one problem for one policy."""

    problem_id: str
    question: str
    sample_idxs: tuple[int, ...]


def select_problems(problems: pa.Table, *, sources: list[str] | None = None, limit: int | None = None) -> pa.Table:
    """Problems from ``sources`` (all when None), in problem_id order, at most ``limit``."""
    if sources is not None:
        problems = problems.filter(pc.is_in(problems.column("source"), pa.array(sources, pa.string())))
    problems = problems.sort_by("problem_id")
    return problems.slice(0, limit) if limit is not None else problems


def existing_keys(rollouts: pa.Table, policy_id: str) -> set[Key]:
    """The (problem_id, sample_idx) pairs of ``policy_id`` already in a rollouts table."""
    mine = rollouts.filter(pc.equal(rollouts.column("policy_id"), policy_id))
    return set(zip(mine.column("problem_id").to_pylist(), mine.column("sample_idx").to_pylist(), strict=True))


def plan(problems: pa.Table, *, k: int | Mapping[str, int], existing: set[Key]) -> list[Work]:
    """The missing samples ``0..k-1`` of every problem, in problem_id order (``k`` per problem_id: an adaptive round)."""
    work = []
    ids, questions = problems.column("problem_id").to_pylist(), problems.column("question").to_pylist()
    for pid, q in sorted(zip(ids, questions, strict=True)):
        upto = k if isinstance(k, int) else k[pid]
        missing = tuple(i for i in range(upto) if (pid, i) not in existing)
        if missing:
            work.append(Work(pid, q, missing))
    return work


def shard_plan(work: list[Work], shard_size: int) -> list[list[Work]]:
    return [work[i : i + shard_size] for i in range(0, len(work), shard_size)]


def shard_name(policy_id: str, shard: list[Work]) -> str:
    """A name fixed by the shard's keys: a redone shard overwrites its own file, never another's."""
    ident = keys.canonical_json([(w.problem_id, w.sample_idxs) for w in shard])
    return f"{policy_id}-{keys.digest(ident, length=12)}"


def requests_for(policy: Policy, work: Iterable[Work]) -> list[Request]:
    """One request per problem: the rendered prompt and the seed of each missing sample."""
    return [
        Request(
            id=w.problem_id,
            prompt=policy.render(w.question),
            seeds=tuple(keys.sample_seed(w.problem_id, policy.policy_id, i) for i in w.sample_idxs),
            sampling=policy.sampling,
        )
        for w in work
    ]


def _table(policy_id: str, rows: list[tuple[str, int, Sample]]) -> pa.Table:
    rows = sorted(rows, key=lambda r: (r[0], r[1]))
    sch = schema("rollouts")
    cols = {
        "problem_id": [r[0] for r in rows],
        "policy_id": [policy_id] * len(rows),
        "sample_idx": [r[1] for r in rows],
        "seed": [r[2].seed for r in rows],
        "completion": [r[2].text for r in rows],
        "n_tokens": [r[2].n_tokens for r in rows],
        "finish_reason": [r[2].finish_reason for r in rows],
    }
    return pa.table({c: pa.array(cols[c], type=sch.arrow.field(c).type) for c in sch.names}, schema=sch.arrow)


def rollout(
    problems: pa.Table,
    *,
    policy: Policy,
    k: int | Mapping[str, int],
    existing: set[Key],
    engine: Engine,
    shard_size: int = field_default(RolloutConfig, "shard_size"),
    on_sample: Callable[[Sample], None] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
) -> Iterator[tuple[str, pa.Table]]:
    """Generate the missing samples of ``policy`` on ``problems``; yield ``(shard_name, table)`` per finished shard.

    A problem the engine cannot generate for at all (:meth:`Engine.prompt_problem`: a prompt past its
    context length) is skipped for this policy with ``on_skip(problem_id, reason)``; without ``on_skip``
    it stops the run."""
    work = plan(problems, k=k, existing=existing)
    request_of = {r.id: r for r in requests_for(policy, work)}
    kept = []
    for w in work:
        if (why := engine.prompt_problem(request_of[w.problem_id])) is None:
            kept.append(w)
        elif on_skip is None:
            raise EngineError(f"engine {engine.name} cannot generate for problem {w.problem_id}: {why}")
        else:
            on_skip(w.problem_id, why)
    shards = shard_plan(kept, shard_size)
    if not shards:
        return
    shard_of: dict[str, int] = {}
    idxs: dict[str, tuple[int, ...]] = {}
    remaining: list[int] = []
    for s, shard in enumerate(shards):
        remaining.append(sum(len(w.sample_idxs) for w in shard))
        for w in shard:
            shard_of[w.problem_id] = s
            idxs[w.problem_id] = w.sample_idxs
    done: dict[int, list[tuple[str, int, Sample]]] = {}
    seen: set[tuple[str, int]] = set()
    for sample in engine.stream(request_of[w.problem_id] for shard in shards for w in shard):
        pid = sample.request_id
        if pid not in shard_of or not 0 <= sample.index < len(idxs[pid]) or (pid, sample.index) in seen:
            raise EngineError(f"engine {engine.name} returned an unexpected sample {sample.index} of request {pid}")
        if sample.finish_reason not in FINISH_REASONS:
            raise EngineError(f"engine {engine.name}: request {pid} sample {sample.index} has finish_reason "
                              f"{sample.finish_reason!r}; expected one of {FINISH_REASONS}")
        seen.add((pid, sample.index))
        s = shard_of[pid]
        done.setdefault(s, []).append((pid, idxs[pid][sample.index], sample))
        if on_sample is not None:
            on_sample(sample)
        remaining[s] -= 1
        if remaining[s] == 0:
            yield shard_name(policy.policy_id, shards[s]), _table(policy.policy_id, done.pop(s))
    if unfinished := [s for s, n in enumerate(remaining) if n]:
        raise EngineError(f"engine {engine.name} stopped with {sum(remaining[s] for s in unfinished)} samples "
                          f"missing (first problem {shards[unfinished[0]][0].problem_id})")
