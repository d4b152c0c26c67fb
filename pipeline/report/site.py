"""The report folder's files: ``index.html`` (the overview, its charts inline), the item browser's data, assets.

::

    index.html        overview tables and charts, the item browser's shell
    plotly.min.js     plotly.js from the installed plotly package (the page needs no network)
    report.js, report.css
    index/NNNNN.js    the browser's index of the measured items, index_rows_per_file each: id, source, bands, flags,
                      suspect gold, question start (loaded at open, shard by shard)
    index/uNNNNN.js   the index of the never-measured items (loaded when the browser asks for them)
    items/NNNNN.js    full records (question, gold, rollouts, children, every policy), items_per_file each
    report.json       passband version, counts, caps and bytes (and passband's proof that it wrote the folder)

Data files are scripts calling ``PB.index(n, rows)`` / ``PB.items(n, records)``, added as ``<script>`` tags when
needed: a page opened from ``file://`` may not ``fetch()`` files beside it in Chromium, but may load scripts.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from plotly.offline import get_plotlyjs

from pipeline import __version__
from pipeline.report import charts
from pipeline.report.queries import Summary

ASSETS = Path(__file__).parent / "assets"
SNIPPET = 160  # characters of the question the index holds (the browser's search text)
REPORT_FILE = "report.json"


@dataclass
class Written:
    items: int = 0
    item_files: int = 0
    index_files: int = 0  # of the measured items
    unmeasured_files: int = 0
    measured: int = 0
    rollouts_shown: int = 0
    files: list[str] = field(default_factory=list)
    file_of: dict[str, int] = field(default_factory=dict)  # the overview's linked items -> their item file


def _js(call: str, n: int, payload) -> str:
    return f"{call}({n}, {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))});\n"


def _write(path: Path, text: str, written: Written, folder: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    written.files.append(path.relative_to(folder).as_posix())


def _index_row(rec: dict, policy_ids: list[str], file_no: int) -> dict:
    bands = {p["policy_id"]: p["band"] for p in rec["policies"]}
    row = {"id": rec["id"], "s": rec["source"], "r": 1 if rec["parent"] else 0, "q": rec["question"][:SNIPPET],
           "b": [bands.get(p) for p in policy_ids], "f": rec["flags"], "k": file_no}
    if any(p["gold_suspect"] for p in rec["policies"]):
        row["g"] = 1
    return row


def write_items(records: Iterable[dict], folder: Path, *, policy_ids: list[str], items_per_file: int,
                index_rows_per_file: int, linked: set[str]) -> Written:
    """Stream ``records`` into ``items/`` and ``index/`` under ``folder``, one file's worth in memory at a time.

    The index is split: the measured items' shards load when the page opens, the never-measured items' (``u``
    shards; most of an ingest that measures a sample) only when the browser asks for them."""
    w = Written()
    items: list[dict] = []
    index: list[dict] = []
    unmeasured: list[dict] = []

    def flush_items() -> None:
        if items:
            _write(folder / "items" / f"{w.item_files:05d}.js", _js("PB.items", w.item_files, items), w, folder)
            w.item_files += 1
            items.clear()

    def flush_index() -> None:
        if index:
            _write(folder / "index" / f"{w.index_files:05d}.js", _js("PB.index", w.index_files, index), w, folder)
            w.index_files += 1
            index.clear()

    def flush_unmeasured() -> None:
        if unmeasured:
            name = f"u{w.unmeasured_files:05d}.js"
            _write(folder / "index" / name, _js("PB.index", w.unmeasured_files, unmeasured), w, folder)
            w.unmeasured_files += 1
            unmeasured.clear()

    for rec in records:
        items.append(rec)
        if rec["policies"]:
            index.append(_index_row(rec, policy_ids, w.item_files))
            w.measured += 1
        else:
            unmeasured.append(_index_row(rec, policy_ids, w.item_files))
        if rec["id"] in linked:
            w.file_of[rec["id"]] = w.item_files
        w.items += 1
        w.rollouts_shown += sum(p["shown"] for p in rec["policies"])
        if len(items) >= items_per_file:
            flush_items()
        if len(index) >= index_rows_per_file:
            flush_index()
        if len(unmeasured) >= index_rows_per_file:
            flush_unmeasured()
    flush_items()
    flush_index()
    flush_unmeasured()
    return w


def linked_ids(s: Summary) -> set[str]:
    """The items the overview's lists link to (their item file is recorded while the items are written)."""
    return {r["problem_id"] for rows in (s.rare_successes, s.unsupported, s.flagged_correct, s.suspect_golds)
            for r in rows}


# --- the overview --------------------------------------------------------------------------------------------


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {x}" for k, x in v.items()) or "–"
    if isinstance(v, list):
        return ", ".join(map(str, v)) or "–"
    return str(v)


def table(rows: list[dict], columns: list[tuple[str, str]], *, view: str, keys: tuple[str, ...] = (),
          links: dict[str, int] | None = None, empty: str = "nothing yet") -> str:
    """An HTML table of view rows: ``columns`` (key, heading); each row carries ``data-<key>`` attributes for
    ``keys`` and each cell ``data-col`` and its raw value in ``data-value`` (what the browser test compares)."""
    if not rows:
        return f'<p class="empty" data-view="{view}">{html.escape(empty)}</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h in columns)
    body = []
    for r in rows:
        attrs = "".join(f' data-{k.replace("_", "-")}="{html.escape(str(r[k]))}"' for k in keys)
        cells = []
        for k, _ in columns:
            v = r[k]
            raw = html.escape(json.dumps(v, default=str))
            text = html.escape(_fmt(v))
            if k == "problem_id" and links is not None and v in links:
                text = f'<a href="#item={html.escape(v)}" data-file="{links[v]}" class="item-link">{text}</a>'
            num = " num" if isinstance(v, int | float) and not isinstance(v, bool) else ""
            cells.append(f'<td class="c{num}" data-col="{html.escape(k)}" data-value="{raw}">{text}</td>')
        body.append(f"<tr{attrs}>{''.join(cells)}</tr>")
    return (f'<div class="scroll"><table data-view="{view}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _interval(r: dict) -> str | None:
    lo, hi = r.get("shift_ci_low"), r.get("shift_ci_high")
    return None if lo is None or hi is None else f"[{lo:.3g}, {hi:.3g}]"


def _rungs(rungs: dict[str, dict], method: str) -> dict:
    """A method's ladder from the reformulate stage's metrics; ``(any)``: summed over the methods."""
    stats = list(rungs.values()) if method == "(any)" else [rungs[method]] if method in rungs else []
    if not stats:
        return {"rungs_measured": None, "kept_per_rung": None}
    kept: dict[str, int] = {}
    for st in stats:
        for rung, n in (st.get("kept_per_rung") or {}).items():
            kept[rung] = kept.get(rung, 0) + n
    return {"rungs_measured": sum(st.get("rungs_measured") or 0 for st in stats), "kept_per_rung": kept}


def _section(sid: str, title: str, body: str, note: str = "") -> str:
    note = f'<p class="note">{note}</p>' if note else ""
    return f'<section id="{sid}"><h2>{html.escape(title)}</h2>{note}{body}</section>'


def _chart(fig, div_id: str) -> str:
    return f'<div class="chart" data-chart="{div_id}">{charts.to_div(fig, div_id)}</div>'


def overview(s: Summary, *, links: dict[str, int], max_rollouts: int) -> str:
    names = {p["policy_id"]: p["name"] for p in s.policies}
    ids = [p["policy_id"] for p in s.policies]
    parts = []
    t = s.totals
    parts.append(_section("overview", "Overview", (
        f'<p class="totals">{t["problems"]} problems, {t["measured"]} measurements (problem × policy), '
        f'{t["rollouts"]} rollouts, {t["flags"]} flags; policies: '
        + ", ".join(f'<b>{html.escape(names[i] or i)}</b> <code>{html.escape(i)}</code>' for i in ids) + "</p>")))
    if s.band_counts:
        bands = (table(s.band_counts, [("policy", "policy"), ("set", "set"), ("band", "band"), ("problems", "problems"),
                                       ("mean_pass_rate", "mean pass rate"),
                                       ("mean_band_confidence", "mean band confidence")],
                       view="band_counts", keys=("policy_id", "set", "band"))
                 + '<div class="row">' + _chart(charts.band_counts(s), "chart-band-counts")
                 + _chart(charts.band_confidence(s), "chart-band-confidence") + "</div>"
                 + "".join(_chart(charts.pass_rates(s, p), f"chart-pass-rate-{n}") for n, p in enumerate(ids)
                           if any(r["policy_id"] == p for r in s.histogram)))
    else:
        bands = table([], [], view="band_counts", empty="no difficulty rows yet: run passband annotate")
    parts.append(_section("bands", "Bands per policy", bands,
                          "band_counts view, the two table sets apart: <b>main</b> is the ingested problems (the "
                          "published default config and <code>passband summary</code> count these), <b>reformulated</b> "
                          "the reformulate stage's children (the reformulated config); the histograms and the item "
                          "browser hold both. Pass-rate histogram in 20 bins, stacked by band, with the mean width of "
                          "the 95 % interval of the bin's pass rates (right axis)."))
    flags = (table(s.flag_quality, [("flag", "flag"), ("kind", "kind"), ("flagged", "flagged rollouts"),
                                    ("rate", "rate"), ("precision (labelled)", "precision (labelled)"),
                                    ("recall (labelled)", "recall (labelled)")], view="flag_quality", keys=("flag",))
             + "".join(_chart(charts.flags_by_band(s, p), f"chart-flags-{n}") for n, p in enumerate(ids)
                       if any(r["policy_id"] == p for r in s.flags_by_band))
             + "<details><summary>flags per band, every policy (flags_by_band view)</summary>"
             + table([r for r in s.flags_by_band if r["flagged"]],
                     [("policy", "policy"), ("band", "band"), ("flag", "flag"), ("kind", "kind"), ("flagged", "flagged"),
                      ("rollouts", "counted rollouts"), ("rate", "rate"), ("precision (labelled)", "precision")],
                     view="flags_by_band", keys=("policy_id", "band", "flag"), empty="no flag fired")
             + "</details>")
    parts.append(_section("flags", "Flags", flags, "flag_quality view (every rollout) and flags_by_band (the counted "
                                                   "rollouts per band); precision and recall were measured on labelled "
                                                   "completions (docs/flags.md)."))
    if s.source_agreement:
        src = (table(s.source_agreement, [("policy", "policy"), ("source", "source"), ("measure", "measure"),
                                          ("problems", "problems"), ("spearman", "Spearman ρ"),
                                          ("mean_source_difficulty", "mean source difficulty"),
                                          ("mean_pass_rate", "mean pass rate")], view="source_difficulty_agreement")
               + _chart(charts.source_difficulty(s), "chart-source-difficulty"))
    else:
        src = ('<p class="empty" data-view="source_difficulty_agreement">'
               "no source of these problems has a difficulty of its own</p>")
    parts.append(_section("source", "The source's difficulty against ours", src,
                          "source_difficulty_agreement view; the scatter shows a stable sample of at most 2000 points."))
    sus = ("<h3>Rare successes</h3>" + table(
        s.rare_successes, [("problem_id", "problem"), ("policy", "policy"), ("sample_idx", "sample"),
                           ("advantage", "advantage"), ("n_correct", "correct"), ("n", "n"), ("question", "question"),
                           ("gold", "gold"), ("completion", "completion")], view="rare_successes", links=links,
        empty="no rare success")
        + "<h3>Unsupported answers</h3>" + table(
        s.unsupported, [("problem_id", "problem"), ("policy", "policy"), ("sample_idx", "sample"), ("status", "verdict"),
                        ("extracted", "extracted"), ("gold", "gold"), ("evidence", "evidence")],
        view="unsupported_answers", links=links, empty="no unsupported_answer flag")
        + "<h3>Correct rollouts carrying a shortcut flag</h3>" + table(
        s.flagged_correct, [("problem_id", "problem"), ("policy", "policy"), ("band", "band"), ("n_correct", "correct"),
                            ("flagged_share", "flagged share"), ("flags_seen", "flags")],
        view="flagged_correct", links=links, empty="no correct rollout carries a shortcut flag"))
    golds = (f'<p class="totals" data-suspect-golds="{t["suspect_golds"]}">{t["suspect_golds"]} of {t["scored"]} '
             f"scored problems with a suspect gold; the score expects {t['expected_among_suspect']:.2f} wrong keys "
             f"among them and {t['expected_wrong_keys']:.2f} in all. <code>passband golds --out queue.csv</code> "
             "writes them as a review queue.</p>" + table(
                 s.suspect_golds, [("problem_id", "problem"), ("policy", "policy"), ("gold_suspicion", "gold suspicion"),
                                   ("gold", "gold"), ("modal_answer", "the rollouts' answer"),
                                   ("modal_share", "its share"), ("n", "n"), ("n_correct", "correct"),
                                   ("suspect_policies", "policies agreeing"), ("gold_issues", "gold lint"),
                                   ("source", "source"), ("question", "question")],
                 view="suspect_golds", links=links,
                 empty="no suspect gold: no policy's rollouts agree on one answer that is not the gold"))
    parts.append(_section("golds", "Suspect answer keys", golds,
                          "suspect_golds view: gold_suspicion, the probability that the key is wrong given every "
                          "policy's rollouts, at or above annotate.gold_suspicion_threshold and more rollouts on one "
                          "wrong answer than on the gold; with the gold lint's findings; its first rows. "
                          "A problem id opens the item with its answer distribution; the browser's flag filter has "
                          "<i>suspect gold</i>. Review before training: a wrong key rewards the wrong answer."))
    parts.append(_section("suspicious", "Suspicious items", sus, "rare_successes, flagged_correct views and the "
                                                                 "unsupported_answer flags (correct ones first); "
                                                                 "each list its first rows. A problem id opens the item."))
    if s.reformulation:
        ref = table([{**r, **_rungs(s.rungs, r["method"]), "interval": _interval(r)} for r in s.reformulation],
                    [("method", "method"), ("policy", "policy"), ("parents_tried", "parents tried"),
                     ("rungs_measured", "rungs measured"), ("kept_per_rung", "kept per rung"),
                     ("children_kept", "children kept"), ("rejected", "rejected"),
                     ("children_measured", "children measured"),
                     ("parents_with_learnable_child", "parents with a learnable child"),
                     ("mean_parent_pass_rate", "parent pass rate"), ("mean_child_pass_rate", "child pass rate"),
                     ("mean_pass_rate_shift", "shift"), ("interval", "shift, 95 % interval"),
                     ("reject_reasons", "rejected because")],
                    view="reformulation_report", keys=("method",))
        if any(r["mean_pass_rate_shift"] is not None for r in s.reformulation):
            ref += _chart(charts.reformulation_shift(s), "chart-reformulation")
    else:
        ref = '<p class="empty" data-view="reformulation_report">no reformulation yet: passband reformulate</p>'
    parts.append(_section("reformulation", "Reformulation", ref,
                          "reformulation_report view (docs/reformulation.md); rungs measured and kept per rung from the "
                          "reformulate stage's metrics (every rung the ladder measured on the policy, this run); the "
                          "interval is a normal approximation over the measured children, none with fewer than two."))
    pairs = list(dict.fromkeys((r["policy_from"], r["policy_to"]) for r in s.drift))
    drift = ("".join(_chart(charts.drift_matrix(s, p), f"chart-drift-{n}") for n, p in enumerate(pairs)) if pairs
             else '<p class="empty" data-view="drift">one policy only: no band transitions to show</p>')
    parts.append(_section("drift", "Drift between policies", drift,
                          "drift view: every problem measured by both policies, its band under each."))
    parts.append(_section("items", "Items", (
        '<div id="filters">'
        '<select id="f-policy" aria-label="policy"></select><select id="f-band" aria-label="band"></select>'
        '<select id="f-source" aria-label="source"></select><select id="f-flag" aria-label="flag"></select>'
        '<input id="f-text" type="search" placeholder="search question or id" aria-label="search">'
        '<span id="f-count" role="status"></span></div>'
        '<p id="legend" class="note"></p>'
        '<noscript><p class="empty">The item browser needs JavaScript; the tables above and '
        '<code>passband sql</code> hold every number.</p></noscript>'
        '<div id="browser"><ol id="item-list" aria-label="items"></ol>'
        '<div id="item-view" aria-live="polite"><p class="empty">choose an item</p></div></div>'),
        f"the measured problems of both table sets (the never-measured ones under band <i>not measured</i>); per item "
        f"at most {max_rollouts} rollouts per policy (report.max_rollouts_per_item), the first counted in its pass "
        "rate; thinking is folded. Arrow keys move through the list, Enter opens an item."))
    return "\n".join(parts)


def page(s: Summary, *, links: dict[str, int], meta: dict, max_rollouts: int) -> str:
    meta_json = json.dumps(meta, ensure_ascii=False).replace("</", "<\\/")
    nav = "".join(f'<a href="#{sid}">{t}</a>' for sid, t in (
        ("bands", "Bands"), ("flags", "Flags"), ("source", "Source difficulty"), ("golds", "Suspect golds"),
        ("suspicious", "Suspicious"),
        ("reformulation", "Reformulation"), ("drift", "Drift"), ("items", "Items")))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>passband report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="report.css"><script src="plotly.min.js"></script></head>
<body><header><h1>passband report</h1><nav>{nav}</nav></header><main>
<noscript><p class="noscript">JavaScript is off: the tables show every number; the charts and the item browser need
JavaScript (the page loads nothing from the network).</p></noscript>
{overview(s, links=links, max_rollouts=max_rollouts)}
</main>
<script id="pb-meta" type="application/json">{meta_json}</script>
<script src="report.js"></script></body></html>
"""


def write_site(folder: Path, s: Summary, records: Iterator[dict], *, max_rollouts: int, items_per_file: int,
               index_rows_per_file: int) -> Written:
    """Every file of the report under ``folder`` (a fresh staging folder)."""
    policy_ids = [p["policy_id"] for p in s.policies]
    w = write_items(records, folder, policy_ids=policy_ids, items_per_file=items_per_file,
                    index_rows_per_file=index_rows_per_file, linked=linked_ids(s))
    flags = [r["flag"] for r in s.flag_quality]
    meta = {"policies": [{"id": p["policy_id"], "name": p["name"] or p["policy_id"]} for p in s.policies],
            "bands": s.bands, "colours": s.colours, "flags": flags, "index_files": w.index_files, "items": w.items,
            "measured": w.measured, "unmeasured_files": w.unmeasured_files, "max_rollouts": max_rollouts}
    _write(folder / "index.html", page(s, links=w.file_of, meta=meta, max_rollouts=max_rollouts), w, folder)
    _write(folder / "plotly.min.js", get_plotlyjs(), w, folder)
    for asset in ("report.js", "report.css"):
        _write(folder / asset, (ASSETS / asset).read_text(encoding="utf-8"), w, folder)
    return w


def write_info(folder: Path, w: Written, *, max_rollouts: int) -> dict:
    """``report.json``: what the folder holds, and passband's proof that it wrote it (pipeline/ownership.py)."""
    sizes = {f: (folder / f).stat().st_size for f in w.files}
    info = {"passband_version": __version__, "items": w.items, "item_files": w.item_files,
            "index_files": w.index_files, "rollouts_shown": w.rollouts_shown, "max_rollouts_per_item": max_rollouts,
            "bytes": sum(sizes.values()), "largest_file": max(sizes.items(), key=lambda kv: kv[1], default=(None, 0))}
    (folder / REPORT_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return info
