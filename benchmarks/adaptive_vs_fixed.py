"""Adaptive sampling budget vs fixed k: rollouts used and band quality, in one run.

    python benchmarks/adaptive_vs_fixed.py                     # (a) simulation only
    python benchmarks/adaptive_vs_fixed.py --real benchmarks/out/adaptive/params.yaml \\
        --prior-policy smollm2-135m-3shot --policy smollm2-135m-3shot-terse

(a) simulation, no engine: true pass rates drawn (seeded) from U-shaped, J-shaped and uniform Beta
    mixtures, Bernoulli samples in sample_idx order; fixed k = 8, 16, 32 and the adaptive rule
    (max_k 32) scored against the true band (4 bands) and the true side (below / learnable / above).
(b) real replay: a fixed k=32 run's verdicts (params file of --real, the run's data dir) replayed
    through the rule: rollouts and tokens used, band agreement with k=32.
(prior) the second policy's k=32 verdicts replayed with and without the first policy's counts as
    a prior: rollouts saved and band agreement with its own k=32.
(c) end to end: `--e2e FIXED_PARAMS ADAPTIVE_PARAMS` reads both runs' rollout metrics and difficulty
    tables (written by the stages on the engine) and checks the adaptive bands against (b).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.bands import SIDES, assign_band
from pipeline.config import AdaptiveBudget, BandsConfig, load_params
from pipeline.io import read_table
from pipeline.rollout.budget import StoppingRule, prior_counts
from pipeline.verify.core import verifier_id

BANDS = BandsConfig()
MIXTURES = {
    "U-shaped Beta(0.4,0.4)": [(1.0, 0.4, 0.4)],
    "J-shaped 0.7 Beta(0.3,3) + 0.3 Beta(3,0.5)": [(0.7, 0.3, 3.0), (0.3, 3.0, 0.5)],
    "uniform Beta(1,1)": [(1.0, 1.0, 1.0)],
}


def true_band(theta: float) -> str:
    b = BANDS
    if theta < b.unsolved_max:
        return "unsolved"
    if theta < b.learnable_min:
        return "too_hard"
    return "learnable" if theta <= b.learnable_max else "too_easy"


def draw(rng: random.Random, mixture: list[tuple[float, float, float]]) -> float:
    u, acc = rng.random(), 0.0
    for w, a, b in mixture:
        acc += w
        if u <= acc:
            return rng.betavariate(a, b)
    return rng.betavariate(*mixture[-1][1:])


def simulate(*, problems: int, seed: int, rules: dict[str, StoppingRule], max_k: int = 32) -> None:
    print(f"(a) simulation: {problems} problems per mixture, seed {seed}, max_k {max_k}; adaptive (min_k/step/confidence)")
    print(f"  {'mixture':44} {'budget':16} {'rollouts':>9} {'x k=32':>7} {'band acc':>9} {'side acc':>9}")
    for name, mix in MIXTURES.items():
        rng = random.Random(f"{seed}:{name}")
        rows = []
        for _ in range(problems):
            theta = draw(rng, mix)
            rows.append((theta, [rng.random() < theta for _ in range(max_k)]))
        res = {}
        for k in (8, 16, 32):
            bands = [assign_band(sum(o[:k]), k, BANDS) for _, o in rows]
            res[f"fixed k={k}"] = (k * problems, bands)
        for label, rule in rules.items():
            used, bands = 0, []
            for _, o in rows:
                n, _ = rule.replay(o)
                used += n
                bands.append(assign_band(sum(o[:n]), n, BANDS))
            res[label] = (used, bands)
        truth = [true_band(t) for t, _ in rows]
        for label, (n, bands) in res.items():
            acc = sum(b == t for b, t in zip(bands, truth, strict=True)) / problems
            side = sum(SIDES[b] == SIDES[t] for b, t in zip(bands, truth, strict=True)) / problems
            print(f"  {name:44} {label:16} {n:9d} {n / (32 * problems):7.3f} {acc:9.2%} {side:9.2%}")


def load_outcomes(params_path: Path) -> tuple[dict[str, str], dict[str, dict[str, list[tuple[bool, int]]]]]:
    """(policy name -> policy_id, policy_id -> problem_id -> [(correct, n_tokens)] in sample_idx order) of a run."""
    params = load_params(params_path)
    root = params_path.resolve().parent
    rollouts = read_table(root / params.paths.rollouts, name="rollouts",
                          columns=["problem_id", "policy_id", "sample_idx", "n_tokens"])
    verdicts = read_table(root / params.paths.verdicts, name="verdicts",
                          columns=["problem_id", "policy_id", "sample_idx", "verifier_id", "status"])
    vid = verifier_id(params.verify)
    status = {(r["problem_id"], r["policy_id"], r["sample_idx"]): r["status"]
              for r in verdicts.to_pylist() if r["verifier_id"] == vid}
    out: dict[str, dict[str, list]] = {}
    for r in sorted(rollouts.to_pylist(), key=lambda r: (r["policy_id"], r["problem_id"], r["sample_idx"])):
        seq = out.setdefault(r["policy_id"], {}).setdefault(r["problem_id"], [])
        if r["sample_idx"] == len(seq):
            seq.append((status[(r["problem_id"], r["policy_id"], r["sample_idx"])] == "correct", r["n_tokens"]))
    names = {row["name"]: row["policy_id"] for row in read_table(root / params.paths.policies, name="policies").to_pylist()}
    return names, out


def replay_policy(seqs: dict[str, list[tuple[bool, int]]], rule: StoppingRule, *, k: int = 32,
                  prior: dict[str, tuple[int, int]] | None = None, weight: float = 0.0) -> dict:
    """Fixed k bands vs the adaptive replay on one policy's complete k-sample sequences."""
    used = tokens = tokens_k = agree = side_agree = 0
    reasons: dict[str, int] = {}
    counts: dict[str, tuple[int, int]] = {}
    bands: dict[str, str] = {}
    full = {pid: s for pid, s in seqs.items() if len(s) >= k}
    for pid, seq in full.items():
        outcomes = [c for c, _ in seq[:k]]
        pr = prior_counts(*prior[pid], weight) if prior and pid in prior else (0.0, 0.0)
        n, reason = rule.replay(outcomes, pr)
        reasons[reason] = reasons.get(reason, 0) + 1
        c = sum(outcomes[:n])
        counts[pid] = (c, n)
        band, ref = assign_band(c, n, BANDS), assign_band(sum(outcomes), k, BANDS)
        bands[pid] = band
        used += n
        tokens += sum(t for _, t in seq[:n])
        tokens_k += sum(t for _, t in seq[:k])
        agree += band == ref
        side_agree += SIDES[band] == SIDES[ref]
    m = len(full)
    return {"problems": m, "rollouts": used, "rollouts_k": k * m, "tokens": tokens, "tokens_k": tokens_k,
            "band_agreement": agree / m, "side_agreement": side_agree / m, "stop_reasons": dict(sorted(reasons.items())),
            "counts": counts, "bands": bands}


def _line(label: str, r: dict) -> str:
    return (f"  {label:34} problems {r['problems']}, rollouts {r['rollouts']} / {r['rollouts_k']} "
            f"({r['rollouts'] / r['rollouts_k']:.3f}), tokens {r['tokens']} / {r['tokens_k']} "
            f"({r['tokens'] / r['tokens_k']:.3f}), band agreement with k=32 {r['band_agreement']:.2%}, "
            f"side {r['side_agreement']:.2%}, stops {r['stop_reasons']}")


def real_parts(args: argparse.Namespace, rules: dict[str, StoppingRule]) -> tuple[dict, dict, dict]:
    names, seqs = load_outcomes(args.real)
    label, rule = next(iter(rules.items()))
    print(f"\n(b) real replay: fixed k=32 verdicts of {args.real} through the rule {label} ({rule.budget})")
    results = {}
    for name, pid in names.items():
        if pid not in seqs:
            continue
        results[name] = replay_policy(seqs[pid], rule)
        print(_line(name, results[name]))
        for other, r in list(rules.items())[1:]:
            print(_line(f"  {other}", replay_policy(seqs[pid], r)))
        for k in (8, 16):
            agree = sum(assign_band(sum(c for c, _ in s[:k]), k, BANDS) == assign_band(sum(c for c, _ in s[:32]), 32, BANDS)
                        for s in seqs[pid].values() if len(s) >= 32) / results[name]["problems"]
            print(f"    fixed k={k}: band agreement with k=32 {agree:.2%}")
    if args.policy and args.prior_policy and args.policy in results and args.prior_policy in results:
        prior = {p: c for p, c in results[args.prior_policy]["counts"].items()}
        with_prior = replay_policy(seqs[names[args.policy]], rule, prior=prior, weight=args.weight)
        print(f"\n(prior) {args.policy} with and without the prior {args.prior_policy} (weight {args.weight}):")
        print(_line("without prior", results[args.policy]))
        print(_line("with prior", with_prior))
        saved = 1 - with_prior["rollouts"] / results[args.policy]["rollouts"]
        same = sum(with_prior["bands"][p] == results[args.policy]["bands"][p] for p in with_prior["bands"])
        print(f"  rollouts saved by the prior: {saved:.1%}; bands equal to the no-prior run: "
              f"{same}/{with_prior['problems']}")
    return results, names, seqs


def _runs(folder: Path, label: str) -> dict:
    """Sum of a stage's rollout metrics over its resumed runs (metrics-<label>-<try>.json with its timings beside it,
    timings-<label>-<try>.json: the stage keeps them apart, pipeline.io.write_metrics; both copied by the driver)."""
    tot = {"runs": 0, "samples": 0, "tokens": 0, "seconds": 0.0, "wall_s": 0.0, "engine_startup_s": 0.0}
    for f in sorted(folder.glob(f"metrics-{label}-*.json")):
        m = json.loads(f.read_text())
        timings = f.with_name(f.name.replace("metrics-", "timings-", 1))
        if timings.exists():
            m |= json.loads(timings.read_text())
        tot["runs"] += 1
        for k in ("samples", "tokens", "seconds", "wall_s", "engine_startup_s"):
            tot[k] += m[k]
    return tot


def end_to_end(args: argparse.Namespace, names_a: dict, seqs: dict) -> None:
    """(c): the adaptive run through the stages vs the fixed k=32 run, and its difficulty rows vs the replay (b)
    of the fixed run's verdicts through the adaptive run's own rule (its params' rollout.budget)."""
    fixed, adaptive = _runs(args.real.resolve().parent, "fixedA"), _runs(args.e2e.resolve().parent, "adaptiveA")
    print(f"\n(c) end to end on the engine, {args.e2e_policy} (rollout stage runs, summed over resumed runs):")
    for label, m in (("fixed k=32", fixed), ("adaptive", adaptive)):
        print(f"  {label:11} runs {m['runs']}, samples {m['samples']}, tokens {m['tokens']}, generation "
              f"{m['seconds']:.0f} s, stage wall {m['wall_s']:.0f} s (engine start-up {m['engine_startup_s']:.0f} s)")
    if fixed["tokens"] and adaptive["tokens"]:
        print(f"  adaptive / fixed: samples {adaptive['samples'] / fixed['samples']:.3f}, tokens "
              f"{adaptive['tokens'] / fixed['tokens']:.3f}, generation time {adaptive['seconds'] / fixed['seconds']:.3f}, "
              f"wall {adaptive['wall_s'] / fixed['wall_s']:.3f}")
    params = load_params(args.e2e)
    rule = StoppingRule(params.rollout.budget, params.rollout.k, BANDS)
    replay = replay_policy(seqs[names_a[args.e2e_policy]], rule)
    print(f"  rule of the adaptive run: {rule.budget}")
    root = args.e2e.resolve().parent
    names = {r["name"]: r["policy_id"] for r in read_table(root / params.paths.policies, name="policies").to_pylist()}
    diff = [r for r in read_table(root / params.paths.difficulty, name="difficulty").to_pylist()
            if r["policy_id"] == names[args.e2e_policy]]
    same_n = sum((r["n_correct"], r["n"]) == replay["counts"].get(r["problem_id"]) for r in diff)
    same_band = sum(r["band"] == replay["bands"].get(r["problem_id"]) for r in diff)
    print(f"  difficulty rows of the adaptive run: {len(diff)}; (n_correct, n) equal to the replay (b): {same_n}; "
          f"band equal: {same_band}; problems in (b): {replay['problems']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rules", default="predictive:4/2/0.95,posterior:4/4/0.95,predictive:4/4/0.95,posterior:4/2/0.95",
                    help="adaptive settings rule:min_k/step/confidence, comma-separated (rule: predictive or "
                         "posterior); the first is the one (b)'s summary and the prior part use")
    ap.add_argument("--real", type=Path, help="params file of a fixed k=32 run (parts b and prior)")
    ap.add_argument("--policy", help="(prior) the policy measured with and without the prior")
    ap.add_argument("--prior-policy", help="(prior) the policy whose counts are the prior")
    ap.add_argument("--weight", type=float, default=0.5)
    ap.add_argument("--e2e", type=Path, metavar="ADAPTIVE_PARAMS",
                    help="(c) params of the adaptive run through the stages (rollout metrics-*.json beside each params)")
    ap.add_argument("--e2e-policy", default="smollm2-135m-3shot")
    args = ap.parse_args()
    rules = {}
    for spec in args.rules.split(","):
        kind, _, numbers = spec.rpartition(":")
        m, s, c = numbers.split("/")
        budget = AdaptiveBudget(rule=kind or "predictive", min_k=int(m), step=int(s), confidence=float(c))
        rules[f"{budget.rule[:4]} {numbers}"] = StoppingRule(budget, 32, BANDS)
    simulate(problems=args.problems, seed=args.seed, rules=rules)
    if args.real:
        _, names, seqs = real_parts(args, rules)
        if args.e2e:
            end_to_end(args, names, seqs)


if __name__ == "__main__":
    main()
