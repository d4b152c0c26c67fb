"""Reformulate core: hard parents selected from ``difficulty``, rewritten by each method. Touches no files.

Selection: a main-set problem is a parent when, for one of the chosen policies, its band is
one of ``bands`` *and* its pass rate is at most ``max_pass_rate``. Every (parent, method)
pair ends in exactly one place: a new problem (``parent_id``, ``method``,
``method_version``; ``problem_id`` = hash of the new question) or a reject (stage
``reformulate``, source = the method, source_id = the parent's problem_id, with a reason).
``pairs == problems + rejects`` per method is checked at the end::

    parents = select_parents(difficulty, problems, bands=["too_hard", "unsolved"], max_pass_rate=0.125)
    result = reformulate(parents, [build("fobar", {})], existing_ids=set(problems["problem_id"]))
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.errors import PassbandError
from pipeline.gold import gold_parses
from pipeline.keys import normalize_question, problem_id
from pipeline.reformulate.registry import Child, Parent, Reformulator, Skip
from pipeline.schema import schema

# reasons the stage itself gives, whatever the method
STAGE_REASONS: dict[str, str] = {
    "unparseable_gold": "the reformulation's gold cannot be parsed by math-verify",
    "duplicate_problem": "the reformulated question is already a problem (main set, or another reformulation)",
}


class InvariantError(PassbandError):
    pass


def select_parents(
    difficulty: pa.Table,
    problems: pa.Table,
    *,
    bands: Sequence[str],
    max_pass_rate: float,
    policy_ids: Iterable[str] | None = None,
    limit: int | None = None,
) -> list[Parent]:
    """The problems that are too hard for at least one of ``policy_ids`` (all policies when None), in problem_id order."""
    d = difficulty
    if policy_ids is not None:
        d = d.filter(pc.is_in(d.column("policy_id"), pa.array(sorted(policy_ids), pa.string())))
    d = d.filter(pc.and_(pc.is_in(d.column("band"), pa.array(list(bands), pa.string())),
                         pc.less_equal(d.column("pass_rate"), max_pass_rate)))
    hard = set(d.column("problem_id").to_pylist())
    rows = problems.filter(pc.is_in(problems.column("problem_id"), pa.array(sorted(hard), pa.string())))
    rows = rows.filter(pc.is_null(rows.column("parent_id")))  # never reformulate a reformulation
    parents = [
        Parent(r["problem_id"], r["source"], r["question"], r["answer"], r["solution"], r["split"], r["subject"], r["level"])
        for r in rows.sort_by("problem_id").to_pylist()
    ]
    return parents[:limit] if limit is not None else parents


@dataclass
class ReformulateResult:
    problems: pa.Table
    rejects: pa.Table
    parents: int
    per_method: dict[str, dict] = field(default_factory=dict)

    def metrics(self) -> dict:
        return {
            "parents": self.parents,
            "problems": self.problems.num_rows,
            "rejects": self.rejects.num_rows,
            "methods": self.per_method,
        }


def _reject(method: str, parent: Parent, reason: str, detail: str) -> dict:
    return {"stage": "reformulate", "source": method, "source_id": parent.problem_id, "reason": reason,
            "detail": detail, "excerpt": parent.question[:200]}


def reformulate(
    parents: Sequence[Parent], methods: Sequence[Reformulator], *, existing_ids: set[str] | frozenset[str] = frozenset()
) -> ReformulateResult:
    """Every method over every parent; ``existing_ids`` are the problem_ids a child must not collide with."""
    children: list[dict] = []
    rejects: list[dict] = []
    seen = set(existing_ids)
    per_method: dict[str, dict] = {}
    for method in methods:
        outcomes = method.reformulate(list(parents))
        if len(outcomes) != len(parents):
            raise InvariantError(f"method {method.name} returned {len(outcomes)} outcomes for {len(parents)} parents")
        made, reasons = 0, Counter()
        for parent, out in zip(parents, outcomes, strict=True):
            if isinstance(out, Skip):
                rejects.append(_reject(method.name, parent, out.reason, out.detail))
                reasons[out.reason] += 1
                continue
            assert isinstance(out, Child), out
            question = normalize_question(out.question)
            pid = problem_id(question)
            if not gold_parses(out.answer):
                rejects.append(_reject(method.name, parent, "unparseable_gold", f"gold {out.answer[:80]!r}"))
                reasons["unparseable_gold"] += 1
                continue
            if pid in seen:
                rejects.append(_reject(method.name, parent, "duplicate_problem", f"{pid} exists already"))
                reasons["duplicate_problem"] += 1
                continue
            seen.add(pid)
            made += 1
            children.append({
                "problem_id": pid, "source": method.name, "source_id": parent.problem_id, "split": parent.split,
                "question": question, "answer": out.answer, "solution": out.solution, "subject": parent.subject,
                "level": parent.level, "n_duplicates": 0, "parent_id": parent.problem_id, "method": method.name,
                "method_version": method.method_version,
                "metadata": json.dumps({"parent_source": parent.source, **out.metadata}, sort_keys=True, default=str),
            })
        per_method[method.name] = {
            "method_version": method.method_version, "parents": len(parents), "problems": made,
            "rejects": sum(reasons.values()), "reject_reasons": dict(sorted(reasons.items())),
        }
    result = ReformulateResult(
        problems=schema("problems").from_rows(children), rejects=schema("rejects").from_rows(rejects),
        parents=len(parents), per_method=per_method,
    )
    check_invariant(result)
    return result


def check_invariant(result: ReformulateResult) -> None:
    """Per method, every parent became exactly one problem or one reject."""
    made: dict[str, Counter] = defaultdict(Counter)
    for m, parent in zip(result.problems.column("method").to_pylist(), result.problems.column("parent_id").to_pylist(),
                         strict=True):
        made[m][parent] += 1
    for m, parent in zip(result.rejects.column("source").to_pylist(), result.rejects.column("source_id").to_pylist(),
                         strict=True):
        made[m][parent] += 1
    for m, stats in result.per_method.items():
        if stats["problems"] + stats["rejects"] != result.parents or len(made[m]) != result.parents:
            raise InvariantError(f"method {m}: {result.parents} parents != {stats['problems']} problems + "
                                 f"{stats['rejects']} rejects")
        if twice := [p for p, n in made[m].items() if n > 1]:
            raise InvariantError(f"method {m}: parents with more than one outcome: {twice[:5]}")
