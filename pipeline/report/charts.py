"""The report's charts: plotly figures built from the view rows of :class:`~pipeline.report.queries.Summary`.

Each figure becomes a ``<div class="chart">`` holding its JSON, drawn by report.js with the local ``plotly.min.js``
once the page is laid out. Every chart's data is already aggregated (bins, counts,
at most :data:`~pipeline.report.queries.SCATTER_POINTS` points), so its size does not grow with the job.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipeline.report.queries import BINS, Summary

LAYOUT = {"template": "plotly_white", "height": 340, "autosize": True, "margin": {"l": 60, "r": 30, "t": 50, "b": 50},
          "legend": {"orientation": "h", "y": -0.2}}


def _names(s: Summary) -> dict[str, str]:
    return {p["policy_id"]: p["name"] or p["policy_id"] for p in s.policies}


def bar_label(s: Summary, row: dict) -> str:
    """A band_counts row's bar: the policy's name, and the set when it is the reformulated one."""
    name = _names(s).get(row["policy_id"], row["policy_id"])
    return name if row["set"] == "main" else f"{name} (reformulated)"


def band_counts(s: Summary) -> go.Figure:
    fig = go.Figure()
    for band in s.bands:
        rows = [r for r in s.band_counts if r["band"] == band]
        fig.add_bar(name=band, x=[bar_label(s, r) for r in rows], y=[r["problems"] for r in rows],
                    marker_color=s.colours[band])
    return fig.update_layout(LAYOUT, barmode="stack", title="Problems per band", yaxis_title="problems")


def band_confidence(s: Summary) -> go.Figure:
    fig = go.Figure()
    for band in s.bands:
        rows = [r for r in s.band_counts if r["band"] == band]
        fig.add_bar(name=band, x=[bar_label(s, r) for r in rows], y=[r["mean_band_confidence"] for r in rows],
                    marker_color=s.colours[band])
    return fig.update_layout(LAYOUT, barmode="group", title="Mean band confidence",
                             yaxis={"title": "band confidence", "range": [0, 1]})


def pass_rates(s: Summary, policy_id: str) -> go.Figure:
    """The pass-rate histogram stacked by band, with the mean 95 % interval width per bin on a second axis."""
    rows = [r for r in s.histogram if r["policy_id"] == policy_id]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    width = 1 / BINS
    for band in s.bands:
        b = [r for r in rows if r["band"] == band]
        if b:
            fig.add_bar(name=band, x=[r["bin"] + width / 2 for r in b], y=[r["problems"] for r in b], width=width,
                        marker_color=s.colours[band], secondary_y=False)
    widths: dict[float, tuple[float, int]] = {}
    for r in rows:  # the bin's mean width over its bands, weighted by problems
        w, n = widths.get(r["bin"], (0.0, 0))
        widths[r["bin"]] = (w + r["mean_interval_width"] * r["problems"], n + r["problems"])
    xs = sorted(widths)
    fig.add_scatter(name="mean interval width", x=[x + width / 2 for x in xs], y=[widths[x][0] / widths[x][1] for x in xs],
                    mode="lines+markers", line={"color": "#333"}, secondary_y=True)
    fig.update_layout(LAYOUT, barmode="stack", title=f"Pass rates: {_names(s).get(policy_id, policy_id)}",
                      xaxis={"title": "pass rate", "range": [0, 1]})
    fig.update_yaxes(title_text="problems", secondary_y=False)
    fig.update_yaxes(title_text="95 % interval width", range=[0, 1], secondary_y=True)
    return fig


def flags_by_band(s: Summary, policy_id: str) -> go.Figure:
    rows = [r for r in s.flags_by_band if r["policy_id"] == policy_id]
    flags = list(dict.fromkeys(r["flag"] for r in rows))
    fig = go.Figure()
    for band in s.bands:
        b = {r["flag"]: r["rate"] for r in rows if r["band"] == band}
        if b:
            fig.add_bar(name=band, x=flags, y=[b.get(f, 0) for f in flags], marker_color=s.colours[band])
    return fig.update_layout(LAYOUT, barmode="group", yaxis_title="share of counted rollouts",
                             title=f"Flags per band: {_names(s).get(policy_id, policy_id)}")


def source_difficulty(s: Summary) -> go.Figure:
    fig = go.Figure()
    for (source, measure), pts in _groups(s.source_points, ("source", "measure")).items():
        fig.add_scatter(name=f"{source} ({measure})", x=[p["source_difficulty"] for p in pts],
                        y=[p["pass_rate"] for p in pts], mode="markers", text=[p["problem_id"] for p in pts],
                        marker={"size": 6, "opacity": 0.6})
    return fig.update_layout(LAYOUT, title="The source's difficulty against our pass rate",
                             xaxis_title="source difficulty (its own measure)", yaxis={"title": "pass rate", "range": [0, 1]})


def reformulation_shift(s: Summary) -> go.Figure:
    rows = [r for r in s.reformulation if r["policy_id"] is not None and r["mean_pass_rate_shift"] is not None]
    fig = go.Figure()
    for policy, pts in _groups(rows, ("policy",)).items():
        fig.add_bar(name=policy[0] or "?", x=[r["method"] for r in pts], y=[r["mean_pass_rate_shift"] for r in pts],
                    error_y={"type": "data", "symmetric": False,
                             "array": [(r["shift_ci_high"] - r["mean_pass_rate_shift"]) if r["shift_ci_high"] is not None
                                       else 0 for r in pts],
                             "arrayminus": [(r["mean_pass_rate_shift"] - r["shift_ci_low"]) if r["shift_ci_low"] is not None
                                            else 0 for r in pts]})
    return fig.update_layout(LAYOUT, barmode="group", title="Mean pass-rate shift, child minus parent (95 % interval)",
                             yaxis_title="pass-rate shift")


def drift_matrix(s: Summary, pair: tuple[str, str]) -> go.Figure:
    names = _names(s)
    counts = {(r["band_from"], r["band_to"]): r["problems"] for r in s.drift if (r["policy_from"], r["policy_to"]) == pair}
    z = [[counts.get((a, b), 0) for b in s.bands] for a in s.bands]
    fig = go.Figure(go.Heatmap(z=z, x=s.bands, y=s.bands, colorscale="Blues", text=z, texttemplate="%{text}",
                               hovertemplate="from %{y} to %{x}: %{z}<extra></extra>"))
    a, b = (names.get(p, p) for p in pair)
    return fig.update_layout(LAYOUT, title=f"Band transitions: {a} → {b}", xaxis_title=f"band under {b}",
                             yaxis={"title": f"band under {a}", "autorange": "reversed"})


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def to_div(fig: go.Figure, div_id: str) -> str:
    """The figure as an empty div and its JSON (no plotly.js: the page loads it once). report.js draws every chart
    once the page is laid out, so each takes its box's width (drawn while the page still loads, the first chart
    of a row took the whole row), and redraws on resize (``responsive``); without JavaScript the box says so."""
    spec = fig.to_json().replace("</", "<\\/")
    return (f'<div id="{div_id}" class="plot"></div>'
            f'<script type="application/json" class="figure" data-for="{div_id}">{spec}</script>'
            '<noscript><p class="empty">This chart needs JavaScript; the table beside it holds its numbers.</p></noscript>')
