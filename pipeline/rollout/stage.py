"""The rollout stage's shell and helpers; :mod:`pipeline.rollout` describes the stage and re-exports its public names."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from pipeline import keys
from pipeline.config import Params
from pipeline.engines.registry import Engine, ModelSpec, Sample, create_engine
from pipeline.errors import PassbandError
from pipeline.io import claim_table_dir, read_table, write_metrics, write_table
from pipeline.rollout.adaptive import Outcomes, adaptive_rounds, add_outcomes, counts
from pipeline.rollout.core import existing_keys, plan, rollout, select_problems
from pipeline.rollout.policy import Policy, check_distinct, policies_table, resolve_policy
from pipeline.schema import schema
from pipeline.tablesets import table_set
from pipeline.verify.core import verifier_id, verify

KEY = ["problem_id", "policy_id", "sample_idx"]

__all__ = ["RolloutResult", "rollout", "run"]

EngineFactory = Callable[..., Engine]


@dataclass
class RolloutResult:
    set_name: str
    policies: list[Policy]
    prompts: int = 0
    samples: int = 0
    samples_existing: int = 0
    tokens: int = 0
    shards: int = 0
    skipped: int = 0  # (problem, policy) pairs the engine cannot take (prompt too long)
    generate_s: float = 0.0
    startup_s: float = 0.0
    wall_s: float = 0.0
    per_policy: dict[str, dict[str, Any]] = field(default_factory=dict)
    engine_logs: list[Path] = field(default_factory=list)  # files the engines wrote their own log lines to

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.generate_s if self.generate_s > 0 else 0.0

    def metrics(self) -> dict[str, Any]:
        return {
            "set": self.set_name,
            "prompts": self.prompts,
            "samples": self.samples,
            "samples_existing": self.samples_existing,
            "tokens": self.tokens,
            "shards_written": self.shards,
            "problems_skipped": self.skipped,
            "seconds": round(self.generate_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "engine_startup_s": round(self.startup_s, 3),
            "wall_s": round(self.wall_s, 3),
            "policies": self.per_policy,
        }


class LockedError(PassbandError):
    pass


@contextlib.contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """An exclusive lock on the output directory itself (no lock file inside a DVC output)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(f"another rollout is writing to {directory}") from None
        yield
    finally:
        os.close(fd)


def _clean_temp(directory: Path) -> None:
    """Remove the temp files of writes that were killed (readers never see them; this only frees space)."""
    for tmp in directory.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def _write_skips(path: Path, policy: Policy, skips: list[tuple[str, str]], problems) -> None:
    """The policy's skipped problems as rejects rows (the file replaced: skips are redone on every run)."""
    if not skips:
        path.unlink(missing_ok=True)
        return
    src = dict(zip(problems.column("problem_id").to_pylist(), problems.column("source").to_pylist(), strict=True))
    qs = dict(zip(problems.column("problem_id").to_pylist(), problems.column("question").to_pylist(), strict=True))
    rows = [{"stage": "rollout", "source": src[pid], "source_id": f"{policy.policy_id}/{pid}", "reason": "prompt_too_long",
             "detail": f"policy {policy.name}: {why}; skipped for this policy", "excerpt": qs[pid][:200]}
            for pid, why in skips]
    write_table(schema("rejects").from_rows(rows), path, name="rejects")


class _LazyEngine:
    """The group's engine, started on the first request for samples (an adaptive run may need none)."""

    def __init__(self, factory: Callable[[], Engine]) -> None:
        self.factory, self.engine, self.startup_s, self.t0 = factory, None, 0.0, None

    def get(self, bar) -> Engine:
        if self.engine is None:
            self.engine = self.factory()
            bar.set_postfix_str(f"starting {self.engine.name} engine")
            self.startup_s = self.engine.start()
            self.t0 = time.perf_counter()
        return self.engine

    def elapsed(self) -> float:
        return 0.0 if self.t0 is None else time.perf_counter() - self.t0

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


class _Judge:
    """Verdicts between adaptive rounds: the verifier core in memory, the verify stage's table as a read-only cache."""

    def __init__(self, params: Params, problems: pa.Table, verdicts_dir: Path, modes: dict[str, str] | None = None) -> None:
        self.config, self.vid = params.verify, verifier_id(params.verify)
        self.modes = modes or {}  # policy_id -> its thinking mode (as the verify stage reads the policies table)
        self.problems = problems.select(["problem_id", "answer"])
        self.verdicts_dir = verdicts_dir
        self.known: dict[str, Outcomes] = {}

    def __call__(self, rollouts: pa.Table) -> pa.Table:
        return verify(rollouts, self.problems, config=self.config, modes=self.modes).verdicts

    def outcomes(self, policy_id: str, rollouts_dir: Path) -> Outcomes:
        """The outcomes of ``policy_id``'s rollouts already written (of the selected problems)."""
        mine = read_table(rollouts_dir, name="rollouts", columns=["problem_id", "policy_id", "sample_idx", "completion"])
        mine = mine.filter(pc.and_(pc.equal(mine.column("policy_id"), policy_id),
                                   pc.is_in(mine.column("problem_id"), self.problems.column("problem_id"))))
        known: Outcomes = {}
        cached = read_table(self.verdicts_dir, name="verdicts", columns=[*KEY, "verifier_id", "status"])
        cached = cached.filter(pc.and_(pc.equal(cached.column("verifier_id"), self.vid),
                                       pc.equal(cached.column("policy_id"), policy_id)))
        hits = cached.join(mine.select(KEY), keys=KEY, join_type="inner")
        add_outcomes(known, hits)
        rest = mine.join(hits.select(KEY), keys=KEY, join_type="left anti")
        if rest.num_rows:
            add_outcomes(known, self(rest))
        self.known[policy_id] = known
        return known


def _engine_key(policy: Policy, options: dict[str, Any]) -> tuple[str, ModelSpec, str]:
    return policy.engine, policy.model, keys.canonical_json(options)


def run(
    params: Params,
    *,
    root: Path = Path("."),
    set_name: str = "main",
    progress: bool = True,
    engine_factory: EngineFactory = create_engine,
) -> RolloutResult:
    """The shell: the set's problems in; its rollouts (new shards only), policies and metrics out."""
    t_wall = time.perf_counter()
    root = Path(root)
    ts = table_set(params, set_name)
    cfg = params.rollout
    policies = [resolve_policy(n, params.policies[n], models_dir=root / params.paths.models) for n in cfg.policies]
    check_distinct(policies)

    problems = read_table(ts.dir("problems", root), name="problems")
    if set_name == "main":  # reformulated problems are derived from the main selection already
        problems = select_problems(problems, sources=cfg.sources, limit=cfg.limit)
    else:
        problems = select_problems(problems)
    out = ts.dir("rollouts", root)
    # rollout writes (and its skips file replaces) shards by name: only in folders it can prove are its tables' (issue 29)
    claim_table_dir(out, name="rollouts", subfolders=(Path(ts.rollout_rejects).name,))
    claim_table_dir(ts.dir("policies", root), name="policies")
    claim_table_dir(root / ts.rollout_rejects, name="rejects")
    result = RolloutResult(set_name=set_name, policies=policies)

    with _exclusive(out):
        _clean_temp(out)
        # the snapshots first, so every rollout on disk always has its policies row
        pol_dir = ts.dir("policies", root)
        for p in policies:
            write_table(policies_table([p]), pol_dir / f"{p.policy_id}.parquet", name="policies")
        done = read_table(out, name="rollouts", columns=["problem_id", "policy_id", "sample_idx"])
        existing = {p.policy_id: existing_keys(done, p.policy_id) for p in policies}
        # adaptive: the first round's work is decided by the verdicts (pipeline/rollout/adaptive.py); this is the bound
        todo = {p.policy_id: plan(problems, k=cfg.k, existing=existing[p.policy_id]) for p in policies}
        decided: dict[str, dict[str, tuple[int, int]]] = {}
        total = sum(len(w.sample_idxs) for work in todo.values() for w in work)
        selected = set(problems.column("problem_id").to_pylist())
        result.samples_existing = sum(pid in selected and i < cfg.k for keys_ in existing.values() for pid, i in keys_)
        for p in policies:
            n = sum(len(w.sample_idxs) for w in todo[p.policy_id])
            result.per_policy[p.name] = {"policy_id": p.policy_id, "prompts": len(todo[p.policy_id]), "samples": n,
                                         "tokens": 0}

        # policies sharing an engine (same engine, model and options) share one start-up
        groups: dict[tuple[str, ModelSpec, str], list[Policy]] = {}
        options: dict[tuple[str, ModelSpec, str], dict[str, Any]] = {}
        for p in policies:
            opts = {**cfg.engine_options.get(p.engine, {}), **p.engine_options}
            key = _engine_key(p, opts)
            groups.setdefault(key, []).append(p)
            options[key] = opts

        bar = tqdm(total=total, desc=f"rollout[{set_name}]", unit=" samples", disable=not progress or total == 0,
                   mininterval=1.0, dynamic_ncols=True)
        t_gen = [0.0]  # generation time so far, across engines

        adaptive = cfg.budget.kind == "adaptive"
        if adaptive:  # a prior's source is measured before the policies that use it
            order = sorted(policies, key=lambda p: params.policies[p.name].prior is not None)
            groups = {k: sorted(g, key=order.index) for k, g in sorted(groups.items(),
                      key=lambda kv: min(order.index(p) for p in kv[1]))}
            judge = _Judge(params, problems, ts.dir("verdicts", root),
                           modes={p.policy_id: p.thinking for p in policies if p.thinking})
        for key, group in groups.items():
            if not adaptive and not any(todo[p.policy_id] for p in group):
                continue
            engine = _LazyEngine(lambda key=key, group=group: engine_factory(key[0], group[0].model, options[key], root=root))
            try:
                for p in group:
                    stats = result.per_policy[p.name]

                    def on_sample(s: Sample, stats=stats, engine=engine) -> None:
                        result.samples += 1
                        result.tokens += s.n_tokens
                        stats["tokens"] += s.n_tokens
                        elapsed = t_gen[0] + engine.elapsed()
                        bar.update(1)
                        if elapsed > 0:
                            bar.set_postfix_str(f"{result.tokens / elapsed:.1f} tok/s", refresh=False)

                    skips: dict[str, str] = {}  # problem_id -> why (an adaptive run meets a skip once per round)

                    def generate(k, sel=problems, p=p, on_sample=on_sample, engine=engine, skips=skips):
                        eng = engine.get(bar)
                        for name, table in rollout(sel, policy=p, k=k, existing=existing[p.policy_id], engine=eng,
                                                   shard_size=cfg.shard_size, on_sample=on_sample,
                                                   on_skip=lambda pid, why: skips.setdefault(pid, why)):
                            write_table(table, out / f"{name}.parquet", name="rollouts")
                            existing[p.policy_id].update(zip(table.column("problem_id").to_pylist(),
                                                             table.column("sample_idx").to_pylist(), strict=True))
                            result.shards += 1
                            yield table

                    if not adaptive:
                        result.prompts += len(todo[p.policy_id])
                        for _ in generate(cfg.k):
                            pass
                    else:
                        prior = params.policies[p.name].prior
                        src = next((q for q in policies if prior and q.name == prior.policy), None)
                        rounds = adaptive_rounds(
                            problems.column("problem_id").to_pylist(), cfg=cfg, bands=params.annotate.bands,
                            outcomes=judge.outcomes(p.policy_id, out), judge=judge,
                            generate=lambda targets, generate=generate: generate(
                                targets, sel=problems.filter(pc.is_in(problems.column("problem_id"), pa.array(list(targets))))),
                            prior=decided[src.policy_id] if src else None, prior_weight=prior.weight if prior else 0.0)
                        decided[p.policy_id] = counts(judge.known[p.policy_id], rounds.decisions)
                        stats.update(samples=rounds.generated, rounds=rounds.rounds, stop_reasons=rounds.stop_reasons(),
                                     selected=sum(n for n, _ in rounds.decisions.values()),
                                     prior=src.policy_id if src else None)
                    _write_skips(root / ts.rollout_rejects / f"{p.policy_id}.parquet", p, list(skips.items()), problems)
                    result.skipped += len(skips)
                    stats["problems_skipped"] = len(skips)
            finally:
                if (log := getattr(engine.engine, "log_path", None)) is not None and log not in result.engine_logs:
                    result.engine_logs.append(log)
                t_gen[0] += engine.elapsed()
                result.startup_s += engine.startup_s
                engine.close()
        bar.close()

    result.generate_s = t_gen[0]
    result.wall_s = time.perf_counter() - t_wall
    write_metrics(ts.metrics_file("rollout", root), result.metrics(), root=root)
    return result
