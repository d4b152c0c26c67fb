"""Verifications per second: the verify stage vs raw ``math_verify.verify`` on one core, and the stage on 1 -> 2 workers.

    .venv/bin/python benchmarks/verify_vs_raw.py [--pairs 1500] [--rounds 5]

Inputs: distinct (gold, completion) pairs in the embedded model's few-shot style
(" 38 + 45 = 83. The answer is 83."), golds integers, decimals and fractions, half of them
correct; every (gold, answer) check distinct, so the stage's de-duplication of repeats gives it no advantage.
Each measurement runs in its own process pinned with sched_setaffinity (workers inherit it):

- raw, 1 core: ``verify(parse(gold), parse(completion))`` with math-verify's defaults in a loop,
  each gold parsed once (as the stage's worker caches it);
- stage, 1 core, 1 worker: ``pipeline.verify.verify`` (extraction, batching, the worker pool
  with its kill and memory limit); reported with and without the pool's start-up;
- stage, 2 cores, 2 workers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        kind = rng.random()
        if kind < 0.6:
            a, b = rng.randint(2, 999), rng.randint(2, 999)
            gold, ans = str(a + b), str(a + b + (0 if rng.random() < 0.5 else rng.randint(1, 9)))
            comp = f" {a} + {b} = {ans}. The answer is {ans}."
        elif kind < 0.8:
            x = rng.randint(1, 9999) / 100
            gold = f"{x:g}"
            ans = gold if rng.random() < 0.5 else f"{x + 0.5:g}"
            comp = f" The total is {ans}. The answer is {ans}."
        else:
            p, q = rng.randint(1, 30), rng.randint(2, 30)
            gold = f"\\frac{{{p}}}{{{q}}}"
            ans = f"\\frac{{{2 * p}}}{{{2 * q}}}" if rng.random() < 0.5 else f"\\frac{{{p + 1}}}{{{q}}}"
            comp = f" So the answer is ${ans}$."
        if (gold, ans) not in seen:  # distinct checks, so the stage's de-duplication of repeats gives it nothing
            seen.add((gold, ans))
            out.append((gold, comp))
    return out


def run_raw(pairs, *, on: str) -> dict:
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    parse("$1$")
    verify(parse("$1$"), parse("1"))  # warm-up
    golds: dict[str, list] = {}
    ok = 0
    from pipeline.verify.extract import extract

    config = _cfg()
    # on="answers": the same extracted answers the stage grades (isolates the stage's own overhead; extraction
    # is done before the clock starts); on="completions": math-verify's own extraction on the whole text
    texts = [comp if on == "completions" else f"${extract(comp, extractors=config.extractors).answer}$" for _, comp in pairs]
    t = time.perf_counter()
    for (gold, _), text in zip(pairs, texts, strict=True):
        g = golds.get(gold)
        if g is None:
            g = golds[gold] = parse(f"${gold}$")
        ok += bool(verify(g, parse(text)))
    return {"seconds": time.perf_counter() - t, "correct": ok}


def _cfg():
    from pipeline.config import VerifyConfig

    return VerifyConfig()


def run_stage(pairs, workers: int) -> dict:
    from pipeline.config import VerifyConfig
    from pipeline.schema import schema
    from pipeline.verify import verify
    from pipeline.verify.pool import GradePool

    golds = sorted({g for g, _ in pairs})
    pid = {g: f"p{i}" for i, g in enumerate(golds)}
    probs = schema("problems").from_rows([{"problem_id": pid[g], "source": "b", "source_id": pid[g], "question": pid[g],
                                           "answer": g, "n_duplicates": 0} for g in golds])
    rows = schema("rollouts").from_rows([{"problem_id": pid[g], "policy_id": "pol", "sample_idx": i, "seed": i, "completion": c,
                                          "n_tokens": 10, "finish_reason": "stop"} for i, (g, c) in enumerate(pairs)])
    cfg = VerifyConfig(workers=workers)
    # pool start-up alone (forkserver importing sympy, workers warming up), to report steady state too
    t = time.perf_counter()
    with GradePool(workers=workers, timeout_s=cfg.timeout_s, memory_mb=cfg.memory_mb):
        startup = time.perf_counter() - t
    t = time.perf_counter()
    res = verify(rows, probs, config=cfg)
    total = time.perf_counter() - t
    # the second pool start in verify() forks from the already-warm forkserver: measure that too
    t = time.perf_counter()
    with GradePool(workers=workers, timeout_s=cfg.timeout_s, memory_mb=cfg.memory_mb):
        warm_start = time.perf_counter() - t
    return {"seconds": total, "seconds_steady": total - warm_start, "cold_startup": startup,
            "correct": res.statuses.get("correct", 0), "checks": res.checks}


def child(which: str, n: int, cores: int) -> None:
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))
    pairs = make_pairs(n)
    out = run_stage(pairs, workers=cores) if which == "stage" else run_raw(pairs, on=which.removeprefix("raw-"))
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5,
                    help="measure raw and stage this many times, alternating which goes first (the machine is shared)")
    ap.add_argument("--child", choices=["raw-answers", "raw-completions", "stage"])
    ap.add_argument("--raw-completions", action="store_true",
                    help="also time math-verify's own extraction on whole completions (slow: minutes)")
    ap.add_argument("--cores", type=int, default=1)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.pairs, a.cores)
        return

    def measure(which: str, cores: int) -> dict:
        cmd = [sys.executable, __file__, "--child", which, "--pairs", str(a.pairs), "--cores", str(cores)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    n = a.pairs
    print(f"{n} completions; machine has {len(os.sched_getaffinity(0))} cores, shared; {a.rounds} rounds, "
          "each timing every side back to back in fresh processes")
    print(f"{'round':<6}{'raw 1 core':>12}{'stage 1 worker':>16}{'stage/raw':>11}{'stage 2 workers':>17}{'scaling':>9}")
    ratios, scalings = [], []
    for r in range(a.rounds):
        order = [("raw", "raw-answers", 1), ("s1", "stage", 1), ("s2", "stage", 2)]
        if r % 2:
            order.reverse()
        got = {key: measure(which, cores) for key, which, cores in order}
        raw, s1, s2 = got["raw"], got["s1"], got["s2"]
        if not raw["correct"] == s1["correct"] == s2["correct"]:
            raise SystemExit(f"verdicts disagree: raw {raw['correct']}, stage {s1['correct']} / {s2['correct']} correct")
        ratios.append(raw["seconds"] / s1["seconds"])
        scalings.append(s1["seconds"] / s2["seconds"])
        print(f"{r + 1:<6}{n / raw['seconds']:>10.0f}/s{n / s1['seconds']:>14.0f}/s{ratios[-1]:>10.2f}x"
              f"{n / s2['seconds']:>15.0f}/s{scalings[-1]:>8.2f}x")
    print(f"median stage / raw on 1 core: {statistics.median(ratios):.2f}x (target >= 0.9x); "
          f"median scaling 1 -> 2 workers: {statistics.median(scalings):.2f}x")
    print(f"correct verdicts: {raw['correct']} on every side; stage checks {s1['checks']} distinct (gold, answer) pairs; "
          f"stage times include extraction and the pool's start (a cold pool start, {s1['cold_startup']:.1f} s, is not)")
    if a.raw_completions:
        rawc = measure("raw-completions", 1)
        print(f"raw math-verify on whole completions (its own extraction): {n / rawc['seconds']:.0f}/s, "
              f"correct {rawc['correct']}")

if __name__ == "__main__":
    main()
