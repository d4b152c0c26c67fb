"""The ladder: per parent, measure a method's rungs on the policy, smallest first, and keep the first that lands.

A method offers each parent an ordered list of *rungs* (candidate children, least help first:
``hint_prefix``'s hint fractions 0.25, 0.5, 0.75; the backward writer's candidate questions).
Round by round, every open parent's next rung is measured on the policy (k samples, verified,
banded like any problem: one batch per round, so the engine works on all parents at once)::

    rung 0.25: 0/8 unsolved   -> too hard, climb
    rung 0.5:  3/8 learnable  -> kept (the smallest rung in the target band)
    rung 0.75: not tried

A rung that lands in ``target_bands`` is kept and the parent is done. With ``confirm`` (the
default in the stage: ``reformulate.confirm``), a rung that lands is first measured again with
k new samples and decided on the pooled 2k: one lucky group of k no longer keeps a child
whose pass rate is below the band (on the main job, 7 of 22 children kept on one group fell
out of the band when the stages re-measured them)::

    rung step:1: 2/8 learnable, then 0/8 -> 2/16 too_hard, climbed

A rung that lands *above*
the target (``too_easy``) ends a monotone ladder (more help only makes it easier); a rung
below it climbs. A rung the method could not make (a hint that leaks the answer, a duplicate)
is recorded with its reason and the next rung is tried in the same round. Every rung's fate is
recorded: ``measured`` (n, n_correct, band), ``kept``, ``climbed``, ``stopped`` or a skip reason,
and ``not_tried`` for the rungs above the one that decided. Touches no files and no engine:
``measure`` is passed in (the shell's is the real engine plus math-verify, with a keyed cache).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.bands import TOO_EASY, assign_band
from pipeline.config import BandsConfig
from pipeline.reformulate.registry import Child, Outcome, Skip

ABOVE = {TOO_EASY}  # bands above any target band (the ladder only climbs towards easier)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A rung ready to measure: the normalised child, its problem_id and its label."""

    problem_id: str
    question: str
    answer: str
    child: Child
    rung: str
    replica: int = 0  # 0: the rung's measurement; 1: its confirmation (k new samples, other seeds)


@dataclass(frozen=True, slots=True)
class Measurement:
    n: int
    n_correct: int
    band: str

    @property
    def pass_rate(self) -> float:
        return self.n_correct / self.n if self.n else 0.0


# candidates -> one measurement per candidate, same order
Measure = Callable[[list[Candidate]], list[Measurement]]
# (n_correct, n) -> band: the banding of pooled counts
Bander = Callable[[int, int], str]


@dataclass
class Climb:
    """One parent's ladder: its rungs (a Candidate, or the Skip that stopped the method making it) and their fates."""

    rungs: list[Candidate | Skip]
    labels: list[str]
    record: list[dict[str, Any]] = field(default_factory=list)
    at: int = 0
    kept: Candidate | None = None
    measurement: Measurement | None = None
    done: bool = False
    landed: Measurement | None = None  # a rung that landed, waiting for its confirmation

    def next_candidate(self) -> Candidate | None:
        """Skip over the rungs that could not be made (recording why); the next one to measure, or None."""
        if self.landed is not None:
            rung = self.rungs[self.at]
            assert isinstance(rung, Candidate)
            return replace(rung, replica=1)
        while self.at < len(self.rungs):
            rung = self.rungs[self.at]
            if isinstance(rung, Candidate):
                return rung
            self.record.append({"rung": self.labels[self.at], "outcome": rung.reason, "detail": rung.detail})
            self.at += 1
        self.done = True
        return None

    def decide(self, m: Measurement, *, target: Sequence[str], monotone: bool, confirm: Bander | None = None) -> None:
        rung = self.rungs[self.at]
        assert isinstance(rung, Candidate)
        if confirm is not None and self.landed is None and m.band in target:
            self.landed = m  # measured again next round, decided on both
            return
        entry: dict[str, Any] = {"rung": rung.rung, "problem_id": rung.problem_id}
        if self.landed is not None:
            first = self.landed
            entry["first"] = {"n": first.n, "n_correct": first.n_correct, "band": first.band}
            entry["confirmation"] = {"n": m.n, "n_correct": m.n_correct, "band": m.band}
            assert confirm is not None
            n, c = first.n + m.n, first.n_correct + m.n_correct
            m = Measurement(n, c, confirm(c, n))
            self.landed = None
        entry.update(n=m.n, n_correct=m.n_correct, band=m.band)
        self.at += 1
        if m.band in target:
            self.kept, self.measurement, self.done = rung, m, True
            entry["outcome"] = "kept"
        elif monotone and m.band in ABOVE:
            self.done = True
            entry["outcome"] = "stopped"  # already too easy: a larger rung only helps more
        else:
            entry["outcome"] = "climbed"
        self.record.append(entry)
        if self.done:  # the rungs above: not measured (or, for those the method could not make, why)
            for label, r in zip(self.labels[self.at:], self.rungs[self.at:], strict=True):
                self.record.append({"rung": label, "outcome": r.reason, "detail": r.detail} if isinstance(r, Skip)
                                   else {"rung": label, "outcome": "not_tried"})


def climb(ladders: Sequence[Climb], measure: Measure, *, target: Sequence[str], monotone: bool,
          confirm: Bander | None = None) -> int:
    """Run every ladder to its end, one measured batch per round; returns the number of rounds.

    ``confirm``: bands pooled counts; given, a rung that lands is measured a second time (replica 1)
    and decided on both measurements pooled."""
    rounds = 0
    while True:
        batch = [(c, cand) for c in ladders if not c.done and (cand := c.next_candidate()) is not None]
        if not batch:
            return rounds
        rounds += 1
        results = measure([cand for _, cand in batch])
        if len(results) != len(batch):
            raise ValueError(f"measure returned {len(results)} measurements for {len(batch)} candidates")
        for (c, _), m in zip(batch, results, strict=True):
            c.decide(m, target=target, monotone=monotone, confirm=confirm)


def summary(record: list[dict[str, Any]]) -> str:
    """``0.25: 0/8 unsolved, climbed; 0.5: hint_leaks_answer; 0.75: not_tried`` (a reject's detail)."""
    parts = []
    for e in record:
        if "first" in e:
            f, c = e["first"], e["confirmation"]
            parts.append(f"{e['rung']}: {f['n_correct']}/{f['n']} {f['band']}, then {c['n_correct']}/{c['n']}: "
                         f"{e['n_correct']}/{e['n']} {e['band']}, {e['outcome']}")
        elif "band" in e:
            parts.append(f"{e['rung']}: {e['n_correct']}/{e['n']} {e['band']}, {e['outcome']}")
        else:
            parts.append(f"{e['rung']}: {e['outcome']}")
    return "; ".join(parts)


def band_of(n_correct: int, n: int, bands: BandsConfig) -> str:
    return assign_band(n_correct, n, bands)


__all__ = ["Candidate", "Climb", "Measure", "Measurement", "Outcome", "band_of", "climb", "summary"]
