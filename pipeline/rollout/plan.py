"""What a rollout run generates, decided before any engine starts: pure, no files, no engines.

The shell (:mod:`pipeline.rollout.stage`) reads the problems and the keys already written, asks for the plan,
then starts one engine per :class:`EngineGroup` and generates each policy's :attr:`RunPlan.todo`::

    p = plan_run(problems, policies, k=8, existing={pol.policy_id: set()}, engine_options={}, has_prior=set())
    p.todo[pol.policy_id]         # [Work(problem_id, question, sample_idxs), ...]: the missing samples per problem
    [g.policies for g in p.groups]  # the policies that share one engine start-up (same engine, model and options)

With an adaptive budget the todo is the bound (``k`` per problem); the rounds decide the real work
(:mod:`pipeline.rollout.adaptive`), and a policy whose prior is another policy's measurement comes after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline import keys
from pipeline.engines import ModelSpec
from pipeline.rollout.core import Key, Work, plan
from pipeline.rollout.policy import Policy


@dataclass(frozen=True)
class EngineGroup:
    """Policies served by one engine: the same engine, model and options (one start-up for all of them)."""

    engine: str
    model: ModelSpec
    options: dict[str, Any]
    policies: tuple[Policy, ...]


@dataclass(frozen=True)
class RunPlan:
    todo: dict[str, list[Work]]  # policy_id -> missing samples per problem (adaptive: the bound)
    samples_existing: int  # samples of the selected problems, below k, already on disk
    groups: list[EngineGroup]

    @property
    def total(self) -> int:
        """Samples the todo names (the progress bar's length)."""
        return sum(len(w.sample_idxs) for work in self.todo.values() for w in work)


def engine_groups(policies: list[Policy], *, engine_options: Mapping[str, Mapping[str, Any]],
                  has_prior: set[str] | None = None) -> list[EngineGroup]:
    """Policies grouped by (engine, model, options), options being ``rollout.engine_options[engine]`` under the
    policy's own. With ``has_prior`` (adaptive: names of policies with a prior) the policies without a prior come
    first, inside each group and across groups, so a prior's source is measured before the policies that use it."""
    groups: dict[tuple[str, ModelSpec, str], list[Policy]] = {}
    options: dict[tuple[str, ModelSpec, str], dict[str, Any]] = {}
    for p in policies:
        opts = {**engine_options.get(p.engine, {}), **p.engine_options}
        key = (p.engine, p.model, keys.canonical_json(opts))
        groups.setdefault(key, []).append(p)
        options[key] = opts
    items = list(groups.items())
    if has_prior is not None:
        order = sorted(policies, key=lambda p: p.name in has_prior)
        items = sorted(((k, sorted(g, key=order.index)) for k, g in items),
                       key=lambda kv: min(order.index(p) for p in kv[1]))
    return [EngineGroup(k[0], k[1], options[k], tuple(g)) for k, g in items]


def plan_run(problems: pa.Table, policies: list[Policy], *, k: int, existing: Mapping[str, set[Key]],
             engine_options: Mapping[str, Mapping[str, Any]], has_prior: set[str] | None = None) -> RunPlan:
    """The run's plan for ``problems`` (already selected): each policy's missing samples ``0..k-1``, the samples
    already there, and the engine groups (ordered for an adaptive run when ``has_prior`` is given)."""
    selected = set(problems.column("problem_id").to_pylist())
    return RunPlan(
        todo={p.policy_id: plan(problems, k=k, existing=existing[p.policy_id]) for p in policies},
        samples_existing=sum(pid in selected and i < k for done in existing.values() for pid, i in done),
        groups=engine_groups(policies, engine_options=engine_options, has_prior=has_prior),
    )
