"""Rollout stage: k sampled completions per problem for each policy snapshot, keyed and resumable.

The shell reads the table set's problems and the rollouts already written, starts an engine
only when some key is missing (one engine per distinct model/engine/options, shared by the
policies that need it), writes each finished shard atomically as the core yields it, then
the policies table and the run's metrics. Killed at any point, a re-run redoes at most the
shards that were not yet written.

A problem whose prompt the engine cannot take at all (longer than vLLM's ``max_model_len``) is
skipped for that policy and the rest of the run completes; the skip is a ``rejects`` row (stage
``rollout``, reason ``prompt_too_long``, source_id ``<policy_id>/<problem_id>``) under
``<rollouts>/rejects/``, which the catalog's ``rejects`` view includes::

    passband sql "select source_id, detail from rejects where stage = 'rollout'"
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline import keys
from pipeline.config import Params
from pipeline.engines.registry import Engine, ModelSpec, Sample, create_engine
from pipeline.errors import PassbandError
from pipeline.io import read_table, write_json, write_table
from pipeline.rollout.core import existing_keys, plan, rollout, select_problems
from pipeline.rollout.policy import Policy, check_distinct, policies_table, resolve_policy
from pipeline.schema import schema
from pipeline.tablesets import table_set

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
    out.mkdir(parents=True, exist_ok=True)
    result = RolloutResult(set_name=set_name, policies=policies)

    with _exclusive(out):
        _clean_temp(out)
        # the snapshots first, so every rollout on disk always has its policies row
        pol_dir = ts.dir("policies", root)
        for p in policies:
            write_table(policies_table([p]), pol_dir / f"{p.policy_id}.parquet", name="policies")
        done = read_table(out, name="rollouts", columns=["problem_id", "policy_id", "sample_idx"])
        existing = {p.policy_id: existing_keys(done, p.policy_id) for p in policies}
        todo = {p.policy_id: plan(problems, k=cfg.k, existing=existing[p.policy_id]) for p in policies}
        total = sum(len(w.sample_idxs) for work in todo.values() for w in work)
        result.samples_existing = problems.num_rows * cfg.k * len(policies) - total
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

        for key, group in groups.items():
            if not any(todo[p.policy_id] for p in group):
                continue
            engine = engine_factory(key[0], group[0].model, options[key], root=root)
            try:
                bar.set_postfix_str(f"starting {key[0]} engine")
                result.startup_s += engine.start()
                if (log := getattr(engine, "log_path", None)) is not None and log not in result.engine_logs:
                    result.engine_logs.append(log)
                t0 = time.perf_counter()
                for p in group:
                    stats = result.per_policy[p.name]

                    def on_sample(s: Sample, stats=stats, t0=t0) -> None:
                        result.samples += 1
                        result.tokens += s.n_tokens
                        stats["tokens"] += s.n_tokens
                        elapsed = t_gen[0] + time.perf_counter() - t0
                        bar.update(1)
                        if elapsed > 0:
                            bar.set_postfix_str(f"{result.tokens / elapsed:.1f} tok/s", refresh=False)

                    result.prompts += len(todo[p.policy_id])
                    skips: list[tuple[str, str]] = []
                    for name, table in rollout(problems, policy=p, k=cfg.k, existing=existing[p.policy_id],
                                               engine=engine, shard_size=cfg.shard_size, on_sample=on_sample,
                                               on_skip=lambda pid, why, skips=skips: skips.append((pid, why))):
                        write_table(table, out / f"{name}.parquet", name="rollouts")
                        result.shards += 1
                    _write_skips(root / ts.rollout_rejects / f"{p.policy_id}.parquet", p, skips, problems)
                    result.skipped += len(skips)
                    stats["problems_skipped"] = len(skips)
                t_gen[0] += time.perf_counter() - t0
            finally:
                engine.close()
        bar.close()

    result.generate_s = t_gen[0]
    result.wall_s = time.perf_counter() - t_wall
    write_json(ts.metrics_file("rollout", root), result.metrics())
    return result
