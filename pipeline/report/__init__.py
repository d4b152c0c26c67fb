"""Report stage: the tables in (through the catalog's views), a static site (paths.report) out.

``index.html`` opens from the file system with no server and no network: the overview (bands, pass rates with
interval widths, band confidence, flags with their measured precision, the source's difficulty against ours,
suspicious items, reformulation, drift) is plotly charts and tables inline, plotly.js a local file beside it;
the item browser loads its index and item files (scripts, not JSON: ``file://`` pages may not fetch) as needed.
Its size stays bounded: the overview is aggregates and capped lists, each item file holds ``items_per_file``
items with at most ``max_rollouts_per_item`` rollouts per policy. See docs/report.md.
"""

from __future__ import annotations

from pipeline.report.stage import ReportResult, build, run

__all__ = ["ReportResult", "build", "run"]
