"""The test suite's vLLM engine bound to every core against one core, while other work holds a core.

    .venv/bin/python benchmarks/engine_bind.py [--bind all 0] [--samples 4] [--prompts 10] [--busy 1]

Each bind runs in a fresh process, one after the other: the session engine's options (8 sequences,
512 tokens, 1 GiB KV cache) on the embedded model, prompts x samples fewshot_arith completions of up to
48 tokens (the reformulation test's main set). It prints start-up and generation wall and CPU seconds
and tokens per second, while ``--busy`` busy-loop processes stand for the suite's other xdist worker:
whether an engine bound to both cores of the 2-core box stalls at each step's barrier beside a busy
process, and whether one core per worker would be faster. On the shared box (28 Nov 2026) the answer
flipped with the load: beside a niced training job, one core 9.1 tok/s against 5.6 on both; beside one
busy loop at a load average of 5-9, one core 3.2 tok/s against 11.0 on both. A quiet box decides.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(bind: str, prompts: int, samples: int) -> None:
    if bind != "all":
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind
    sys.path.insert(0, str(REPO))
    from pipeline.config import SamplingConfig
    from pipeline.engines import ModelSpec, Prompt, Request, create_engine
    from pipeline.model import convert_gguf, find_embedded_gguf, read_manifest
    from pipeline.rollout.policy import EMBEDDED_DIR
    from pipeline.rollout.prompts import load_template, render

    model = REPO / "data" / "models" / EMBEDDED_DIR
    convert_gguf(find_embedded_gguf(), model)
    m = read_manifest(model)
    engine = create_engine("vllm", ModelSpec(m["model_id"], str(model), m["revision"], "float32"),
                           {"max_num_seqs": 8, "max_model_len": 512, "kv_cache_gib": 1}, root=REPO)

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    c0, w0 = cpu(), time.perf_counter()
    engine.start()
    start_wall, start_cpu = time.perf_counter() - w0, cpu() - c0
    template = load_template("fewshot_arith")
    sampling = SamplingConfig(temperature=0.8, top_p=1.0, top_k=-1, max_tokens=48, stop=["\nQ:", "\n\n"])
    requests = [Request(f"r{i}", Prompt(text=render(template, f"What is {17 * i + 40} * {i + 13} - {7 * i}?").text),
                        tuple(range(samples)), sampling) for i in range(prompts)]
    c0, w0 = cpu(), time.perf_counter()
    out = engine.generate(requests)
    wall, used = time.perf_counter() - w0, cpu() - c0
    tokens = sum(s.n_tokens for s in out)
    engine.close()
    print(f"bind {bind:>4}: start-up {start_wall:.1f} s ({start_cpu:.1f} s CPU); {len(out)} samples, {tokens} tokens "
          f"in {wall:.1f} s ({used:.1f} s CPU), {tokens / wall:.1f} tok/s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bind", nargs="+", default=["all", "0"], help="'all' (every allowed core) or a vLLM core list")
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the engine (the other worker)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one, args.prompts, args.samples)
        return 0
    with os.popen("uptime") as f:
        print("before:", f.read().strip())
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        for bind in args.bind:
            subprocess.run([sys.executable, __file__, "--one", bind, "--prompts", str(args.prompts),
                            "--samples", str(args.samples)], check=True)
    finally:
        for p in busy:
            p.kill()
    with os.popen("uptime") as f:
        print("after:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
