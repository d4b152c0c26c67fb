"""Rollout stage vs raw ``vllm.LLM.generate`` on the same prompts, seeds and engine, in one process.

    flock /tmp/passband-engine.lock .venv/bin/python benchmarks/rollout_vs_raw.py [--problems 104] [--k 8] [--rounds 1]

Builds the default main job (the synthetic set, the embedded SmolLM2-135M policy from
params.yaml, its 3-shot prompt and sampling), starts one vLLM engine with params.yaml's
``rollout.engine_options.vllm``, and times, alternately:

- raw:   ``llm.generate(prompts, [SamplingParams(seed=...) per sample])``, one call, no writes;
- stage: the rollout core (``pipeline.rollout.core.rollout``) streaming the same samples and
         writing its Parquet shards atomically to a temp folder, as ``passband rollout`` does.

Prints generated tokens/s of each, stage/raw (target >= 0.95) and how many completions are
identical between the two (they should all be: same seeds). ``--json-out`` saves the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", type=Path, default=REPO / "params.yaml")
    p.add_argument("--problems", type=int, default=104, help="synthetic problems (the main job has 104)")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--rounds", type=int, default=1, help="raw/stage pairs (alternating order)")
    p.add_argument("--json-out", type=Path, default=None)
    return p.parse_args()


def main() -> int:
    args = _args()
    import pyarrow as pa

    from pipeline.config import load_params
    from pipeline.engines import create_engine
    from pipeline.ingest.synthetic import SyntheticOptions, generate
    from pipeline.io import write_table
    from pipeline.keys import problem_id
    from pipeline.model import convert_gguf, find_embedded_gguf
    from pipeline.rollout.core import plan, requests_for, rollout
    from pipeline.rollout.policy import embedded_model_dir, resolve_policy
    from pipeline.schema import schema

    params = load_params(args.params)
    name = params.rollout.policies[0]
    model_dir = embedded_model_dir(REPO / params.paths.models)
    convert_gguf(find_embedded_gguf(), model_dir)
    policy = resolve_policy(name, params.policies[name], models_dir=REPO / params.paths.models)

    items, seen = [], set()
    n_per_level = -(-args.problems // 9) + 2
    for it in generate(SyntheticOptions(n_per_level=n_per_level)):
        if (pid := problem_id(it.question)) not in seen:
            seen.add(pid)
            items.append({"problem_id": pid, "source": "synthetic", "source_id": str(len(items)), "question": it.question,
                          "answer": it.answer, "n_duplicates": 0})
    problems = schema("problems").from_rows(items).sort_by("problem_id").slice(0, args.problems)
    work = plan(problems, k=args.k, existing=set())
    requests = requests_for(policy, work)

    options = dict(params.rollout.engine_options.get("vllm", {}))
    engine = create_engine("vllm", policy.model, options, root=REPO)
    startup_s = engine.start()
    llm = engine.llm
    print(f"engine start-up (import + load) {startup_s:.1f}s; {len(requests)} prompts x {args.k} = "
          f"{sum(r.n for r in requests)} samples, max_tokens {policy.sampling.max_tokens}", flush=True)

    prompts = [engine.engine_prompt(r) for r in requests for _ in r.seeds]
    sps = [engine.sampling_params(r, s) for r in requests for s in r.seeds]
    keys = [(r.id, i) for r in requests for i in range(r.n)]

    def raw() -> tuple[dict, int, float]:
        t0 = time.perf_counter()
        outs = llm.generate(prompts, sps, use_tqdm=False)
        dt = time.perf_counter() - t0
        texts = {k: o.outputs[0].text for k, o in zip(keys, outs, strict=True)}
        return texts, sum(len(o.outputs[0].token_ids) for o in outs), dt

    def stage() -> tuple[dict, int, float]:
        with tempfile.TemporaryDirectory(dir=REPO / "data") as tmp:
            t0 = time.perf_counter()
            tables = []
            for shard, table in rollout(problems, policy=policy, k=args.k, existing=set(), engine=engine,
                                        shard_size=params.rollout.shard_size):
                write_table(table, Path(tmp) / f"{shard}.parquet", name="rollouts")
                tables.append(table)
            dt = time.perf_counter() - t0
        t = pa.concat_tables(tables)
        idx = {(w.problem_id, s): i for w in work for i, s in enumerate(w.sample_idxs)}
        texts = {(p, idx[(p, s)]): c for p, s, c in zip(t.column("problem_id").to_pylist(), t.column("sample_idx").to_pylist(),
                                                         t.column("completion").to_pylist(), strict=True)}
        return texts, sum(t.column("n_tokens").to_pylist()), dt

    # warm-up: one-off costs of the first batches
    llm.generate(prompts[:64], sps[:64], use_tqdm=False)

    runs: dict[str, list[float]] = {"raw": [], "stage": []}
    texts: dict[str, dict] = {}
    for r in range(args.rounds):
        order = [("raw", raw), ("stage", stage)] if r % 2 == 0 else [("stage", stage), ("raw", raw)]
        for label, fn in order:
            llm.reset_prefix_cache()  # neither run may reuse the other's prompt KV blocks
            t, ntok, dt = fn()
            texts[label] = t
            runs[label].append(ntok / dt)
            print(f"round {r + 1} {label:5s}: {ntok} tokens in {dt:.1f}s = {ntok / dt:.1f} tok/s", flush=True)
    engine.close()

    raw_tps, stage_tps = statistics.median(runs["raw"]), statistics.median(runs["stage"])
    same = sum(texts["raw"][k] == texts["stage"].get(k) for k in keys)
    result = {
        "problems": len(requests), "k": args.k, "samples": len(keys), "max_tokens": policy.sampling.max_tokens,
        "engine_options": options, "engine_startup_s": round(startup_s, 1), "rounds": args.rounds,
        "raw_tokens_per_s": [round(x, 1) for x in runs["raw"]], "stage_tokens_per_s": [round(x, 1) for x in runs["stage"]],
        "ratio": round(stage_tps / raw_tps, 3), "identical_completions": f"{same}/{len(keys)}",
    }
    print(f"raw {raw_tps:.1f} tok/s, stage {stage_tps:.1f} tok/s, stage/raw = {stage_tps / raw_tps:.3f} "
          f"(target >= 0.95); identical completions {same}/{len(keys)}", flush=True)
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
