"""The `ray` engine (one replica, then two) vs the in-process `vllm` engine, same prompts and seeds, one run.

    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python benchmarks/ray_vs_local.py [--problems 32] [--k 8]

Builds the main job's policy (the embedded SmolLM2-135M, its 3-shot prompt and sampling from
params.yaml) on synthetic problems, then, one engine at a time (never two models loaded by
this script at once, except the two replicas of the last run):

- local:  the in-process ``vllm`` engine with ``rollout.engine_options.vllm``;
- ray x1: the ``ray`` engine on a local Ray, one replica using every core;
- ray x2: two replicas, the cores split between them.

Each engine is started, warmed up on a few samples, then times ``generate`` over every sample.
Prints generated tokens/s of each, ray/local ratios (target for one replica >= 0.9), how many
completions are identical to the in-process engine's, and Ray's start-up overhead (the ray
engine's start-up minus its slowest replica's own engine start-up). ``--json-out`` saves the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", type=Path, default=REPO / "params.yaml")
    p.add_argument("--problems", type=int, default=32)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=128, help="ray engine: samples per call to a replica")
    p.add_argument("--json-out", type=Path, default=None)
    return p.parse_args()


def main() -> int:
    args = _args()
    os.environ.setdefault("PYTHONPATH", str(REPO))  # the local Ray's workers import pipeline from here

    from pipeline.config import load_params
    from pipeline.engines import Request, create_engine
    from pipeline.ingest.synthetic import SyntheticOptions, generate
    from pipeline.keys import problem_id
    from pipeline.model import convert_gguf, find_embedded_gguf
    from pipeline.rollout.core import plan, requests_for
    from pipeline.rollout.policy import embedded_model_dir, resolve_policy
    from pipeline.schema import schema

    params = load_params(args.params)
    name = params.rollout.policies[0]
    convert_gguf(find_embedded_gguf(), embedded_model_dir(REPO / params.paths.models))
    policy = resolve_policy(name, params.policies[name], models_dir=REPO / params.paths.models)
    items, seen = [], set()
    for it in generate(SyntheticOptions(n_per_level=-(-args.problems // 9) + 2)):
        if (pid := problem_id(it.question)) not in seen:
            seen.add(pid)
            items.append({"problem_id": pid, "source": "synthetic", "source_id": str(len(items)),
                          "question": it.question, "answer": it.answer, "n_duplicates": 0})
    problems = schema("problems").from_rows(items).sort_by("problem_id").slice(0, args.problems)
    requests = requests_for(policy, plan(problems, k=args.k, existing=set()))
    # warm-up: other seeds than the timed ones, enough samples to reach every replica
    warm = [Request(f"warm-{r.id}", r.prompt, tuple(s + 1 for s in r.seeds), r.sampling) for r in requests[:16]]
    n_samples = sum(r.n for r in requests)
    vllm_opts = dict(params.rollout.engine_options.get("vllm", {}))
    cores = len(os.sched_getaffinity(0))
    print(f"{len(requests)} prompts x {args.k} = {n_samples} samples, max_tokens {policy.sampling.max_tokens}; "
          f"{cores} cores; vllm options {vllm_opts}", flush=True)

    configs = {
        "local": ("vllm", vllm_opts),
        "ray x1": ("ray", {"replicas": 1, "num_cpus": cores, "local_num_cpus": cores, "batch_size": args.batch_size,
                           "replica_options": vllm_opts}),
        "ray x2": ("ray", {"replicas": 2, "num_cpus": max(1, cores // 2), "local_num_cpus": cores,
                           "batch_size": args.batch_size, "replica_options": vllm_opts}),
    }
    results: dict[str, dict] = {}
    texts: dict[str, dict] = {}
    for label, (engine_name, options) in configs.items():
        engine = create_engine(engine_name, policy.model, options, root=REPO)
        t0 = time.perf_counter()
        startup = engine.start()
        engine.generate(warm)
        t1 = time.perf_counter()
        out = engine.generate(requests)
        dt = time.perf_counter() - t1
        replica_startup = max(getattr(engine, "replica_startup_s", [startup]))
        engine.close()
        tokens = sum(s.n_tokens for s in out)
        texts[label] = {(s.request_id, s.index): s.text for s in out}
        results[label] = {"tokens": tokens, "seconds": round(dt, 2), "tokens_per_s": round(tokens / dt, 1),
                          "startup_s": round(startup, 1), "ray_overhead_s": round(startup - replica_startup, 1),
                          "warmup_s": round(t1 - t0 - startup, 1)}
        print(f"{label:7s}: start-up {startup:5.1f}s (Ray's own {startup - replica_startup:4.1f}s), "
              f"{tokens} tokens in {dt:.1f}s = {tokens / dt:.1f} tok/s", flush=True)

    base = results["local"]["tokens_per_s"]
    for label in ("ray x1", "ray x2"):
        r = results[label]
        r["ratio_to_local"] = round(r["tokens_per_s"] / base, 3)
        same = sum(texts[label].get(k) == v for k, v in texts["local"].items())
        r["identical_completions"] = f"{same}/{n_samples}"
        print(f"{label}/local = {r['ratio_to_local']:.3f}{' (target >= 0.9)' if label == 'ray x1' else ''}; "
              f"identical completions {same}/{n_samples}", flush=True)
    summary = {"problems": len(requests), "k": args.k, "samples": n_samples, "max_tokens": policy.sampling.max_tokens,
               "cores": cores, "batch_size": args.batch_size, "vllm_options": vllm_opts, "runs": results}
    print(json.dumps(summary, indent=2))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
