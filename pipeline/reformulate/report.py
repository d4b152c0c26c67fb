"""The reformulation report: the ``reformulation_report`` view, as DVC metrics.

The view (``pipeline/views/reformulation_report.sql``) sees both table sets: parents'
difficulty in the main set, children's in the reformulated set, joined on the same
policy_id. This module runs it and writes ``<paths.metrics>/reformulation_report.json``::

    {"hint_prefix": {"parents_tried": 53, "children_kept": 20, "rejected": 33,
                     "reject_reasons": {"hint_leaks_answer": 12, "no_rung_in_band": 21},
                     "policies": {"pol_…": {"parents_with_learnable_child": 12, "mean_pass_rate_shift": 0.31,
                                            "shift_ci_low": 0.25, "shift_ci_high": 0.37,
                                            "reward_density_before": 0.17, "reward_density_after": 0.85, …}}},
     "(any)": {…}}

plus ``reformulation_shift.png`` beside it: parent pass rate (x) against child pass rate (y),
one panel per method, the learnable band shaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.annotate.plots import save_png
from pipeline.catalog import query
from pipeline.config import Params
from pipeline.io import write_metrics
from pipeline.run_metrics import RunStats

VIEW = "reformulation_report"
PER_METHOD = ("parents_tried", "children_kept", "rejected")
PER_POLICY = ("children_measured", "parents_with_learnable_child", "share_parents_with_learnable_child",
              "children_learnable", "children_too_easy", "children_still_hard", "mean_parent_pass_rate",
              "mean_child_pass_rate", "mean_pass_rate_shift", "shift_ci_low", "shift_ci_high",
              "reward_density_before", "reward_density_after")
PLOT = "reformulation_shift.png"
PAIRS = """
SELECT c.method, cd.policy_id, pd.pass_rate AS parent_pass_rate, cd.pass_rate AS child_pass_rate
FROM problems c JOIN difficulty cd ON cd.problem_id = c.problem_id
JOIN difficulty pd ON pd.problem_id = c.parent_id AND pd.policy_id = cd.policy_id
WHERE c.parent_id IS NOT NULL ORDER BY c.method, c.problem_id
"""


def _num(v: Any) -> Any:
    return round(v, 4) if isinstance(v, float) else v


def report(params: Params, *, root: Path = Path(".")) -> dict[str, Any]:
    """The report as nested dicts: method -> counts, reject reasons, and per policy the re-measurement."""
    df = query(params, f"SELECT * FROM {VIEW}", root=root)
    out: dict[str, Any] = {}
    for row in df.iter_rows(named=True):
        m = out.setdefault(row["method"], {k: row[k] for k in PER_METHOD})
        reasons = row["reject_reasons"] or {}
        if isinstance(reasons, list):  # polars renders a DuckDB MAP as a list of key/value structs
            reasons = {r["key"]: r["value"] for r in reasons}
        m["reject_reasons"] = dict(sorted(reasons.items()))
        policies = m.setdefault("policies", {})
        if row["policy_id"] is not None:
            policies[row["policy_id"]] = {k: _num(row[k]) for k in PER_POLICY}
    return out


def plot(params: Params, *, root: Path = Path(".")) -> Path:
    """Parent vs child pass rate, one panel per method (children re-measured on the parent's policy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = query(params, PAIRS, root=root)
    methods = sorted(set(df["method"].to_list())) or ["(no children measured)"]
    bands = params.annotate.bands
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods), 4), squeeze=False, sharey=True)
    for ax, method in zip(axes[0], methods, strict=True):
        mine = df.filter(df["method"] == method)
        ax.axhspan(bands.learnable_min, bands.learnable_max, color="tab:green", alpha=0.12, label="learnable band")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--", label="no shift")
        ax.scatter(mine["parent_pass_rate"], mine["child_pass_rate"], s=18, alpha=0.6)
        ax.set(title=f"{method} ({mine.height} children)", xlabel="parent pass rate", xlim=(-0.03, 1.03),
               ylim=(-0.03, 1.03))
    axes[0][0].set_ylabel("child pass rate (re-measured)")
    axes[0][0].legend(loc="upper left", fontsize=8)
    path = Path(root) / params.paths.plots / PLOT
    save_png(fig, path)
    return path


def write_report(params: Params, *, root: Path = Path(".")) -> tuple[Path, dict[str, Any]]:
    data = report(params, root=root)
    path = write_metrics(Path(root) / params.paths.metrics / f"{VIEW}.json", RunStats.of(data), root=root)
    plot(params, root=root)
    return path, data
