"""The reward's cost per call and per item against raw math-verify, on the same real inputs, in one run.

    .venv/bin/python benchmarks/reward_overhead.py [--gsm8k 300] [--rounds 3]

Inputs: every completion of tests/data/embedded_completions.jsonl (the embedded model's few-shot and
chat-boxed completions of synthetic, GSM8K and MATH questions, with their golds), plus ``--gsm8k``
GSM8K test solutions from ../shared/data (each solution graded against its own gold and against the
next item's gold: half right, half wrong). Every measurement grades exactly these (gold, completion)
pairs, in the same order:

- raw: ``math_verify.verify(math_verify.parse(gold), math_verify.parse(completion))``, math-verify's
  defaults, in this process (no bound: a poisoned input would stall it);
- per call: ``judge(gold, completion)``, verl's ``compute_score`` and TRL's ``accuracy_reward`` with one
  completion, one call per pair;
- per batch: ``judge_many(pairs)`` and ``compute_score_batch`` on all pairs at once.

Before each passband measurement the persistent worker pool is closed and restarted with one unrelated
batch of checks (its start-up is not counted) and the in-process caches are cleared, so no measurement reuses a
parse another one made (raw math-verify, in this process, keeps sympy's caches from round to round: the
comparison favours raw). The table gives ms per item (the median round) and the ratio to raw, then the
per-call cost split into the pairs decided in-process and those graded in the worker pool.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data"


def load_pairs(n_gsm8k: int) -> list[tuple[str, str]]:
    from pipeline.gold import gsm8k_gold

    rows = [json.loads(line) for line in (REPO / "tests" / "data" / "embedded_completions.jsonl").open()]
    pairs = [(r["gold"], r["completion"]) for r in rows]
    gsm = [json.loads(line) for line in (SHARED / "gsm8k" / "test.jsonl").open()][:n_gsm8k + 1]
    for i, r in enumerate(gsm[:-1]):
        pairs.append((gsm8k_gold(r["answer"]), r["answer"]))
        pairs.append((gsm8k_gold(gsm[i + 1]["answer"]), r["answer"]))
    return pairs


def fresh() -> None:
    """Close the persistent pools, clear the in-process caches, and start the pool again on an unrelated check."""
    from pipeline.verify import judge_many, pool
    from pipeline.verify.answer_text import normalize

    pool._close_shared()
    normalize.cache_clear()
    # starts the configured workers (two batches of unrelated checks); not counted
    judge_many([(f"\\sqrt{{{k}}}", f"The answer is $\\sqrt{{{k}}}$.") for k in range(2, 40)])


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gsm8k", type=int, default=300, help="GSM8K test solutions (each graded twice)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import math_verify

    from pipeline.rewards import accuracy_reward, compute_score, compute_score_batch
    from pipeline.verify import judge, judge_many
    from pipeline.verify.judge import judge_batch, judge_config

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    pairs = load_pairs(args.gsm8k)
    n = len(pairs)

    def raw() -> list[bool]:
        return [bool(math_verify.verify(math_verify.parse(g), math_verify.parse(c))) for g, c in pairs]

    methods = {
        "raw math-verify": raw,
        "judge (per call)": lambda: [judge(g, c) for g, c in pairs],
        "compute_score (per call)": lambda: [compute_score("gsm8k", c, g) for g, c in pairs],
        "accuracy_reward (per call, 1 completion)": lambda: [accuracy_reward([c], answer=[g]) for g, c in pairs],
        "judge_many (batch)": lambda: judge_many(pairs),
        "compute_score_batch (batch)": lambda: compute_score_batch(["gsm8k"] * n, [c for _, c in pairs],
                                                                   [g for g, _ in pairs]),
    }
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(args.rounds):
        for name, fn in methods.items():
            if name != "raw math-verify":
                fresh()
            seconds[name].append(timed(fn))

    batch = judge_batch(pairs, config=judge_config(None))
    verdicts = [j.status == "correct" for j in batch.judgements]
    agree = sum(a == b for a, b in zip(raw(), verdicts, strict=True))
    raw_ms = statistics.median(seconds["raw math-verify"]) / n * 1000
    print(f"{n} (gold, completion) pairs: {len(pairs) - 2 * args.gsm8k} embedded completions + {2 * args.gsm8k} "
          f"GSM8K solutions; {batch.checks} distinct checks, {batch.checks - batch.pooled} decided in-process "
          f"(fast path), {batch.pooled} in the worker pool; verdicts agree with raw on {agree}/{n}")
    print(f"median of {args.rounds} rounds; per call = one call per pair")
    print(f"{'method':<44}{'ms/item':>10}{'x raw':>8}")
    for name in methods:
        ms = statistics.median(seconds[name]) / n * 1000
        print(f"{name:<44}{ms:>10.3f}{ms / raw_ms:>8.2f}")

    # the same per call, split: pairs whose answer the fast path decides in-process, and the rest (the pool)
    from pipeline.verify.extract import extract
    from pipeline.verify.grader import fast_grade

    config = judge_config(None)

    def in_process(gold: str, completion: str) -> bool:
        found = extract(completion, extractors=config.extractors)
        return found is None or len(found.answer) > config.max_answer_chars or fast_grade(gold, found.answer) is not None

    split = {"in-process": [p for p in pairs if in_process(*p)], "worker pool": [p for p in pairs if not in_process(*p)]}
    print("per call, split by where the verdict is decided (warm: both sides graded these inputs just before):")
    for where, subset in split.items():
        if not subset:
            continue
        t_raw = timed(lambda s=subset: [math_verify.verify(math_verify.parse(g), math_verify.parse(c)) for g, c in s])
        fresh()
        timed(lambda s=subset: [compute_score("gsm8k", c, g) for g, c in s])  # the workers' sympy caches, as raw's
        t_cs = timed(lambda s=subset: [compute_score("gsm8k", c, g) for g, c in s])
        print(f"  {where:<12} {len(subset):>4} pairs: raw {t_raw / len(subset) * 1000:.3f} ms, compute_score "
              f"{t_cs / len(subset) * 1000:.3f} ms ({t_cs / t_raw:.2f}x raw)")


if __name__ == "__main__":
    main()
