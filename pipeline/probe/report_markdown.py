"""The probe report as markdown (``report.md`` beside ``report.json``): one section a finding, numbers rounded."""

from __future__ import annotations


def fmt_number(x, nd=3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def span_cells(spans) -> str:
    """Token spans as code in one table cell: a newline shown as ⏎, a pipe as /."""
    return " · ".join("`" + s.replace("|", "/").replace("\n", "⏎") + "`" for s in spans)


def markdown(r: dict) -> str:
    """The report as a markdown section (tables of the probe, drift, enrichment and hard items)."""
    q = r["sae_quality"]
    lines = [f"### Probe report {r['report_id']} (SAE {r['sae_id']})", "",
             "Sizes: " + ", ".join(f"{k} {v['rollouts']} rollouts / {v['tokens']} tokens" for k, v in r["sizes"].items()),
             "", f"T-SAE on the base rollouts: FVE {q['fve']:.3f}, reconstruction cosine {q['recon_cosine']:.3f}, "
             f"adjacent-token high-level cosine {q['adjacent_high_cosine']:.3f} (random pairs "
             f"{q['random_pair_high_cosine']:.3f})", "",
             "**Shortcut probe** (logistic regression on T-SAE high-level features; stratified "
             f"{r['shortcut_probe']['folds']}-fold CV, threshold chosen inside each training fold)", "",
             "| rollouts | label kind | label | rows | positives | precision | recall | F1 |",
             "|---|---|---|---|---|---|---|---|"]
    for x in r["shortcut_probe"]["runs"]:
        if "skipped" in x:
            lines.append(f"| {x['rollouts']} | {x['label_kind']} | {x['label']} | {x['rows']} | {x['positives']} | "
                         f"skipped: too few | | |")
        else:
            lines.append(f"| {x['rollouts']} | {x['label_kind']} | {x['label']} | {x['rows']} | {x['positives']} | "
                         f"{fmt_number(x['precision'])} | {fmt_number(x['recall'])} | {fmt_number(x['f1'])} |")
    if r["shortcut_probe"]["text_flags_vs_human"]:
        lines += ["", "Text flags against the human label on the labelled set:", ""]
    for f, q in r["shortcut_probe"]["text_flags_vs_human"].items():
        lines.append(f"- `{f}` vs `{q['label']}`: flagged {q['flagged']}, labelled {q['labelled']}, both {q['both']}: "
                     f"precision {fmt_number(q['precision'])}, recall {fmt_number(q['recall'])}")
    if "drift" in r:
        d = r["drift"]
        lines += ["", f"**Feature drift** base -> `{d['checkpoint']}` (same SAE, same tokens)", "",
                  "| tokens of | tokens | mean abs Δ mean | relative | mean abs Δ firing rate | cosine of mean codes | "
                  "mean token cosine | top feature changed |", "|---|---|---|---|---|---|---|---|"]
        for k in ("all", "main", "checkpoint_records"):
            s = d[k]
            lines.append(f"| {k} | {s['tokens']} | {s['mean_abs_delta_mean']:.4f} | {s['relative_abs_delta_mean']:.3f} | "
                         f"{s['mean_abs_delta_rate']:.4f} | {s['cosine_mean_codes']:.4f} | {s['mean_token_cosine']:.3f} | "
                         f"{s['top_feature_changed']:.3f} |")
        lines += ["", "| feature | mean base | mean trained | rate base | rate trained | fires hardest (trained) |",
                  "|---|---|---|---|---|---|"]
        for f in d["top"]:
            lines.append(f"| {f['feature']} | {f['mean_base']:.3f} | {f['mean_trained']:.3f} | {f['rate_base']:.3f} | "
                         f"{f['rate_trained']:.3f} | {span_cells(f['spans_trained'])} |")
    lines += ["", "**Enriched per band** (log odds of being in a rollout's top features, 95 % interval)", "",
              "| band | rollouts | feature | share | share elsewhere | log odds [CI] | fires hardest |",
              "|---|---|---|---|---|---|---|"]
    for b, g in r["band_enrichment"]["bands"].items():
        for x in g["features"][:3]:
            lines.append(f"| {b} | {g['rollouts']} | {x['feature']} | {x['share']:.2f} | {fmt_number(x['share_rest'], 2)} | "
                         f"{x['log_odds']:.2f} [{x['ci'][0]:.2f}, {x['ci'][1]:.2f}] | "
                         f"{span_cells(x['spans'])} |")
    lines += ["", "**Hard items: successes vs failures**", ""]
    for name, e in r["hard_items"].items():
        lines.append(f"- {name}: {e['problems']} problems, {e['rollouts']} rollouts, {e['successes']} successes")
        if "only_on_success" in e:
            lines.append(f"  - features only on successes ({e['only_on_success']['rule']}): "
                         f"{e['only_on_success']['features'] or 'none'}")
            for x in e["enriched_in_success"]["features"][:3]:
                lines.append(f"  - feature {x['feature']}: in {x['in_group']} of {x['group_rollouts']} successes' top, "
                             f"{fmt_number(x['share_rest'], 2)} of failures; log odds {x['log_odds']:.2f} "
                             f"[{x['ci'][0]:.2f}, {x['ci'][1]:.2f}]")
    return "\n".join(lines) + "\n"
