"""Agreement with the labels and checks/s, raw math-verify vs the verify stage, per surface form, in one run.

    .venv/bin/python benchmarks/verify_agreement.py [--n 20000] [--seed 0] [--workers 1] [--show 0]

Cases: the seeded labelled corpus of tests/support/verify_corpus.py (golds of GSM8K train, MATH train and the
synthetic set, plus constructed ones, restated or changed in the surface forms models write).

- raw: math-verify as a new user calls it, ``verify(parse(f"${gold}$"), parse(completion))`` with its
  defaults, in this process (one core), each gold parsed once;
- stage: :func:`pipeline.verify.judge_many` (extraction, the grading policies, the bounded worker
  pool) with ``--workers`` workers (1: one core, like raw).

Prints, per form (kind/form), the number of cases and each side's agreement with the labels, then the
totals with checks/s, then the disagreements between the two by the stage's policy, and ``--show`` of
the cases where the stage misses the label.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))


def main() -> None:
    from verify_corpus import cases as make_cases
    from verify_corpus import raw_math_verify

    from pipeline.verify import judge_many
    from pipeline.verify.policies import policy_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--show", type=int, default=0, help="print this many cases the stage gets wrong")
    args = ap.parse_args()

    cases = make_cases(seed=args.seed, n=args.n)
    judge_many([("1", "1")], workers=1)  # the forkserver's start-up is not the stage's per-check cost
    t0 = time.perf_counter()
    raw = raw_math_verify(cases)
    t_raw = time.perf_counter() - t0
    t0 = time.perf_counter()
    stage = judge_many([(c.gold, c.completion) for c in cases], options={"timeout_s": 5.0}, workers=args.workers)
    t_stage = time.perf_counter() - t0

    def ok_raw(i: int) -> bool:
        return raw[i] == (cases[i].expected == "correct")

    def ok_stage(i: int) -> bool:
        return (stage[i].status == "correct") == (cases[i].expected == "correct")

    by_form: dict[str, list[int]] = collections.defaultdict(list)
    for i, c in enumerate(cases):
        by_form[c.form].append(i)
    print(f"{'form':34} {'cases':>6} {'raw':>8} {'stage':>8}")
    for form in sorted(by_form):
        idx = by_form[form]
        r = sum(map(ok_raw, idx)) / len(idx)
        s = sum(map(ok_stage, idx)) / len(idx)
        mark = "  <-- stage below raw" if s < r else ""
        print(f"{form:34} {len(idx):>6} {100 * r:>7.2f}% {100 * s:>7.2f}%{mark}")
    n = len(cases)
    r_all, s_all = sum(map(ok_raw, range(n))) / n, sum(map(ok_stage, range(n))) / n
    print(f"{'all':34} {n:>6} {100 * r_all:>7.2f}% {100 * s_all:>7.2f}%")
    print(f"checks/s: raw {n / t_raw:.0f} (1 core, in-process) | stage {n / t_stage:.0f} "
          f"({args.workers} worker{'s' if args.workers > 1 else ''}, extraction in the parent) | "
          f"stage/raw {t_raw / t_stage:.2f}x")
    dis = collections.Counter()
    for i in range(n):
        if raw[i] != (stage[i].status == "correct"):
            dis[(policy_of(stage[i]), "stage right" if ok_stage(i) else "raw right")] += 1
    print("disagreements (stage policy, who matches the label):")
    for (p, who), k in sorted(dis.items()):
        print(f"  {p:28} {who:12} {k}")
    shown = 0
    misses = sorted((i for i in range(n) if not ok_stage(i)), key=lambda i: not ok_raw(i))  # raw right first
    for i in misses:
        if shown < args.show:
            shown += 1
            c = cases[i]
            print(f"MISS {c.form} gold={c.gold!r} expected={c.expected} raw={raw[i]} stage={stage[i]}\n"
                  f"     {c.completion[-120:]!r}")


if __name__ == "__main__":
    main()
