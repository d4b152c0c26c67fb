"""The pre-registered analysis of the band-value design (PREREGISTRATION.md), and the tests it uses.

Its sha256 is recorded in PREREGISTRATION.md before the first run of the design
(``tests/test_band_value_design.py`` checks that the two agree): an edit to this file after that shows.

Each run of the design trains on its own fresh item draw, so runs are independent and the run is the unit.
A run's figure is its mean held-out pass rate over the items every measured policy has (its change against
the base policy is the same number less the base's mean, so contrasts are unaffected).

- Primary: learnable > hard, the studentized (Welch-t) permutation test, one-sided, alpha 0.05. The plain
  permutation test of the mean difference assumes exchangeable runs, which unequal spreads break (the
  committed runs' sds differ 3.8x, and the design gives the arms unequal runs); permuting Welch's t keeps
  the level asymptotically under unequal variances and sizes (Janssen 1997; Chung and Romano 2013).
  Reported with Welch's 90 % and 95 % intervals of the difference.
- Secondary, Holm over the two: learnable > random, learnable > hard_signal (the hard items with every
  optimizer step on a group with a signal), each the same test, one-sided.
- Nothing else is confirmatory: any other figure is reported as exploratory, outside this script.

    .venv/bin/python experiments/band_value/prereg_analysis.py [--results DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ALPHA = 0.05
RESAMPLES = 100_000
SEED = 20261127
PRIMARY = ("learnable", "hard")
SECONDARY = (("learnable", "random"), ("learnable", "hard_signal"))
BASE = "base"
RUN = re.compile(r"(.+)-d(\d+)-s(\d+)")


# --- the tests ---------------------------------------------------------------------------------------

def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Welch's t of mean(a) - mean(b), its Welch-Satterthwaite df and the difference's standard error."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        raise ValueError(f"both arms have zero spread ({a.tolist()} vs {b.tolist()}): Welch's t is undefined")
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return float((a.mean() - b.mean()) / se), float(df), se


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (the regularized incomplete beta, mpmath)."""
    import mpmath

    tail = 0.5 * float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
    return tail if t >= 0 else 1 - tail


def t_ppf(q: float, df: float) -> float:
    """The q-quantile of Student's t (bisection on :func:`t_sf`)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1 - t_sf(mid, df) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided Welch t-test p-value of mean(a) > mean(b)."""
    t, df, _ = welch(a, b)
    return t_sf(t, df)


def welch_interval(a: Sequence[float], b: Sequence[float], level: float) -> tuple[float, float]:
    """Welch's two-sided ``level`` interval of mean(a) - mean(b)."""
    _, df, se = welch(a, b)
    d = float(np.mean(a) - np.mean(b))
    h = t_ppf(1 - (1 - level) / 2, df) * se
    return d - h, d + h


def welch_permutation_p(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES,
                        seed: int = SEED) -> float:
    """One-sided studentized permutation p-value of mean(a) > mean(b): the share of label shuffles whose
    Welch t reaches the observed one, ``(1 + hits) / (1 + resamples)`` (seeded Monte Carlo)."""
    x = np.asarray([*a, *b], dtype=float)
    na, n = len(a), len(a) + len(b)
    if na < 2 or n - na < 2:
        raise ValueError(f"a Welch-t permutation test needs >= 2 runs an arm, got {na} and {n - na}")
    observed, _, _ = welch(a, b)
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < resamples:  # in blocks: 100,000 x 72 at once would hold 58 MB
        k = min(20_000, resamples - done)
        perm = x[np.argsort(rng.random((k, n)), axis=1)]
        pa, pb = perm[:, :na], perm[:, na:]
        se = np.sqrt(pa.var(axis=1, ddof=1) / na + pb.var(axis=1, ddof=1) / (n - na))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (pa.mean(axis=1) - pb.mean(axis=1)) / se
        hits += int((t >= observed - 1e-12).sum())
        done += k
    return (1 + hits) / (1 + resamples)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        out[i] = running
    return out


def tost(a: Sequence[float], b: Sequence[float], margin: float) -> float:
    """Two one-sided Welch tests of |mean(a) - mean(b)| < margin: the larger p (equivalence shown when below alpha,
    i.e. when the 1 - 2 alpha interval lies inside +-margin)."""
    _, df, se = welch(a, b)
    d = float(np.mean(a) - np.mean(b))
    return max(t_sf((d + margin) / se, df), t_sf((margin - d) / se, df))


# --- the analysis ------------------------------------------------------------------------------------

def run_means(results: Path) -> dict[str, dict[str, float]]:
    """arm -> {run name: mean held-out pass rate}, over the items the base and every run measured. Run folders
    are ``results/<arm>-d<run>-s<run>`` (design.py's names: each run its own item draw and GRPO seed);
    ``results/base`` is the base policy."""
    import pyarrow.parquet as pq

    rates: dict[str, dict[str, float]] = {}
    for folder in sorted(p for p in results.iterdir() if (p / "difficulty").is_dir()):
        rows = pq.read_table(folder / "difficulty", columns=["problem_id", "pass_rate"]).to_pylist()
        rates[folder.name] = {r["problem_id"]: r["pass_rate"] for r in rows}
    if BASE not in rates:
        raise SystemExit(f"{results}/base: no base measurement; measure the base policy first")
    common = set.intersection(*(set(r) for r in rates.values()))
    out: dict[str, dict[str, float]] = {}
    for name, r in rates.items():
        m = RUN.fullmatch(name)
        if name != BASE and not m:
            raise SystemExit(f"{results / name}: not a run of the design (<arm>-d<run>-s<run>) nor base")
        arm = BASE if name == BASE else m.group(1)
        out.setdefault(arm, {})[name] = float(np.mean([r[p] for p in sorted(common)]))
    out["_items"] = {"count": float(len(common))}
    return out


def contrast(a: Sequence[float], b: Sequence[float]) -> dict:
    t, df, se = welch(a, b)
    return {"runs": [len(a), len(b)], "diff": float(np.mean(a) - np.mean(b)), "welch_t": t, "df": df, "se": se,
            "p_one_sided": welch_permutation_p(a, b), "welch_p_one_sided": t_sf(t, df),
            "ci90": welch_interval(a, b, 0.90), "ci95": welch_interval(a, b, 0.95)}


def analyse(means: dict[str, dict[str, float]]) -> dict:
    arms = {a: list(v.values()) for a, v in means.items() if a not in (BASE, "_items")}
    base = next(iter(means[BASE].values()))
    out = {"items": int(means["_items"]["count"]), "base": base,
           "arms": {a: {"runs": len(v), "mean_change": float(np.mean(v)) - base,
                        "sd": float(np.std(v, ddof=1)) if len(v) > 1 else None} for a, v in arms.items()}}
    better, worse = PRIMARY
    prim = contrast(arms[better], arms[worse])
    prim["decided"] = prim["p_one_sided"] < ALPHA
    out["primary"] = {"contrast": f"{better} > {worse}", **prim}
    sec = [(b, w, contrast(arms[b], arms[w])) for b, w in SECONDARY if b in arms and w in arms]
    for (b, w, c), ph in zip(sec, holm([c["p_one_sided"] for *_x, c in sec]), strict=True):
        out.setdefault("secondary", []).append({"contrast": f"{b} > {w}", **c, "p_holm": ph, "decided": ph < ALPHA})
    return out


def markdown(res: dict) -> str:
    p = res["primary"]
    lines = [f"Base policy: {res['base']:.3f} on {res['items']} held-out items.", "",
             "| arm | runs | mean change vs base | sd over runs |", "|---|---|---|---|"]
    lines += [f"| {a} | {x['runs']} | {x['mean_change']:+.3f} | {'' if x['sd'] is None else format(x['sd'], '.3f')} |"
              for a, x in res["arms"].items()]
    lines += ["", "| contrast (confirmatory) | runs | difference | Welch 95 % CI | p (Welch-t permutation, one-sided) "
              "| p, Holm | decided at 0.05 |", "|---|---|---|---|---|---|---|"]
    for c, holm_p in [(p, None), *((s, s["p_holm"]) for s in res.get("secondary", []))]:
        lines.append(f"| {c['contrast']} | {c['runs'][0]} / {c['runs'][1]} | {c['diff']:+.3f} | "
                     f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] | {c['p_one_sided']:.4f} | "
                     f"{'primary' if holm_p is None else f'{holm_p:.4f}'} | {'yes' if c['decided'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=HERE / "prereg" / "results", help="default: %(default)s")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.results.is_dir():
        raise SystemExit(f"{args.results}: no results yet; the design's runs write them (PREREGISTRATION.md)")
    res = analyse(run_means(args.results))
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
