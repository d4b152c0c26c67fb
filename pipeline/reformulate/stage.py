"""The reformulate stage's shell and helpers; :mod:`pipeline.reformulate` describes the stage and re-exports its public names."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.config import ConfigError, Params, SamplingConfig
from pipeline.engines import Prompt, Request, create_engine
from pipeline.io import atomic_write_text, read_table, replace_dir, write_metrics
from pipeline.keys import digest, sample_seed
from pipeline.reformulate.core import STAGE_REASONS, ReformulateResult, reformulate, select_parents
from pipeline.reformulate.ladder import band_of
from pipeline.reformulate.measure import EngineMeasure
from pipeline.reformulate.registry import METHODS, Reformulator, build
from pipeline.rollout.policy import resolve_policy
from pipeline.run_metrics import RunStats
from pipeline.tablesets import table_set

__all__ = ["METHODS", "STAGE_REASONS", "ReformulateResult", "generations_dir", "ladder_dir", "reformulate", "run",
           "select_parents"]

GENERATIONS_DIR = "generations"
LADDER_DIR = "ladder"


class CachedGenerator:
    """``prompts -> completions`` on one policy's engine, with every completion kept in a JSONL cache.

    The engine starts only when some prompt is not cached. The seed of a prompt is derived
    from the prompt and the generator, so a re-generated text is the same text.
    """

    def __init__(self, *, policy, sampling: SamplingConfig, engine_options: dict[str, Any], root: Path,
                 engine_factory: Callable[..., Any], cache_file: Path | None = None):
        self.policy, self.sampling, self.engine_options = policy, sampling, engine_options
        self.cache_file, self.root, self.engine_factory = cache_file, root, engine_factory
        self.generated = 0
        self.startup_s = 0.0

    @property
    def identity(self) -> dict[str, Any]:
        m = self.policy.model
        return {"model": m.model_id, "revision": m.revision, "engine": self.policy.engine, "dtype": m.dtype}

    def _load(self) -> dict[str, str]:
        if self.cache_file is None or not self.cache_file.is_file():
            return {}
        cache = {}
        for line in self.cache_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                cache[row["key"]] = row["text"]
        return cache

    def __call__(self, prompts: list[str]) -> list[str]:
        cache = self._load()
        gen = digest(json.dumps(self.identity, sort_keys=True))
        keys = [digest(p) for p in prompts]
        missing = sorted({k: p for k, p in zip(keys, prompts, strict=True) if k not in cache}.items())
        if missing:
            requests = [Request(k, Prompt(text=p), (sample_seed(k, gen, 0),), self.sampling) for k, p in missing]
            engine = self.engine_factory(self.policy.engine, self.policy.model, self.engine_options, root=self.root)
            try:
                self.startup_s = engine.start()
                for s in engine.generate(requests):
                    cache[s.request_id] = s.text
                    self.generated += 1
            finally:
                engine.close()
            if self.cache_file is None:
                raise ConfigError("CachedGenerator: no cache_file set")
            lines = [json.dumps({"key": k, "text": t}, ensure_ascii=False) for k, t in sorted(cache.items())]
            atomic_write_text(self.cache_file, "\n".join(lines) + "\n")
        return [cache[k] for k in keys]


def generations_dir(params: Params, root: Path) -> Path:
    return Path(root) / params.paths.reformulated / GENERATIONS_DIR


def _policy_names(params: Params) -> list[str]:
    names = params.reformulate.policies or params.rollout.policies
    if unknown := [n for n in names if n not in params.policies]:
        raise ConfigError(f"reformulate.policies names unknown policies {unknown}; declared: {sorted(params.policies)}")
    return names


def build_methods(params: Params, *, root: Path, engine_factory: Callable[..., Any] | None = None) -> list[Reformulator]:
    """The configured methods, options validated; ``llm_backward`` gets a cached generator on its policy's engine."""
    cfg = params.reformulate
    if unknown := sorted(set(cfg.options) - set(cfg.methods)):
        raise ConfigError(f"reformulate.options has options for methods not in reformulate.methods: {unknown}")
    methods = []
    for name in cfg.methods:
        opts = cfg.options.get(name, {})
        draft = build(name, opts, generate=lambda prompts: [], generator={})  # validates the options
        if not draft.needs_engine:
            methods.append(build(name, opts))
            continue
        pname = draft.options.writer  # type: ignore[attr-defined]
        if pname not in params.policies:
            raise ConfigError(f"reformulate.options.{name}.writer: unknown policy {pname!r}; 'rules' or one of "
                              f"{sorted(params.policies)}")
        pcfg = params.policies[pname]
        if pcfg.dump is not None:
            raise ConfigError(f"reformulate.options.{name}.writer: policy {pname!r} is imported from a dump "
                              f"({pcfg.dump.path}): it has no engine to write reformulations; name a generating policy")
        policy = resolve_policy(pname, pcfg, models_dir=root / params.paths.models, root=root)
        prompt = draft.prompt  # type: ignore[attr-defined]
        sampling = SamplingConfig(temperature=draft.options.temperature, top_p=1.0, top_k=-1,  # type: ignore[attr-defined]
                                  max_tokens=draft.options.max_tokens, stop=list(prompt.stop))  # type: ignore[attr-defined]
        engine_options = {**params.rollout.engine_options.get(policy.engine, {}), **policy.engine_options}
        generator = CachedGenerator(policy=policy, sampling=sampling, engine_options=engine_options, root=root,
                                    engine_factory=engine_factory or create_engine)
        method = build(name, opts, generate=generator, generator=generator.identity)
        generator.cache_file = generations_dir(params, root) / f"{name}-{method.method_version}.jsonl"
        methods.append(method)
    return methods


def ladder_dir(params: Params, root: Path) -> Path:
    return Path(root) / params.paths.reformulated / LADDER_DIR


def run(params: Params, *, root: Path = Path("."), progress: bool = True,
        engine_factory: Callable[..., Any] | None = None) -> ReformulateResult:
    """The shell: main-set difficulty and problems in; the reformulated set's problems, rejects and metrics out."""
    t0 = time.perf_counter()
    root = Path(root)
    cfg = params.reformulate
    main, out = table_set(params, "main"), table_set(params, "reformulated")
    methods = build_methods(params, root=root, engine_factory=engine_factory)
    names = _policy_names(params)
    policies = [resolve_policy(n, params.policies[n], models_dir=root / params.paths.models, root=root) for n in names]
    policy_ids = [p.policy_id for p in policies]

    difficulty = read_table(main.dir("difficulty", root), name="difficulty")
    problems = read_table(main.dir("problems", root), name="problems")
    parents = select_parents(difficulty, problems, bands=cfg.bands, max_pass_rate=cfg.max_pass_rate,
                             policy_ids=policy_ids, limit=cfg.limit)
    if progress:
        import sys

        print(f"reformulate: {len(parents)} hard parents x {len(methods)} methods", file=sys.stderr)
    judge = policies[0]  # the ladder measures on the first selection policy
    measure = EngineMeasure(
        policy=judge, k=params.rollout.k, verify_config=params.verify, bands=params.annotate.bands,
        engine_options={**params.rollout.engine_options.get(judge.engine, {}), **judge.engine_options}, root=root,
        engine_factory=engine_factory or create_engine, cache_file=ladder_dir(params, root) / f"{judge.policy_id}.jsonl",
    )
    try:
        result = reformulate(parents, methods, existing_ids=set(problems.column("problem_id").to_pylist()),
                             measure=measure, target_bands=cfg.target_bands,
                             confirm=partial(band_of, bands=params.annotate.bands) if cfg.confirm else None)
    finally:
        measure.close()
    replace_dir(out.dir("problems", root), [("part-0", result.problems)], name="problems")
    generations_dir(params, root).mkdir(parents=True, exist_ok=True)  # a DVC output even when llm_backward is off
    ladder_dir(params, root).mkdir(parents=True, exist_ok=True)
    replace_dir(out.dir("rejects", root), [("reformulate", result.rejects)], name="rejects")
    stats = RunStats.of({**result.metrics(), "policies": dict(zip(names, policy_ids, strict=True)),
                         "ladder": {"policy": judge.name, "k": params.rollout.k, "target_bands": list(cfg.target_bands),
                                    "confirm": cfg.confirm,
                                    "rungs_measured_now": measure.measured, "samples": measure.samples}})
    stats.section("ladder").add_time("engine_startup_s", measure.startup_s).add_time("generate_s", measure.generate_s)
    stats.add_time("seconds", time.perf_counter() - t0)
    for m in methods:
        gen = m.generate
        if isinstance(gen, CachedGenerator):
            stats.section("methods").section(m.name).count("generated", gen.generated).add_time("engine_startup_s",
                                                                                               gen.startup_s)
    write_metrics(root / params.paths.metrics / "reformulate.json", stats, root=root)
    return result
