"""The reformulation report: the ``reformulation_report`` view, as DVC metrics.

The view (``pipeline/views/reformulation_report.sql``) sees both table sets: parents'
difficulty in the main set, children's in the reformulated set, joined on the same
policy_id. This module runs it and writes ``<paths.metrics>/reformulation_report.json``::

    {"fobar": {"parents_tried": 40, "reformulations": 31, "rejected": 9,
               "reject_reasons": {"single_number": 9},
               "policies": {"pol_…": {"parents_with_learnable_child": 7, "mean_pass_rate_shift": 0.21, …}}}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.catalog import query
from pipeline.config import Params
from pipeline.io import write_json

VIEW = "reformulation_report"
PER_METHOD = ("parents_tried", "reformulations", "rejected")
PER_POLICY = ("children_measured", "parents_with_learnable_child", "children_learnable", "children_too_easy",
              "children_still_hard", "mean_parent_pass_rate", "mean_child_pass_rate", "mean_pass_rate_shift")


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


def write_report(params: Params, *, root: Path = Path(".")) -> tuple[Path, dict[str, Any]]:
    data = report(params, root=root)
    path = write_json(Path(root) / params.paths.metrics / f"{VIEW}.json", data)
    return path, data
