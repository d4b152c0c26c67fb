"""Which samples a difficulty row counts: exactly those the run's sampling budget selects.

The verdicts on disk may hold more than the budget selects (k was lowered, a source was dropped
from ``rollout.sources``, a fixed run's verdicts seen by an adaptive budget). Annotate counts, per
(problem, policy) of the current selection (the set's problems, ``rollout.policies``):

    fixed     samples 0..k-1                                    stop_reason fixed
    adaptive  the prefix the stopping rule takes (replayed over  stop_reason curtailed | confident
              the verdicts in sample_idx order, with the prior   | max_k
              policy's own selected counts as the prior)
    either    fewer verdicts than the budget needs: the          stop_reason incomplete
              contiguous prefix there is
    imported  a policy read from a dump: all its samples         stop_reason imported
              (the contiguous prefix; k may differ per item)

Replaying the rule here gives the same n as the rollout stage's rounds (same verdicts, same rule):
the stage decides what to generate, annotate what to count, and neither needs the other's state.
One row of the selection::

    problem_id prb_1f…, policy_id pol_3f…, n 12, stop_reason confident,
    budget adaptive(rule=predictive,min_k=4,max_k=32,step=2,confidence=0.95), prior_policy_id null
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import duckdb
import pyarrow as pa

from pipeline.config import BandsConfig, RolloutConfig
from pipeline.rollout.budget import budget_label, prior_counts, select

IMPORTED = "imported"  # the budget and stop_reason of a policy whose rollouts came from a dump
SELECTION_SCHEMA = pa.schema([
    pa.field("problem_id", pa.string(), nullable=False), pa.field("policy_id", pa.string(), nullable=False),
    pa.field("n", pa.int64(), nullable=False), pa.field("budget", pa.string(), nullable=False),
    pa.field("stop_reason", pa.string(), nullable=False), pa.field("prior_policy_id", pa.string()),
])


def _prefix(idxs: Sequence[int], correct: Sequence[bool]) -> list[bool]:
    out = []
    for i, (idx, ok) in enumerate(zip(idxs, correct, strict=True)):
        if idx != i:
            break
        out.append(bool(ok))
    return out


def selection(con: duckdb.DuckDBPyConnection, *, verdicts: str, verifier_id: str, problem_ids: Sequence[str],
              policies: Mapping[str, str | None], cfg: RolloutConfig, bands: BandsConfig,
              prior_weights: Mapping[str, float] | None = None, imported: Collection[str] = ()) -> pa.Table:
    """The selection table (:data:`SELECTION_SCHEMA`) for ``policies`` (policy_id -> prior policy_id or None).

    ``verdicts`` names a relation with the verdicts columns; only ``verifier_id``'s count. An ``imported`` policy
    (its rollouts read from a dump: each item has the samples the dump had) counts every sample of its contiguous
    prefix, whatever ``rollout.k`` says: budget and stop_reason ``imported``."""
    imported = set(imported)
    con.register("_sel_problems", pa.table({"problem_id": pa.array(list(problem_ids), pa.string())}))
    con.register("_sel_imported", pa.table({"policy_id": pa.array(sorted(imported), pa.string())}))
    con.register("_sel_policies", pa.table({"policy_id": pa.array(list(policies), pa.string())}))
    try:
        rows = con.execute(f"""
            SELECT problem_id, policy_id, list(sample_idx ORDER BY sample_idx), list(status = 'correct' ORDER BY sample_idx)
            FROM {verdicts}
            WHERE verifier_id = ? AND (sample_idx < ? OR policy_id IN (SELECT policy_id FROM _sel_imported))
              AND problem_id IN (SELECT problem_id FROM _sel_problems) AND policy_id IN (SELECT policy_id FROM _sel_policies)
            GROUP BY ALL ORDER BY problem_id, policy_id""", [verifier_id, cfg.k]).fetchall()
    finally:
        con.unregister("_sel_problems")
        con.unregister("_sel_policies")
        con.unregister("_sel_imported")
    seqs: dict[str, dict[str, list[bool]]] = {}
    for pid, pol, idxs, correct in rows:
        seqs.setdefault(pol, {})[pid] = _prefix(idxs, correct)
    label = budget_label(cfg)
    out: dict[str, list] = {f.name: [] for f in SELECTION_SCHEMA}
    chosen: dict[str, dict[str, tuple[int, int]]] = {}  # policy_id -> problem_id -> (c, n)
    for pol in sorted(policies, key=lambda p: policies[p] is not None):  # a prior's source first
        src = policies[pol]
        for pid, seq in seqs.get(pol, {}).items():
            if pol in imported:
                for k, v in (("problem_id", pid), ("policy_id", pol), ("n", len(seq)), ("budget", IMPORTED),
                             ("stop_reason", IMPORTED), ("prior_policy_id", None)):
                    out[k].append(v)
                continue
            c0n0 = chosen.get(src, {}).get(pid) if src else None
            pr = prior_counts(*c0n0, (prior_weights or {}).get(pol, 0.0)) if c0n0 else (0.0, 0.0)
            n, reason = select(cfg, bands, seq, pr)
            if n == 0:
                continue
            chosen.setdefault(pol, {})[pid] = (sum(seq[:n]), n)
            for k, v in (("problem_id", pid), ("policy_id", pol), ("n", n), ("budget", label), ("stop_reason", reason),
                         ("prior_policy_id", src)):
                out[k].append(v)
    return pa.table(out, schema=SELECTION_SCHEMA)
