"""Verify core: rollouts + problems in, verdicts out. Touches no files.

For each rollout, :func:`pipeline.verify.judge.judge_batch` (the work behind the public
``judge``): extract the final answer (:mod:`pipeline.verify.extract`, the configured
extractors in order), cap its length (``verify.max_answer_chars``), then grade it against the
problem's gold: in-process when both are plain numbers, else in the bounded worker pool
(:mod:`pipeline.verify.pool`). Identical
(gold, answer) pairs are graded once: with k samples per problem most answers repeat, and a
poisoned answer repeated k times costs its time bound once. One real row::

    completion "3 + 5 = 8. The answer is 8."   gold "8"
    -> status correct, extracted "8", extractor answer_is

Statuses: ``correct``, ``incorrect``, ``no_answer`` (nothing extracted, the answer is longer
than the cap, or math-verify cannot parse it), ``timeout`` (the check ran past
``verify.timeout_s`` CPU seconds and its worker was killed), ``error`` (math-verify raised,
the memory limit was hit, or the worker died). With ``verify.raise_on_error`` an ``error``
stops the stage with the rollout key instead.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.config import VerifyConfig
from pipeline.keys import canonical_json, digest
from pipeline.plugins import modules_in
from pipeline.schema import schema
from pipeline.verify.extract import EXTRACTORS
from pipeline.verify.grader import STATUSES
from pipeline.verify.judge import grade_options, judge_batch, judge_config
from pipeline.verify.pool import VerifyError

__all__ = ["VerifyError", "VerifyResult", "gold_digest", "verifier_id", "verify"]


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# The modules whose code decides a verdict: extraction (the shared reading, and every rule of the extractors' folder),
# the length cap, the grading policies, gold parsing. (pool.py only schedules and bounds the work; its bounds are in
# the options below.)
VERDICT_MODULES = ("pipeline.gold", "pipeline.numbers", "pipeline.thinking", "pipeline.verify.answer_text",
                   "pipeline.verify.extract", "pipeline.verify.grader", "pipeline.verify.judge")
VERDICT_PACKAGES = ("pipeline.verify.extractors",)  # every module in these folders decides a verdict too
# The libraries that decide one: math-verify, its LaTeX parser, and sympy under both.
VERDICT_LIBRARIES = ("math-verify", "latex2sympy2_extended", "sympy")


def verdict_modules() -> tuple[str, ...]:
    """:data:`VERDICT_MODULES` and the modules of :data:`VERDICT_PACKAGES`' folders."""
    return VERDICT_MODULES + tuple(m for p in VERDICT_PACKAGES for m in modules_in(p))


def _definitions(text: str) -> list[tuple[str, str]]:
    """A module's top-level definitions as (the names it binds, its code), without docstrings (comments are already
    gone: rewording prose keeps the id) and without imports: what an import binds is hashed where it is defined."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            body[0] = ast.Pass()
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        names = sorted(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        name = getattr(stmt, "name", None)
        out.append((",".join([name] if name else names), ast.dump(stmt)))
    return out


def source_digest(sources: dict[str, str]) -> str:
    """Digest of the code of the given sources (module name -> source text), by definition, not by file: moving a
    rule to another module keeps the digest; editing its code, or a constant it reads, changes it."""
    return digest(canonical_json(sorted(d for text in sources.values() for d in _definitions(text))), length=16)


@functools.cache
def verdict_source_digest() -> str:
    """:func:`source_digest` of :func:`verdict_modules` as installed."""
    return source_digest({m: Path(importlib.import_module(m).__file__).read_text() for m in verdict_modules()})


_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # pipeline/: the built-in rules' code is in verdict_modules()


def _plugin_digest(extractors: list[str]) -> dict[str, str]:
    """The code digest of each configured extractor that is a user's plugin (a file params.yaml's ``plugins``
    lists, outside pipeline/): its file decides verdicts as the built-in rules do."""
    out = {}
    for name in extractors:
        EXTRACTORS.lookup(name)
        origin = Path(EXTRACTORS.origin(name)).resolve()
        if origin.is_file() and not origin.is_relative_to(_PACKAGE_DIR):
            out[name] = source_digest({name: origin.read_text(encoding="utf-8")})
    return out


def verifier_id(config: VerifyConfig) -> str:
    """``math-verify-<version>/<digest>``: name and version readable, everything that decides a verdict hashed.

    The digest covers the code of :func:`verdict_modules` (so editing a policy is a new verifier, never a
    hand-bumped constant), the versions of :data:`VERDICT_LIBRARIES`, the extractors, the default thinking
    mode, the answer cap, the time and memory bounds, math-verify's options and the code of a configured
    extractor that is a user's plugin; not the worker count. A
    policy's own thinking mode is in its policy_id (pipeline/rollout/policy.py), so the verdict's key
    (policy_id, verifier_id) names everything that decided it.
    """
    identity = {
        "source": verdict_source_digest(),
        "libraries": {lib: _version(lib) for lib in VERDICT_LIBRARIES},
        "extractors": list(config.extractors),
        "thinking": config.thinking,
        "max_answer_chars": config.max_answer_chars,
        "timeout_s": config.timeout_s,
        "memory_mb": config.memory_mb,
        "options": grade_options(config).model_dump(),
    }
    if plugins := _plugin_digest(list(config.extractors)):
        identity["plugins"] = plugins
    return f"math-verify-{identity['libraries']['math-verify']}/{digest(canonical_json(identity), length=12)}"


def gold_digest(gold: str) -> str:
    """The digest of a gold answer that each verdict records: a changed gold re-verifies its problem's rollouts."""
    return digest(gold, length=16)


@dataclass
class VerifyResult:
    verdicts: pa.Table
    verifier_id: str
    checks: int = 0  # distinct (gold, answer) pairs graded (in-process or in the pool)
    restarts: int = 0  # workers killed (timeouts) or lost
    statuses: dict[str, int] = field(default_factory=dict)
    extractors: dict[str, int] = field(default_factory=dict)

    def metrics(self) -> dict:
        return {"verifier_id": self.verifier_id, "verdicts": self.verdicts.num_rows, "checks": self.checks,
                "worker_restarts": self.restarts, "status": {s: self.statuses.get(s, 0) for s in STATUSES},
                "extractor": dict(sorted(self.extractors.items()))}


def verify(rollouts: pa.Table, problems: pa.Table, *, config: VerifyConfig,
           on_done: Callable[[int], None] | None = None, modes: Mapping[str, str] | None = None) -> VerifyResult:
    """Verdicts for every rollout (same order), judged by :func:`pipeline.verify.judge.judge_batch`.
    ``problems`` must hold every rollout's problem_id. ``modes``: policy_id -> its thinking mode
    (:func:`pipeline.thinking.answer_section`); a policy not in it gets ``config.thinking``."""
    config = judge_config(config)  # a bad extractor name fails before any work
    grade_options(config)
    vid = verifier_id(config)
    gold_of = dict(zip(problems.column("problem_id").to_pylist(), problems.column("answer").to_pylist(), strict=True))
    pids = rollouts.column("problem_id").to_pylist()
    missing = sorted({p for p in pids if p not in gold_of})
    if missing:
        raise VerifyError(f"{len(missing)} rollout problem_ids are not in the problems table, e.g. {missing[:3]}")

    n = rollouts.num_rows
    digest_of = {pid: gold_digest(gold_of[pid]) for pid in set(pids)}
    pairs = [(gold_of[pid], text) for pid, text in zip(pids, rollouts.column("completion").to_pylist(), strict=True)]
    modes = modes or {}
    policy_modes = [modes.get(p, config.thinking) for p in rollouts.column("policy_id").to_pylist()]
    # cut at the token limit: answered only by an explicit final marker (a table without the column: none is cut)
    cut = ([f == "length" for f in rollouts.column("finish_reason").to_pylist()]
           if "finish_reason" in rollouts.column_names else None)
    batch = judge_batch(pairs, config=config, on_done=on_done, modes=policy_modes, cut=cut)
    js = batch.judgements

    if config.raise_on_error:
        for i, j in enumerate(js):
            if j.status == "error":
                key = (pids[i], rollouts.column("policy_id")[i].as_py(), rollouts.column("sample_idx")[i].as_py())
                raise VerifyError(f"verify error on rollout {key}: {j.detail} (verify.raise_on_error is on)")

    statuses = [j.status for j in js]
    table = pa.table({
        "problem_id": rollouts.column("problem_id"),
        "policy_id": rollouts.column("policy_id"),
        "sample_idx": rollouts.column("sample_idx"),
        "verifier_id": pa.array([vid] * n, pa.string()),
        "status": pa.array(statuses, pa.string()),
        "extracted": pa.array([j.extracted for j in js], pa.string()),
        "extractor": pa.array([j.extractor for j in js], pa.string()),
        "detail": pa.array([j.detail for j in js], pa.string()),
        "gold_digest": pa.array([digest_of[pid] for pid in pids], pa.string()),
        "thinking_chars": pa.array([j.thinking_chars for j in js], pa.int64()),
        "thinking_closed": pa.array([j.thinking_closed for j in js], pa.bool_()),
    })
    return VerifyResult(
        verdicts=schema("verdicts").validate(table), verifier_id=vid, checks=batch.checks, restarts=batch.restarts,
        statuses=dict(Counter(statuses)), extractors=dict(Counter(j.extractor for j in js if j.extractor)),
    )
