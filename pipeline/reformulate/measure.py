"""The ladder's measurement on the real policy: k samples per rung, verified, banded, kept in a keyed cache.

A rung is rolled out exactly as a problem would be (the policy's prompt template and
sampling, ``rollout.k`` samples), but with its own seeds (``keys.sample_seed`` of the rung's
problem_id and ``<policy_id>/ladder``), so the reformulated set's ordinary rollout of a kept
child is an *independent* re-measurement, not the sample the ladder selected it on. Each
sample is verified with the configured verifier (``pipeline.verify.core.verify``) and the
group is banded with ``annotate.bands``. Results live in
``<paths.reformulated>/ladder/<policy_id>.jsonl``, one line per rung keyed by a digest of
(problem_id, gold, policy_id, verifier_id, k) with the completions and verdicts, so a re-run
only measures rungs it has not measured (and starts no engine when there are none).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config import BandsConfig, VerifyConfig
from pipeline.engines import Request
from pipeline.errors import PassbandError
from pipeline.io import atomic_write_text
from pipeline.keys import canonical_json, digest, sample_seed
from pipeline.reformulate.ladder import Candidate, Measurement, band_of
from pipeline.rollout.policy import Policy
from pipeline.verify.core import verifier_id, verify


class DamagedCache(PassbandError):
    pass


class EngineMeasure:
    """``candidates -> measurements`` on one policy's engine; the engine starts on the first uncached rung and stays up."""

    def __init__(self, *, policy: Policy, k: int, verify_config: VerifyConfig, bands: BandsConfig,
                 engine_options: dict[str, Any], root: Path, engine_factory: Callable[..., Any], cache_file: Path):
        self.policy, self.k, self.verify_config, self.bands = policy, k, verify_config, bands
        self.engine_options, self.root, self.engine_factory = engine_options, root, engine_factory
        self.cache_file = cache_file
        self.engine: Any = None
        self.measured = 0  # rungs measured in this run (not from the cache)
        self.samples = 0
        self.startup_s = 0.0
        self.generate_s = 0.0
        self._cache: dict[str, dict[str, Any]] | None = None

    @property
    def salt(self) -> str:
        return f"{self.policy.policy_id}/ladder"

    def key(self, c: Candidate) -> str:
        parts: list[Any] = [c.problem_id, c.answer, self.policy.policy_id, verifier_id(self.verify_config), self.k]
        return digest(canonical_json([*parts, c.replica] if c.replica else parts))

    def seed_salt(self, c: Candidate) -> str:
        """The samples' seed salt: a confirmation (replica 1) draws k new seeds."""
        return f"{self.salt}/{c.replica}" if c.replica else self.salt

    def cache(self) -> dict[str, dict[str, Any]]:
        if self._cache is None:
            self._cache = {}
            if self.cache_file.is_file():
                for i, line in enumerate(self.cache_file.read_text(encoding="utf-8").splitlines(), 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                        self._cache[row["key"]] = row
                    except (json.JSONDecodeError, KeyError, TypeError):
                        raise DamagedCache(f"{self.cache_file}: line {i} is damaged; delete the file to measure the "
                                           "ladder again") from None
        return self._cache

    def _start(self) -> Any:
        if self.engine is None:
            self.engine = self.engine_factory(self.policy.engine, self.policy.model, self.engine_options, root=self.root)
            self.startup_s += self.engine.start()
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def __call__(self, candidates: list[Candidate]) -> list[Measurement]:
        cache = self.cache()
        todo = {self.key(c): c for c in candidates if self.key(c) not in cache}
        if todo:
            engine = self._start()
            t0 = time.perf_counter()
            requests = [Request(key, self.policy.render(c.question),
                                tuple(sample_seed(c.problem_id, self.seed_salt(c), i) for i in range(self.k)),
                                self.policy.sampling)
                        for key, c in todo.items()]
            samples = engine.generate(requests)
            self.generate_s += time.perf_counter() - t0
            rows = [(s.request_id, todo[s.request_id].problem_id, s.index, s.text) for s in samples]
            rollouts = pa.table({"problem_id": [r[0] for r in rows], "policy_id": [self.policy.policy_id] * len(rows),
                                 "sample_idx": [r[2] for r in rows], "completion": [r[3] for r in rows]})
            gold = pa.table({"problem_id": list(todo), "answer": [c.answer for c in todo.values()]})
            verdicts = verify(rollouts, gold, config=self.verify_config).verdicts
            statuses = verdicts.column("status").to_pylist()
            for key, c in todo.items():
                mine = [(r[2], r[3], st) for r, st in zip(rows, statuses, strict=True) if r[0] == key]
                mine.sort()
                cache[key] = {"key": key, "problem_id": c.problem_id, "rung": c.rung, "replica": c.replica, "n": len(mine),
                              "n_correct": sum(st == "correct" for _, _, st in mine),
                              "completions": [t for _, t, _ in mine], "statuses": [st for _, _, st in mine]}
            self.measured += len(todo)
            self.samples += len(rows)
            lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for _, r in sorted(cache.items())]
            atomic_write_text(self.cache_file, "\n".join(lines) + "\n")
        out = []
        for c in candidates:
            r = cache[self.key(c)]
            out.append(Measurement(r["n"], r["n_correct"], band_of(r["n_correct"], r["n"], self.bands)))
        return out
