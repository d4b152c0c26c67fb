"""Build a run where the policy is strong: the embedded model, k = 8, on the synthetic levels it mostly solves.

    python benchmarks/strong_policy_run.py OUT [--n-per-level 100] [--seed 1]
    cd OUT && passband ingest && passband rollout && passband verify && passband annotate --no-plots && passband summary
    python benchmarks/gold_suspicion.py --root OUT --draws 200

The answer-key score's strong case ("k >= 8 samples of a model that solves most items") with real model
text: SmolLM2-135M-Instruct (the embedded default, 3-shot, T = 0.8, vLLM) samples 8 answers to each of the synthetic
source's one-digit sums (L1), one-digit products (L2) and two-digit sums without carry (L3), which the main job measures
at mean pass rates 0.84, 0.68 and 0.56. The keys are computed, so every key is right: the benchmark moves 3 % of them
by one and counts what the score finds. The seed differs from the main job's (0), so the items are drawn anew, and
nothing in the score was fitted or chosen on this run.

Written down before the first rollout of this run (8 Dec 2026), the issue's bar and what follows from it: the score
passes here if, at its defaults, precision over everything flagged is >= 0.5 at recall >= 0.7 of the moved keys, and
the reliability table's ECE is <= 0.05. The score's parameters (prior 3 %, strata, the agreement rule) are not
changed on this run's figures; whatever comes out is reported in docs/tables.md, a miss included.

What came out: seed 1 missed it (precision 0.529, recall 0.363). The score then gained the working of the biggest
wrong class (pipeline/annotate/working.py), designed on seed 1, which makes seed 1 a development run (1.000 / 0.679).
The code was frozen (commit 3cc35fe) before seed 2's first rollout; seed 2 is the held-out figure: 1.000 / 0.728, ECE
0.0080 (0.552 / 0.424 without the working, ``--no-working``).

OUT gets a params.yaml holding only what differs from the defaults: the one source, the main job's policy and engine
context, k = 8. Items repeated by the draw (L1 has 81 distinct sums) are dropped by ingest as duplicates.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

LEVELS = ["L1", "L2", "L3"]


def params(n_per_level: int, seed: int) -> dict:
    return {
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "split": "train",
                                "options": {"n_per_level": n_per_level, "seed": seed, "levels": LEVELS}}]},
        "policies": {"smollm2-135m-3shot": {"sampling": {"max_tokens": 48, "stop": ["\nQ:", "\n\n"]}}},
        "rollout": {"policies": ["smollm2-135m-3shot"], "sources": ["synthetic"], "k": 8,
                    "engine_options": {"vllm": {"max_model_len": 1024}}},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the run's folder (created; must not hold a params.yaml)")
    ap.add_argument("--n-per-level", type=int, default=100, help="items drawn per level before duplicates go (100)")
    ap.add_argument("--seed", type=int, default=1, help="the synthetic source's seed (1; the main job uses 0)")
    args = ap.parse_args(argv)
    target = args.out / "params.yaml"
    if target.exists():
        raise SystemExit(f"{target} exists: pick an empty folder")
    args.out.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(params(args.n_per_level, args.seed), sort_keys=False), encoding="utf-8")
    print(f"wrote {target}; now: cd {args.out} && passband ingest && passband rollout && passband verify "
          f"&& passband annotate --no-plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
