"""Band drift between two policy snapshots (a checkpoint and the next) on the same problems.

Pure core: a difficulty table in, per-problem drift rows and the band transition matrix out.
A change is *credible* when the posterior probability that the pass rate rose (or fell) is at
least 0.95, with each policy's Jeffreys posterior Beta(c + 1/2, n - c + 1/2), independent::

    P(rose) = P(theta_to > theta_from) = integral over u in (0, 1) of 1 - F_to(Q_from(u)) du

(Q the quantile function, F the CDF; a 400-point midpoint rule on a bounded monotone integrand,
cached per distinct pair of counts). One row::

    problem_id prb_…, band smollm2-3shot too_hard (2/32) -> terse learnable (9/32), p_rose 0.99, change rose

The ``drift`` catalog view (pipeline/views/drift.sql) holds the same rows for every ordered pair of
policies, with the 95 % intervals' non-overlap standing in for the posterior probability (SQL only).
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.bands import BANDS
from pipeline.pass_rate_stats import beta_cdf, beta_ppf

CREDIBLE = 0.95
GRID = 400

DRIFT_SCHEMA = pa.schema([
    ("problem_id", pa.string()), ("policy_from", pa.string()), ("policy_to", pa.string()),
    ("n_from", pa.int64()), ("n_correct_from", pa.int64()), ("pass_rate_from", pa.float64()),
    ("ci_low_from", pa.float64()), ("ci_high_from", pa.float64()), ("band_from", pa.string()),
    ("n_to", pa.int64()), ("n_correct_to", pa.int64()), ("pass_rate_to", pa.float64()),
    ("ci_low_to", pa.float64()), ("ci_high_to", pa.float64()), ("band_to", pa.string()),
    ("p_rose", pa.float64()), ("change", pa.string()),
])


@lru_cache(maxsize=4096)
def _quantiles(c: int, n: int) -> tuple[float, ...]:
    a, b = c + 0.5, n - c + 0.5
    return tuple(beta_ppf((i + 0.5) / GRID, a, b) for i in range(GRID))


@lru_cache(maxsize=100_000)
def p_rose(c_from: int, n_from: int, c_to: int, n_to: int) -> float:
    """P(theta_to > theta_from) under independent Jeffreys posteriors."""
    a, b = c_to + 0.5, n_to - c_to + 0.5
    return sum(1.0 - beta_cdf(x, a, b) for x in _quantiles(c_from, n_from)) / GRID


def change(p: float) -> str:
    return "rose" if p >= CREDIBLE else "fell" if p <= 1 - CREDIBLE else "none"


def drift(difficulty: pa.Table, *, policy_from: str, policy_to: str) -> pa.Table:
    """One row per problem measured by both policies (problem_id order)."""
    def rows(pol: str) -> dict[str, dict]:
        mine = difficulty.filter(pc.equal(difficulty.column("policy_id"), pol))
        cols = ["problem_id", "n", "n_correct", "pass_rate", "ci_low", "ci_high", "band"]
        return {r["problem_id"]: r for r in mine.select(cols).to_pylist()}

    a, b = rows(policy_from), rows(policy_to)
    out: dict[str, list] = {f.name: [] for f in DRIFT_SCHEMA}
    for pid in sorted(a.keys() & b.keys()):
        ra, rb = a[pid], b[pid]
        p = p_rose(ra["n_correct"], ra["n"], rb["n_correct"], rb["n"])
        values = {"problem_id": pid, "policy_from": policy_from, "policy_to": policy_to, "p_rose": p, "change": change(p)}
        for side, r in (("from", ra), ("to", rb)):
            values.update({f"n_{side}": r["n"], f"n_correct_{side}": r["n_correct"], f"pass_rate_{side}": r["pass_rate"],
                           f"ci_low_{side}": r["ci_low"], f"ci_high_{side}": r["ci_high"], f"band_{side}": r["band"]})
        for k, v in values.items():
            out[k].append(v)
    return pa.table(out, schema=DRIFT_SCHEMA)


def transitions(rows: pa.Table) -> dict[str, dict[str, int]]:
    """band_from -> band_to -> problems (every band present, zeros included)."""
    matrix = {f: dict.fromkeys(BANDS, 0) for f in BANDS}
    for f, t in zip(rows.column("band_from").to_pylist(), rows.column("band_to").to_pylist(), strict=True):
        matrix[f][t] += 1
    return matrix


def summary(rows: pa.Table) -> dict:
    """The counts DVC metrics carry: problems, band changes, credible rises and falls, the matrix."""
    ch = rows.column("change").to_pylist()
    moved = sum(f != t for f, t in zip(rows.column("band_from").to_pylist(), rows.column("band_to").to_pylist(),
                                         strict=True))
    return {"problems": rows.num_rows, "band_changed": moved, "credible_rose": ch.count("rose"),
            "credible_fell": ch.count("fell"), "transitions": transitions(rows)}


def render_matrix(matrix: dict[str, dict[str, int]], *, label_from: str, label_to: str) -> str:
    """The transition matrix as text (rows: from, columns: to)."""
    width = max(len(b) for b in BANDS) + 2
    lines = [f"{label_from} (rows) -> {label_to} (columns)", " " * width + "".join(f"{b:>{width}}" for b in BANDS)]
    lines += [f"{f:<{width}}" + "".join(f"{matrix[f][t]:>{width}}" for t in BANDS) for f in BANDS]
    return "\n".join(lines)


def matrix_png(matrix: dict[str, dict[str, int]], *, label_from: str, label_to: str) -> bytes:
    """The transition matrix as a PNG heat map (matplotlib, Agg)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [[matrix[f][t] for t in BANDS] for f in BANDS]
    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=100)
    im = ax.imshow(data, cmap="Blues")
    ax.set_xticks(range(len(BANDS)), BANDS, rotation=30)
    ax.set_yticks(range(len(BANDS)), BANDS)
    ax.set_xlabel(f"band under {label_to}")
    ax.set_ylabel(f"band under {label_from}")
    top = max(max(r) for r in data) or 1
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", color="white" if v > top / 2 else "black")
    fig.colorbar(im, ax=ax, label="problems")
    ax.set_title("band transitions")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


__all__ = ["CREDIBLE", "DRIFT_SCHEMA", "GRID", "change", "drift", "matrix_png", "p_rose", "render_matrix", "summary",
           "transitions"]
