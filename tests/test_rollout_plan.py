"""pipeline/rollout/plan.py: what a rollout run generates, decided without files or engines."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pyarrow as pa

from pipeline.rollout.plan import engine_groups, plan_run

PROBLEMS = pa.table({"problem_id": ["b", "a", "c"], "question": ["qb", "qa", "qc"]})


def _policy(name: str, *, engine: str = "fake", model: str = "m", options: dict | None = None):
    # only the attributes the plan reads; Policy itself needs a resolved model
    return SimpleNamespace(name=name, policy_id=f"pol_{name}", engine=engine, model=model,
                           engine_options=options or {})


def test_the_plan_names_only_the_missing_samples_and_counts_the_rest():
    p, q = _policy("p"), _policy("q")
    existing = {"pol_p": {("a", 0), ("a", 1), ("zz", 0), ("b", 5)}, "pol_q": set()}
    plan = plan_run(PROBLEMS, [p, q], k=2, existing=existing, engine_options={})
    assert [(w.problem_id, w.sample_idxs) for w in plan.todo["pol_p"]] == [("b", (0, 1)), ("c", (0, 1))]
    assert [w.problem_id for w in plan.todo["pol_q"]] == ["a", "b", "c"]
    assert plan.samples_existing == 2  # a/0 and a/1: not an unselected problem, not an index past k
    assert plan.total == 4 + 6


def test_policies_share_an_engine_only_with_the_same_engine_model_and_options():
    a, b = _policy("a"), _policy("b")
    c = _policy("c", options={"gpu_memory_utilization": 0.5})
    d = _policy("d", model="other")
    groups = engine_groups([a, b, c, d], engine_options={"fake": {"gpu_memory_utilization": 0.5}})
    assert [[p.name for p in g.policies] for g in groups] == [["a", "b", "c"], ["d"]]  # c's option is the default
    assert groups[0].options == {"gpu_memory_utilization": 0.5}
    assert dataclasses.astuple(groups[1])[:2] == ("fake", "other")


def test_adaptive_puts_a_priors_source_before_the_policies_that_use_it():
    late, src, other = _policy("late"), _policy("src"), _policy("other", model="x")
    groups = engine_groups([late, other, src], engine_options={}, has_prior={"late"})
    # policies without a prior first (other, src), then late; a group comes when its first policy does
    assert [[p.name for p in g.policies] for g in groups] == [["other"], ["src", "late"]]
    assert [[p.name for p in g.policies] for g in engine_groups([late, other, src], engine_options={})] == [
        ["late", "src"], ["other"]]
