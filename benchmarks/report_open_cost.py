"""What opening the report costs a browser, at several sizes: constructed items, opened in headless Chromium.

    nice -n 10 .venv/bin/python benchmarks/report_open_cost.py [--items 22000 220000] [--measured 1.0 0.1]

For each size and measured share, N item records are built (real GSM8K test questions, cycled, each made unique;
two policies; one shown rollout of ~400 characters each; the never-measured items carry no policy row) and written
by the report's own writer (pipeline.report.site.write_site: index shards, item files, the overview), with
``report.index_rows_per_file`` and ``items_per_file`` at their defaults. Chromium opens ``index.html`` from the file
system at 1280 px; printed: the index's bytes loaded at open (the measured items' shards) and apart (the
never-measured ones'), the ms until the list shows items (``PB.timing.first_rows``) and until every measured item
is searchable (``PB.timing.ready``), the JS heap then (DevTools ``Performance.getMetrics``), a band filter's
re-render over the whole index and one item's open. No SQL here: the tables' side is benchmarks/report_size.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))

from chromium import Browser, chromium_path  # noqa: E402

from pipeline.config import ReportConfig  # noqa: E402
from pipeline.report import site  # noqa: E402
from pipeline.report.queries import Summary  # noqa: E402

BANDS = ["too_easy", "learnable", "too_hard", "unsolved"]
COLOURS = {"too_easy": "#4c72b0", "learnable": "#55a868", "too_hard": "#dd8452", "unsolved": "#c44e52"}
POLICIES = [("pol_a", "policy-a"), ("pol_b", "policy-b")]
SHARED = REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def questions() -> list[str]:
    if not SHARED.exists():
        raise SystemExit(f"{SHARED} is missing: put the shared data beside the repository")
    return [json.loads(line)["question"] for line in SHARED.read_text(encoding="utf-8").splitlines() if line.strip()]


def records(n: int, measured: float, qs: list[str]):
    rng = random.Random(0)
    for i in range(n):
        q = qs[i % len(qs)] + f" (item {i})"
        policies = []
        if rng.random() < measured:
            for pid, name in POLICIES:
                c = rng.randint(0, 8)
                band = "unsolved" if c == 0 else "too_hard" if c < 2 else "learnable" if c <= 6 else "too_easy"
                final = "Let me work through it step by step. " * 9 + f"The answer is \\boxed{{{c}}}."
                policies.append({
                    "policy": name, "policy_id": pid, "band": band, "pass_rate": c / 8, "ci": [0.0, 1.0], "n": 8,
                    "n_correct": c, "band_confidence": 0.8, "gold_suspicion": 0.0, "gold_suspect": False,
                    "answers": [[str(c), "correct", c], ["0", "incorrect", 8 - c]], "distinct_answers": 2, "shown": 1,
                    "rollouts": [{"i": 0, "thinking": None, "final": final, "closed": None, "extracted": str(c),
                                  "verdict": "correct", "finish": "stop", "flags": []}]})
        yield {"id": f"p_{i:016x}", "source": ("gsm8k_test", "math_train")[i % 2], "split": "test", "question": q,
               "gold": "7", "solution": None, "parent": None, "method": None, "children": [],
               "flags": ["truncated"] if i % 17 == 0 and policies else [], "policies": policies}


def summary() -> Summary:
    s = Summary(bands=BANDS, colours=COLOURS,
                policies=[{"policy_id": p, "name": n, "model": "m"} for p, n in POLICIES])
    s.totals = {"problems": 0, "measured": 0, "rollouts": 0, "flags": 0, "suspect_golds": 0, "scored": 0,
                "expected_wrong_keys": 0.0, "expected_among_suspect": 0.0}
    return s


async def open_cost(index: Path) -> dict:
    async with Browser(chromium_path(), timeout=600) as b:
        await b.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        await b.send("Performance.enable")
        await b.open(index.as_uri())
        await b.wait_for("window.PB && PB.ready", timeout=600)
        timing = await b.eval("PB.timing")
        metrics = {m["name"]: m["value"] for m in (await b.send("Performance.getMetrics"))["metrics"]}
        t0 = time.perf_counter()
        await b.eval("(() => { const s = document.getElementById('f-band'); s.value = 'learnable';"
                     "s.dispatchEvent(new Event('change')); })()")
        filter_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        await b.click("#item-list li[data-id]")
        await b.wait_for("document.querySelector('#item .rollout')")
        item_ms = (time.perf_counter() - t0) * 1000
        return {"first_rows_ms": timing.get("first_rows"), "ready_ms": timing["ready"],
                "heap_mb": metrics["JSHeapUsedSize"] / 2**20, "filter_ms": filter_ms, "item_ms": item_ms,
                "errors": list(b.errors)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, nargs="+", default=[22_000, 220_000])
    ap.add_argument("--measured", type=float, nargs="+", default=[1.0, 0.1], help="share of items measured")
    args = ap.parse_args()
    if chromium_path() is None:
        raise SystemExit("no Chromium: run `bash .ci/setup-browser` as root, or set PASSBAND_CHROMIUM")
    cfg, qs = ReportConfig(), questions()
    print("| items | measured | index at open | index apart | list shows items | measured index searchable "
          "| JS heap | band filter | one item opened |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.items:
        for share in args.measured:
            with tempfile.TemporaryDirectory(prefix="report-open-") as tmp:
                folder = Path(tmp)
                w = site.write_site(folder, summary(), records(n, share, qs), max_rollouts=1,
                                    items_per_file=cfg.items_per_file, index_rows_per_file=cfg.index_rows_per_file)
                at_open = sum(f.stat().st_size for f in (folder / "index").glob("[0-9]*.js"))
                apart = sum(f.stat().st_size for f in (folder / "index").glob("u*.js"))
                r = asyncio.run(open_cost(folder / "index.html"))
                if r["errors"]:
                    raise SystemExit(f"console errors: {r['errors']}")
                print(f"| {n:,} | {w.measured:,} | {at_open / 1e6:.1f} MB, {w.index_files} files | "
                      f"{apart / 1e6:.1f} MB, {w.unmeasured_files} files | {r['first_rows_ms']:.0f} ms | "
                      f"{r['ready_ms']:.0f} ms | {r['heap_mb']:.0f} MiB | {r['filter_ms']:.0f} ms | "
                      f"{r['item_ms']:.0f} ms |", flush=True)


if __name__ == "__main__":
    main()
