"""The report in a real browser: headless Chromium opens ``data/report/index.html`` from the file system.

No console error or failed load; every chart is drawn (plotly's SVG is in the DOM and its screenshot is not blank);
the band and flag numbers shown (tables and the band chart's bars) are the SQL views'; the item browser filters by
band, flag, source and text, and a click on an item (or on a suspicious item's link) shows its rollouts.
Skipped when Chromium is missing, a failure under PASSBAND_REQUIRE_SHARED=1 (CI; `.ci/setup-browser` installs it).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path

import pytest
from chromium import Browser, chromium_path
from click.testing import CliRunner
from PIL import Image
from publish_tables import make_repo
from rollout_tables import add_rollouts

from pipeline.catalog import query
from pipeline.cli import cli
from pipeline.params_loader import load_params

pytestmark = pytest.mark.slow
CAP = 5  # report.max_rollouts_per_item here: below k, so the cap shows


def _chromium() -> str:
    path = chromium_path()
    if path is None:
        reason = ("no Chromium (/usr/bin/chromium or $PASSBAND_CHROMIUM): run `bash .ci/setup-browser` as root "
                  "(Debian's package `chromium`), or point PASSBAND_CHROMIUM at a Chromium or Chrome")
        if os.environ.get("PASSBAND_REQUIRE_SHARED", "") not in ("", "0"):
            pytest.fail(reason + " and PASSBAND_REQUIRE_SHARED=1")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("report") / "repo"))
    text = (root / "params.yaml").read_text() + f"report: {{max_rollouts_per_item: {CAP}, items_per_file: 4, " \
                                                 "index_rows_per_file: 6}\n"
    (root / "params.yaml").write_text(text)
    result = CliRunner().invoke(cli, ["report", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


def sql(root: Path, text: str) -> list[dict]:
    return query(load_params(root / "params.yaml"), text, root=root).to_dicts()


def not_blank(png: bytes) -> bool:
    """More than 2 % of the pixels differ from the most common colour (the background), in several colours."""
    img = Image.open(io.BytesIO(png)).convert("RGB").resize((200, 100))
    counts = sorted(img.getcolors(200 * 100), reverse=True)
    return sum(c for c, _ in counts[1:]) > 0.02 * 200 * 100 and len(counts) > 3


async def _check(root: Path, shots: Path | None) -> dict:
    seen: dict = {}
    async with Browser(_chromium()) as b:
        await b.open((root / "data/report/index.html").as_uri())
        await b.wait_for("window.PB && PB.ready")

        charts = await b.eval("[...document.querySelectorAll('[data-chart]')].map(c => c.dataset.chart)")
        seen["charts"] = charts
        seen["drawn"] = await b.eval("[...document.querySelectorAll('[data-chart]')].filter(c => "
                                     "c.querySelector('svg.main-svg') && c.querySelector('.plot, .heatmaplayer, "
                                     ".barlayer .point, .scatterlayer .trace')).map(c => c.dataset.chart)")
        seen["not_blank"] = [c for c in charts if not_blank(await b.screenshot(f'[data-chart="{c}"]'))]
        if shots:
            (shots / "report-overview.png").write_bytes(await b.screenshot("#bands"))

        seen["band_cells"] = await b.eval("""[...document.querySelectorAll('table[data-view=band_counts] tbody tr')]
            .map(tr => ({policy_id: tr.dataset.policyId, band: tr.dataset.band,
                         problems: JSON.parse(tr.querySelector('[data-col=problems]').dataset.value),
                         shown: tr.querySelector('[data-col=problems]').textContent}))""")
        seen["band_bars"] = await b.eval("""(() => { const gd = document.getElementById('chart-band-counts');
            return gd.data.map(t => ({band: t.name, x: [...t.x], y: [...t.y]})); })()""")
        seen["flag_cells"] = await b.eval("""[...document.querySelectorAll('table[data-view=flag_quality] tbody tr')]
            .map(tr => ({flag: tr.dataset.flag, flagged: tr.querySelector('[data-col=flagged]').textContent,
                         precision: JSON.parse(tr.querySelector('[data-col="precision (labelled)"]').dataset.value)}))""")

        async def pick(select: str, value: str) -> int:
            await b.eval(f"(() => {{ const s = document.getElementById('{select}'); s.value = {json.dumps(value)};"
                         "s.dispatchEvent(new Event('change')); })()")
            return await b.eval("document.querySelectorAll('#item-list li[data-id]').length")

        seen["total"] = await b.eval("document.querySelectorAll('#item-list li[data-id]').length")
        seen["learnable"] = await pick("f-band", "learnable")
        primary = await b.eval("[...document.getElementById('f-policy').options]"
                               ".find(o => o.textContent === 'smollm2-135m-3shot').value")
        seen["learnable_primary"] = await pick("f-policy", primary)
        await pick("f-band", "")
        await pick("f-policy", "")
        seen["unsupported"] = await pick("f-flag", "unsupported_answer")
        await pick("f-flag", "")
        seen["gsm8k_test"] = await pick("f-source", "gsm8k_test")
        await pick("f-source", "")
        await b.eval("(() => { const t = document.getElementById('f-text'); t.value = 'pens';"
                     "t.dispatchEvent(new Event('input')); })()")
        seen["pens"] = await b.eval("[...document.querySelectorAll('#item-list li[data-id]')].map(li => li.dataset.id)")

        # one click on a listed item: its rollouts
        await b.click("#item-list li[data-id]")
        await b.wait_for("document.querySelector('#item .rollout')")
        seen["opened"] = await b.eval("""(() => ({id: document.getElementById('item').dataset.id,
            rollouts: document.querySelectorAll('#item .rollout').length,
            thinking: document.querySelectorAll('#item .rollout details').length,
            open: document.querySelectorAll('#item .rollout details[open]').length,
            text: document.getElementById('item').textContent}))()""")
        if shots:
            (shots / "report-item.png").write_bytes(await b.screenshot("#items"))

        # from a fresh page: one click on a suspicious item's link opens it (its item file loads then)
        await b.open((root / "data/report/index.html").as_uri())
        link = await b.eval("document.querySelector('table[data-view=unsupported_answers] a.item-link').textContent")
        await b.click("table[data-view=unsupported_answers] a.item-link")
        await b.wait_for(f"document.querySelector('#item[data-id=\"{link}\"] .rollout')")
        seen["linked"] = link
        await b.wait_for("PB.ready")
        seen["errors"] = list(b.errors)
    return seen


@pytest.fixture(scope="module")
def seen(repo) -> dict:
    shots = Path(os.environ["PASSBAND_REPORT_SCREENSHOTS"]) if os.environ.get("PASSBAND_REPORT_SCREENSHOTS") else None
    return asyncio.run(_check(repo, shots))


def test_no_console_error(seen):
    assert seen["errors"] == []


def test_every_chart_is_drawn_and_not_blank(seen):
    # bands, confidence, two policies' pass rates and flags, reformulation, one drift pair: each drawn
    assert len(seen["charts"]) == 8, seen["charts"]
    assert seen["drawn"] == seen["charts"]
    assert seen["not_blank"] == seen["charts"]


def test_band_numbers_are_the_views(repo, seen):
    view = {(r["policy_id"], r["band"]): r["problems"] for r in sql(repo, "SELECT * FROM band_counts")}
    assert {(c["policy_id"], c["band"]): c["problems"] for c in seen["band_cells"]} == view
    assert all(str(c["problems"]) == c["shown"] for c in seen["band_cells"])
    names = {r["policy_id"]: r["name"] for r in sql(repo, "SELECT DISTINCT policy_id, name FROM policies")}
    bars = {(x, t["band"]): y for t in seen["band_bars"] for x, y in zip(t["x"], t["y"], strict=True)}
    assert bars == {(names[p], band): n for (p, band), n in view.items()}


def test_flag_numbers_are_the_views(repo, seen):
    view = sql(repo, 'SELECT flag, flagged, "precision (labelled)" AS precision FROM flag_quality')
    assert [(c["flag"], int(c["flagged"]), c["precision"]) for c in seen["flag_cells"]] == \
           [(r["flag"], r["flagged"], r["precision"]) for r in view]
    assert any(int(c["flagged"]) > 0 for c in seen["flag_cells"])


def test_the_browser_filters(repo, seen):
    assert seen["total"] == sql(repo, "SELECT count(*) AS n FROM problems")[0]["n"]
    learnable = sql(repo, "SELECT count(DISTINCT problem_id) AS n FROM difficulty WHERE band = 'learnable'")[0]["n"]
    primary = sql(repo, "SELECT count(*) AS n FROM difficulty d JOIN policies p USING (policy_id) "
                        "WHERE band = 'learnable' AND p.name = 'smollm2-135m-3shot'")[0]["n"]
    assert (seen["learnable"], seen["learnable_primary"]) == (learnable, primary)
    assert learnable > primary > 0  # the policy filter narrows
    assert seen["unsupported"] == sql(repo, "SELECT count(DISTINCT problem_id) AS n FROM flags "
                                            "WHERE flag = 'unsupported_answer'")[0]["n"]
    assert seen["gsm8k_test"] == sql(repo, "SELECT count(*) AS n FROM problems WHERE source = 'gsm8k_test'")[0]["n"]
    assert seen["pens"] == [r["problem_id"] for r in sql(repo, "SELECT problem_id FROM problems WHERE question LIKE '%pens%'")]


def test_a_click_opens_an_item_with_its_rollouts_capped(repo, seen):
    opened = seen["opened"]
    shown = sql(repo, f"SELECT sum(least(n, {CAP}))::INT AS n FROM difficulty WHERE problem_id = '{opened['id']}'")[0]["n"]
    assert opened["rollouts"] == shown > 0
    assert opened["thinking"] == shown and opened["open"] == 0  # every rollout's thinking folded
    gold = sql(repo, f"SELECT answer FROM problems WHERE problem_id = '{opened['id']}'")[0]["answer"]
    assert "gold: " + gold in opened["text"]


def test_a_suspicious_items_link_opens_it(repo, seen):
    flagged = {r["problem_id"] for r in sql(repo, "SELECT problem_id FROM flags WHERE flag = 'unsupported_answer'")}
    assert seen["linked"] in flagged
