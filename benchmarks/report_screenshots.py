"""The report's screenshots in docs/images, taken in headless Chromium on real rollouts.

    .venv/bin/python benchmarks/report_screenshots.py [--out docs/images]

Inputs: the 342 real SmolLM2-135M completions of tests/data/embedded_completions.jsonl (two prompt styles as two
policies), verified and annotated in a temp folder (tests/support/embedded_set.py); ``passband report`` writes the site,
Chromium (tests/support/chromium.py) opens it from the file system and saves, at 1280 px, the bands section, the suspect
golds, the drift matrix and one opened item (``report-overview.png``, ``report-golds.png``, ``report-drift.png``,
``report-item.png``), and at a phone's 390 px the opened item (``report-narrow.png``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import embedded_set  # noqa: E402
from chromium import Browser, chromium_path  # noqa: E402

from pipeline import report  # noqa: E402


async def shoot(index: Path, out: Path) -> None:
    async with Browser(chromium_path()) as b:
        await b.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        await b.open(index.as_uri())
        await b.wait_for("window.PB && PB.ready")
        await asyncio.sleep(1)  # plotly's transitions
        (out / "report-overview.png").write_bytes(await b.screenshot("#bands"))
        (out / "report-golds.png").write_bytes(await b.screenshot("#golds"))
        (out / "report-drift.png").write_bytes(await b.screenshot("#drift"))
        await b.eval("(() => { const s = document.getElementById('f-band'); s.value = 'learnable';"
                     "s.dispatchEvent(new Event('change')); })()")
        await b.click("#item-list li[data-id]")
        await b.wait_for("document.querySelector('#item .rollout')")
        await b.eval("document.querySelector('#item .rollout details') && "
                     "(document.querySelector('#item .rollout details').open = true)")
        (out / "report-item.png").write_bytes(await b.screenshot("#items"))
        await b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1, mobile=True)
        await asyncio.sleep(1)
        (out / "report-narrow.png").write_bytes(await b.screenshot("#items"))
        if b.errors:
            raise SystemExit(f"console errors: {b.errors}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        params, _ = embedded_set.build(root)
        result = report.run(params, root=root)
        print(f"report: {result.info['items']} items, {result.info['rollouts_shown']} rollouts shown, "
              f"{result.info['bytes']} bytes")
        asyncio.run(shoot(root / params.paths.report / "index.html", args.out))
    print(f"wrote {args.out}/report-overview.png, report-golds.png, report-drift.png, report-item.png, "
          "report-narrow.png")


if __name__ == "__main__":
    main()
