"""Reformulate core: hard parents selected from ``difficulty``, rewritten by each method. Touches no files.

Selection: a main-set problem is a parent when, for one of the chosen policies, its band is
one of ``bands`` *and* its pass rate is at most ``max_pass_rate``. Every (parent, method)
pair ends in exactly one place: a new problem (``parent_id``, ``method``,
``method_version``; ``problem_id`` = hash of the new question) or a reject (stage
``reformulate``, source = the method, source_id = the parent's problem_id, with a reason).
``pairs == problems + rejects`` per method is checked at the end. Each method offers each
parent a ladder of rungs; with a ``measure`` the smallest rung measured in ``target_bands``
is the child (:mod:`pipeline.reformulate.ladder`), and a parent none of whose rungs lands is a
``no_rung_in_band`` reject whose detail lists every rung's measurement::

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

from pipeline.bands import LEARNABLE
from pipeline.errors import PassbandError
from pipeline.keys import normalize_question, problem_id
from pipeline.reformulate.ladder import Bander, Candidate, Climb, Measure, climb, summary
from pipeline.reformulate.registry import Child, Outcome, Parent, Reformulator, Skip
from pipeline.schema import schema
from pipeline.verify.gold_check import gold_parses

# reasons the stage itself gives, whatever the method
STAGE_REASONS: dict[str, str] = {
    "unparseable_gold": "the reformulation's gold cannot be parsed by math-verify",
    "duplicate_problem": "the reformulated question is already a problem (main set, or another reformulation)",
    "no_rung_in_band": "no rung, measured on the policy smallest first, landed in reformulate.target_bands",
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


def _candidate(label: str, out: Outcome, seen: set[str]) -> Candidate | Skip:
    """A rung as the stage sees it: a Candidate to measure, or why it cannot be one."""
    if isinstance(out, Skip):
        return out
    assert isinstance(out, Child), out
    question = normalize_question(out.question)
    pid = problem_id(question)
    if not gold_parses(out.answer):
        return Skip("unparseable_gold", f"gold {out.answer[:80]!r}")
    if pid in seen:
        return Skip("duplicate_problem", f"{pid} exists already")
    return Candidate(pid, question, out.answer, out, label)


def reformulate(
    parents: Sequence[Parent], methods: Sequence[Reformulator], *, existing_ids: set[str] | frozenset[str] = frozenset(),
    measure: Measure | None = None, target_bands: Sequence[str] = (LEARNABLE,), confirm: Bander | None = None,
) -> ReformulateResult:
    """Every method over every parent; ``existing_ids`` are the problem_ids a child must not collide with.

    With ``measure``, each parent's rungs are measured smallest first and the first in
    ``target_bands`` is kept (:mod:`pipeline.reformulate.ladder`); without it the first rung
    the method could make is kept unmeasured. With ``confirm`` (the banding of pooled counts), a
    rung that lands is measured again and kept only if both measurements pooled still land.
    """
    children: list[dict] = []
    rejects: list[dict] = []
    seen = set(existing_ids)
    per_method: dict[str, dict] = {}
    for method in methods:
        ladders = method.ladder(list(parents))
        if len(ladders) != len(parents):
            raise InvariantError(f"method {method.name} returned {len(ladders)} ladders for {len(parents)} parents")
        climbs = [Climb([_candidate(label, out, seen) for label, out in rungs], [label for label, _ in rungs])
                  for rungs in ladders]
        rounds = 0
        if measure is None:
            for c in climbs:
                if (cand := c.next_candidate()) is not None:
                    c.kept, c.done = cand, True
                    c.record.append({"rung": cand.rung, "problem_id": cand.problem_id, "outcome": "kept_unmeasured"})
        else:
            rounds = climb(climbs, measure, target=target_bands, monotone=method.monotone, confirm=confirm)
        made, reasons, kept_rungs, measured = 0, Counter(), Counter(), 0
        for parent, c in zip(parents, climbs, strict=True):
            measured += sum("band" in e for e in c.record)
            if c.kept is None or c.kept.problem_id in seen:
                skips = [r for r in c.rungs if isinstance(r, Skip)]
                if c.kept is not None:
                    reason, detail = "duplicate_problem", f"{c.kept.problem_id} exists already"
                elif any("band" in e for e in c.record):
                    reason, detail = "no_rung_in_band", summary(c.record)
                else:
                    reason = skips[0].reason if skips else "no_rung_in_band"
                    detail = skips[0].detail if len(c.rungs) == 1 else summary(c.record)
                rejects.append(_reject(method.name, parent, reason, detail))
                reasons[reason] += 1
                continue
            cand, out = c.kept, c.kept.child
            seen.add(cand.problem_id)
            made += 1
            kept_rungs[cand.rung] += 1
            meta = {"parent_source": parent.source, **out.metadata, "rung": cand.rung,
                    "writer": out.metadata.get("writer", method.writer), "ladder": c.record}
            if c.measurement is not None:
                meta["selected_on"] = {"n": c.measurement.n, "n_correct": c.measurement.n_correct,
                                       "band": c.measurement.band}
            children.append({
                "problem_id": cand.problem_id, "source": method.name, "source_id": parent.problem_id,
                "split": parent.split, "question": cand.question, "answer": out.answer, "solution": out.solution,
                "subject": parent.subject, "level": parent.level, "n_duplicates": 0, "parent_id": parent.problem_id,
                "method": method.name, "method_version": method.method_version,
                "metadata": json.dumps(meta, sort_keys=True, default=str),
            })
        per_method[method.name] = {
            "method_version": method.method_version, "parents": len(parents), "problems": made,
            "rejects": sum(reasons.values()), "reject_reasons": dict(sorted(reasons.items())),
            "rungs_measured": measured, "rounds": rounds, "kept_per_rung": dict(sorted(kept_rungs.items())),
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
