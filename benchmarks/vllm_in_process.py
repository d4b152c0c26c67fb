"""passband's vllm engine with ``in_process`` true vs false: start-up, throughput, identical samples.

    .venv/bin/python benchmarks/vllm_in_process.py [--prompts 64] [--n 4] [--max-tokens 32] [--rounds 1]

Each mode runs in a fresh process (so start-up includes vLLM's imports and, with ``in_process: false``,
its engine-core and worker processes), alternating modes per round; the same 3-shot prompts and seeds
in both. Prints start-up seconds, generation tokens/s, the ratios, and whether every sample's text is
the same in both modes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FEWSHOT = ("Q: What is 12 + 7?\nA: 12 + 7 = 19. The answer is 19.\n\nQ: What is 9 * 6?\nA: 9 * 6 = 54. "
           "The answer is 54.\n\nQ: Tom has 5 apples and buys 3 more. How many?\nA: 5 + 3 = 8. The answer is 8.\n\n")


def child(in_process: bool, prompts: int, n: int, max_tokens: int) -> None:
    sys.path.insert(0, str(REPO))
    from pipeline.config import SamplingConfig
    from pipeline.engines import ModelSpec, Prompt, Request, create_engine
    from pipeline.model import read_manifest

    model_dir = REPO / "data/models/smollm2-135m-instruct"
    m = read_manifest(model_dir)
    engine = create_engine("vllm", ModelSpec(m["model_id"], str(model_dir), m["revision"], "float32"),
                           {"max_num_seqs": 32, "max_model_len": 1024, "kv_cache_gib": 2, "in_process": in_process},
                           root=REPO)
    t0 = time.perf_counter()
    engine.start()
    start_s = time.perf_counter() - t0
    sampling = SamplingConfig(temperature=0.8, max_tokens=max_tokens, stop=["\nQ:", "\n\n"])
    requests = [Request(f"r{i}", Prompt(text=f"{FEWSHOT}Q: What is {i} + {i * 3 % 17}?\nA:"),
                        tuple(range(i * n, i * n + n)), sampling) for i in range(prompts)]
    t1 = time.perf_counter()
    samples = engine.generate(requests)
    gen_s = time.perf_counter() - t1
    engine.close()
    print(json.dumps({"start_s": start_s, "gen_s": gen_s, "tokens": sum(s.n_tokens for s in samples),
                      "texts": [s.text for s in samples]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--n", type=int, default=4, help="samples per prompt (one request and seed each)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", choices=["true", "false"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child == "true", args.prompts, args.n, args.max_tokens)
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.rounds):
        for mode in (True, False):
            out = subprocess.run([sys.executable, __file__, "--child", str(mode).lower(), "--prompts", str(args.prompts),
                                  "--n", str(args.n), "--max-tokens", str(args.max_tokens)],
                                 capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for mode, rs in runs.items():
        for r in rs:
            print(f"in_process={str(mode).lower():5}  start-up {r['start_s']:5.1f} s  generation {r['tokens']} tokens "
                  f"in {r['gen_s']:.1f} s = {r['tokens'] / r['gen_s']:.1f} tok/s")
    a, b = runs[True][0], runs[False][0]
    print(f"in_process / processes: start-up {a['start_s'] / b['start_s']:.2f}x, "
          f"throughput {(a['tokens'] / a['gen_s']) / (b['tokens'] / b['gen_s']):.2f}x; "
          f"identical samples: {a['texts'] == b['texts']} ({len(a['texts'])})")


if __name__ == "__main__":
    main()
