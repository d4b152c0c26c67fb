"""Planning figures of the gated design (PREREGISTRATION_GATED.md): its allocation and power, before any run.

The planning spreads are the first design's (learnable runs' sd 0.045 over 13 runs; a whole-pool arm's 0.08, the
first design's random arm measured 0.076 over 8): the gate may change them, which is why the table gives a
pessimistic row (sds x 1.29, the one-sided 80 % upper bound of an sd from about 10 runs) and why the analysis
reports the power achieved at the spreads the runs show.

- the primary (learnable > random, one-sided alpha 0.05): Welch's t (20,000 simulations) and the Welch-t
  permutation test itself (``--permutation``: 1,000 simulations of 999 shuffles, slow);
- the equivalence reading (the one-sided 95 % upper bound below +0.05) at a true 0 and +0.02;
- the chance that neither is decided, at a true +0.025 (the difference least favourable to both).

    .venv/bin/python experiments/band_value/gated_power.py [--permutation]
"""

from __future__ import annotations

import argparse

import gated_analysis as ga
import numpy as np
from prereg_analysis import welch_permutation_p

SD = {"learnable": 0.045, "random": 0.08}
PESSIMISTIC = 1.29


def permutation_power(sd_a: float, sd_b: float, n_a: int, n_b: int, *, effect: float, sims: int = 1000,
                      seed: int = ga.SEED) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for i in range(sims):
        a = effect + rng.normal(0, sd_a, n_a)
        b = rng.normal(0, sd_b, n_b)
        hits += welch_permutation_p(a, b, resamples=999, seed=seed + i) < ga.ALPHA
    return hits / sims


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--permutation", action="store_true", help="also the permutation test's power (slow)")
    args = ap.parse_args()
    import yaml

    runs = yaml.safe_load((ga.HERE / "gated" / "design.yaml").read_text(encoding="utf-8"))["runs"]
    n_a, n_b = runs["learnable"], runs["random"]
    print(f"runs learnable / random: {n_a} / {n_b}")
    print("| spreads | P(primary) at 0 | at +0.05 | P(equivalence) at 0 | at +0.02 | P(neither) at +0.025 |"
          + (" permutation at +0.05 |" if args.permutation else ""))
    for name, k in (("planning (0.045, 0.08)", 1.0), ("pessimistic (x 1.29)", PESSIMISTIC)):
        sa, sb = SD["learnable"] * k, SD["random"] * k
        row = [ga.simulated(sa, sb, n_a, n_b, effect=0.0, what="primary"),
               ga.simulated(sa, sb, n_a, n_b, effect=ga.MARGIN, what="primary"),
               ga.simulated(sa, sb, n_a, n_b, effect=0.0, what="equivalence"),
               ga.simulated(sa, sb, n_a, n_b, effect=0.02, what="equivalence"),
               ga.simulated(sa, sb, n_a, n_b, effect=ga.MARGIN / 2, what="neither")]
        if args.permutation:
            row.append(permutation_power(sa, sb, n_a, n_b, effect=ga.MARGIN))
        print(f"| {name} | " + " | ".join(f"{x:.3f}" for x in row) + " |")


if __name__ == "__main__":
    main()
