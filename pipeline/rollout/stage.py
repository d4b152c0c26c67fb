"""The rollout stage's shell and helpers; :mod:`pipeline.rollout` describes the stage and re-exports its public names."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.config import ConfigError, Params
from pipeline.engines import Engine, Sample, create_engine
from pipeline.io import claim_table_dir, read_table, write_metrics, write_table
from pipeline.locks import hold_folder
from pipeline.rollout.adaptive import Outcomes, adaptive_rounds, add_outcomes, counts
from pipeline.rollout.core import existing_keys, rollout, select_problems
from pipeline.rollout.importer import IMPORTS_DIR, UPSTREAM_DIR, ImportStats, import_dump
from pipeline.rollout.layout import get_layout
from pipeline.rollout.plan import plan_run
from pipeline.rollout.policy import Policy, check_distinct, policies_table, resolve_policy
from pipeline.run_metrics import RunStats
from pipeline.schema import schema
from pipeline.tablesets import table_set
from pipeline.verify.core import verifier_id, verify

KEY = list(schema("rollouts").key)  # the row key, declared once (schemas/rollouts.yaml)

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

    def stats(self) -> RunStats:
        stats = RunStats.of({
            "set": self.set_name,
            "prompts": self.prompts,
            "samples": self.samples,
            "samples_existing": self.samples_existing,
            "tokens": self.tokens,
            "shards_written": self.shards,
            "problems_skipped": self.skipped,
            "policies": self.per_policy,
        })
        stats.add_time("seconds", self.generate_s).add_time("engine_startup_s", self.startup_s)
        stats.add_time("wall_s", self.wall_s)
        return stats.rate("tokens_per_s", "tokens", "seconds", digits=2)

    def metrics(self) -> dict[str, Any]:
        return self.stats().to_dict()


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
        mine = read_table(rollouts_dir, name="rollouts", columns=[*KEY, "completion"])
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


class _Writer:
    """Writes the shards the core yields (atomically, by name), records their keys as done, counts and shows progress."""

    def __init__(self, out: Path, existing: dict[str, set], result: RolloutResult, bar: tqdm) -> None:
        self.out, self.existing, self.result, self.bar = out, existing, result, bar
        self.generate_s = 0.0  # generation time of the engines already closed

    def generate(self, policy: Policy, engine: _LazyEngine, problems: pa.Table, *, k, shard_size: int,
                 skips: dict[str, str]) -> Iterator[pa.Table]:
        """Generate ``policy``'s missing samples ``0..k-1`` of ``problems``; yields each shard once it is written."""
        stats = self.result.per_policy[policy.name]
        eng = engine.get(self.bar)
        for name, table in rollout(problems, policy=policy, k=k, existing=self.existing[policy.policy_id], engine=eng,
                                   shard_size=shard_size, on_sample=lambda s: self._sampled(s, stats, engine),
                                   on_skip=lambda pid, why: skips.setdefault(pid, why)):
            write_table(table, self.out / f"{name}.parquet", name="rollouts")
            self.existing[policy.policy_id].update(zip(table.column("problem_id").to_pylist(),
                                                       table.column("sample_idx").to_pylist(), strict=True))
            self.result.shards += 1
            yield table

    def _sampled(self, sample: Sample, stats: dict[str, Any], engine: _LazyEngine) -> None:
        self.result.samples += 1
        self.result.tokens += sample.n_tokens
        stats["tokens"] += sample.n_tokens
        elapsed = self.generate_s + engine.elapsed()
        self.bar.update(1)
        if elapsed > 0:
            self.bar.set_postfix_str(f"{self.result.tokens / elapsed:.1f} tok/s", refresh=False)


def _adaptive(policy: Policy, *, writer: _Writer, engine: _LazyEngine, problems: pa.Table, params: Params, judge: _Judge,
              policies: list[Policy], decided: dict[str, dict[str, tuple[int, int]]], skips: dict[str, str]) -> None:
    """One policy's adaptive rounds (pipeline/rollout/adaptive.py): each round's targets generated, then judged."""
    cfg = params.rollout
    prior = params.policies[policy.name].prior
    src = next((q for q in policies if prior and q.name == prior.policy), None)

    def generate(targets):  # problem_id -> k: that problem's samples 0..k-1
        sel = problems.filter(pc.is_in(problems.column("problem_id"), pa.array(list(targets))))
        return writer.generate(policy, engine, sel, k=targets, shard_size=cfg.shard_size, skips=skips)

    rounds = adaptive_rounds(problems.column("problem_id").to_pylist(), cfg=cfg, bands=params.annotate.bands,
                             outcomes=judge.outcomes(policy.policy_id, writer.out), judge=judge, generate=generate,
                             prior=decided[src.policy_id] if src else None, prior_weight=prior.weight if prior else 0.0)
    decided[policy.policy_id] = counts(judge.known[policy.policy_id], rounds.decisions)
    writer.result.per_policy[policy.name].update(
        samples=rounds.generated, rounds=rounds.rounds, stop_reasons=rounds.stop_reasons(),
        selected=sum(n for n, _ in rounds.decisions.values()), prior=src.policy_id if src else None)


def _import(policy: Policy, problems: pa.Table, *, out: Path, rejects_dir: Path, result: RolloutResult,
            progress: bool) -> ImportStats:
    """One imported policy's dump into the rollouts folder (pipeline/rollout/importer.py), with a progress bar."""
    layout = get_layout(policy.dump.layout)(policy.dump.options)
    if layout.file_format == "parquet":
        total, unit = pq.ParquetFile(policy.dump_path).metadata.num_rows, " rows"
    else:
        total, unit = policy.dump_path.stat().st_size, "B"
    with tqdm(total=total, desc=f"import[{policy.name}]", unit=unit, unit_scale=unit == "B", disable=not progress,
              mininterval=1.0, dynamic_ncols=True) as bar:
        stats = import_dump(policy, problems, out=out, rejects_dir=rejects_dir, progress=bar)
    result.samples += stats.samples - stats.carried if not stats.up_to_date else 0
    result.shards += stats.shards
    result.samples_existing += stats.samples if stats.up_to_date else stats.carried
    result.per_policy[policy.name] = {"policy_id": policy.policy_id, "imported": stats.to_dict(), "layout": policy.dump.layout,
                                      "samples": stats.samples, "tokens": 0}
    return stats


def run(
    params: Params,
    *,
    root: Path = Path("."),
    set_name: str = "main",
    progress: bool = True,
    engine_factory: EngineFactory = create_engine,
) -> RolloutResult:
    """The shell: the set's problems in; its rollouts (new shards only), policies and metrics out.

    What to generate is decided by :func:`pipeline.rollout.plan.plan_run` (pure); this reads the inputs, holds the
    output folder's lock, starts each engine group's engine on its first request, writes and counts."""
    t_wall = time.perf_counter()
    root = Path(root)
    ts = table_set(params, set_name)
    cfg = params.rollout
    every = [resolve_policy(n, params.policies[n], models_dir=root / params.paths.models, root=root) for n in cfg.policies]
    check_distinct(every)
    imported = [p for p in every if p.dump is not None]  # read from their dumps, not generated
    policies = [p for p in every if p.dump is None]

    problems = read_table(ts.dir("problems", root), name="problems")
    if set_name == "main":  # reformulated problems are derived from the main selection already
        problems = select_problems(problems, sources=cfg.sources, limit=cfg.limit)
    else:
        problems = select_problems(problems)
    out = ts.dir("rollouts", root)
    # rollout writes (and its skips file replaces) shards by name: only in folders it can prove are its tables', never a user's
    claim_table_dir(out, name="rollouts", subfolders=(Path(ts.rollout_rejects).name, UPSTREAM_DIR, IMPORTS_DIR))
    claim_table_dir(ts.dir("policies", root), name="policies")
    claim_table_dir(root / ts.rollout_rejects, name="rejects")
    if imported and set_name != "main":
        raise ConfigError(f"policies {[p.name for p in imported]} are imported from dumps: the {set_name} set's problems "
                          "were written here, so no dump holds their completions; measure them with a generating policy")
    result = RolloutResult(set_name=set_name, policies=every)
    adaptive = cfg.budget.kind == "adaptive"

    with hold_folder(out, busy=f"another rollout is writing to {out}"):
        _clean_temp(out)
        # the snapshots first, so every rollout on disk always has its policies row
        pol_dir = ts.dir("policies", root)
        for p in every:
            write_table(policies_table([p]), pol_dir / f"{p.policy_id}.parquet", name="policies")
        for p in imported:
            _import(p, problems, out=out, rejects_dir=root / ts.rollout_rejects, result=result, progress=progress)
        done = read_table(out, name="rollouts", columns=KEY)
        existing = {p.policy_id: existing_keys(done, p.policy_id) for p in policies}
        has_prior = {n for n in cfg.policies if params.policies[n].prior is not None} if adaptive else None
        the_plan = plan_run(problems, policies, k=cfg.k, existing=existing, engine_options=cfg.engine_options,
                            has_prior=has_prior)
        result.samples_existing = the_plan.samples_existing
        for p in policies:
            n = sum(len(w.sample_idxs) for w in the_plan.todo[p.policy_id])
            result.per_policy[p.name] = {"policy_id": p.policy_id, "prompts": len(the_plan.todo[p.policy_id]),
                                         "samples": n, "tokens": 0}

        bar = tqdm(total=the_plan.total, desc=f"rollout[{set_name}]", unit=" samples",
                   disable=not progress or the_plan.total == 0, mininterval=1.0, dynamic_ncols=True)
        writer = _Writer(out, existing, result, bar)
        judge = _Judge(params, problems, ts.dir("verdicts", root),
                       modes={p.policy_id: p.thinking for p in policies if p.thinking}) if adaptive else None
        decided: dict[str, dict[str, tuple[int, int]]] = {}
        for group in the_plan.groups:
            if not adaptive and not any(the_plan.todo[p.policy_id] for p in group.policies):
                continue
            engine = _LazyEngine(partial(engine_factory, group.engine, group.model, group.options, root=root))
            try:
                for p in group.policies:
                    skips: dict[str, str] = {}  # problem_id -> why (an adaptive run meets a skip once per round)
                    if adaptive:
                        _adaptive(p, writer=writer, engine=engine, problems=problems, params=params, judge=judge,
                                  policies=policies, decided=decided, skips=skips)
                    else:
                        result.prompts += len(the_plan.todo[p.policy_id])
                        for _ in writer.generate(p, engine, problems, k=cfg.k, shard_size=cfg.shard_size, skips=skips):
                            pass
                    _write_skips(root / ts.rollout_rejects / f"{p.policy_id}.parquet", p, list(skips.items()), problems)
                    result.skipped += len(skips)
                    result.per_policy[p.name]["problems_skipped"] = len(skips)
            finally:
                if (log := getattr(engine.engine, "log_path", None)) is not None and log not in result.engine_logs:
                    result.engine_logs.append(log)
                writer.generate_s += engine.elapsed()
                result.startup_s += engine.startup_s
                engine.close()
        bar.close()

    result.generate_s = writer.generate_s
    result.wall_s = time.perf_counter() - t_wall
    write_metrics(ts.metrics_file("rollout", root), result.stats(), root=root)
    return result
