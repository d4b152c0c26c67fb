"""The report in a real browser: headless Chromium opens ``data/report/index.html`` from the file system.

No console error or failed load; every chart is drawn (plotly's SVG is in the DOM and its screenshot is not blank)
inside its box at 1280 and 1600 px with two policies; the band and flag numbers shown (tables and the band chart's
bars) are the SQL views'; the suspect golds are listed and filterable; the item browser filters by band, flag, source
and text, reaches the never-measured items on demand, and a click or Enter on an item (or a click on a suspicious
item's link) shows its answers and rollouts; at 390 px nothing overflows the page; with JavaScript off a note says so.
A missing Chromium fails the test with the step to take (`bash .ci/setup-browser`, as root); PASSBAND_SKIP_BROWSER=1
skips it instead.
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
from publish_tables import make_repo, mark_suspect_gold
from rollout_tables import add_rollouts

from pipeline.catalog import query
from pipeline.cli import cli
from pipeline.params_loader import load_params

pytestmark = pytest.mark.slow
CAP = 5  # report.max_rollouts_per_item here: below k, so the cap shows
SUSPECT = "p_0000000000000007"
WIDTHS = (1280, 1600)

# every chart's SVG and every bar and heatmap cell inside the chart's box, and the box inside the page
INSIDE = """[...document.querySelectorAll('[data-chart]')].map(c => {
    const box = c.getBoundingClientRect(), svg = c.querySelector('svg.main-svg').getBoundingClientRect();
    const parts = [...c.querySelectorAll('.barlayer .point path, .heatmaplayer image, .scatterlayer .point')]
        .map(e => e.getBoundingClientRect()).filter(r => r.width > 0 || r.height > 0);
    const inside = (r) => r.left >= box.left - 1 && r.right <= box.right + 1;
    return {chart: c.dataset.chart, box: box.width, svg: svg.width, page: document.documentElement.clientWidth,
            parts: parts.length, outside: parts.filter(r => !inside(r)).length,
            fits: inside(svg) && box.right <= document.documentElement.clientWidth + 1};
})"""


def _chromium() -> str:
    path = chromium_path()
    if path is None:
        reason = ("no Chromium (/usr/bin/chromium or $PASSBAND_CHROMIUM): run `bash .ci/setup-browser` as root "
                  "(Debian's package `chromium`), or point PASSBAND_CHROMIUM at a Chromium or Chrome")
        if os.environ.get("PASSBAND_SKIP_BROWSER", "") not in ("", "0"):
            pytest.skip(reason + " (PASSBAND_SKIP_BROWSER=1 skips this test)")
        pytest.fail(reason + "; or set PASSBAND_SKIP_BROWSER=1 to skip this test", pytrace=False)
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("report") / "repo"))
    mark_suspect_gold(root, SUSPECT)
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
        for width in WIDTHS:
            await b.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
            await b.open((root / "data/report/index.html").as_uri())
            await b.wait_for("window.PB && PB.ready")
            seen[f"inside_{width}"] = await b.eval(INSIDE)
        await b.send("Emulation.clearDeviceMetricsOverride")
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
            .map(tr => ({policy_id: tr.dataset.policyId, set: tr.dataset.set, band: tr.dataset.band,
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
        seen["golds"] = await b.eval("[...document.querySelectorAll('table[data-view=suspect_golds] tbody tr')]"
                                     ".map(tr => tr.querySelector('[data-col=problem_id]').textContent)")
        seen["gold_filter"] = await pick("f-flag", "(gold)")
        await pick("f-flag", "")
        await b.eval("(() => { const s = document.getElementById('f-band'); s.value = '(unmeasured)';"
                     "s.dispatchEvent(new Event('change')); })()")
        await b.wait_for("PB.unmeasuredLoaded")
        seen["unmeasured"] = await b.eval("[...document.querySelectorAll('#item-list li[data-id]')].map(li => li.dataset.id)")
        await pick("f-band", "")
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

        # one click on a listed item: its answers and rollouts
        await b.click("#item-list li[data-id]")
        await b.wait_for("document.querySelector('#item .rollout')")
        seen["opened"] = await b.eval("""(() => ({id: document.getElementById('item').dataset.id,
            rollouts: document.querySelectorAll('#item .rollout').length,
            thinking: document.querySelectorAll('#item .rollout details').length,
            open: document.querySelectorAll('#item .rollout details[open]').length,
            answers: [...document.querySelectorAll('#item table.answers')].map(t =>
                [...t.querySelectorAll('tr')].slice(1).map(tr => [tr.cells[0].textContent, +tr.cells[2].textContent])),
            evidence: [...document.querySelectorAll('#item .rollout .evidence li')].map(li => li.textContent),
            flagged: [...document.querySelectorAll('#item .rollout .flag')].length,
            // the extracted answer is marked where it last occurs: no occurrence after the mark
            marks: [...document.querySelectorAll('#item .rollout > pre mark.answer')].map(m => {
                let after = '', n = m.nextSibling;
                while (n) { after += n.textContent; n = n.nextSibling; }
                return after.includes(m.textContent); }),
            text: document.getElementById('item').textContent}))()""")
        # the keyboard: items are tab stops, Enter opens one
        await b.eval("(() => { const t = document.getElementById('f-text'); t.value = '';"
                     "t.dispatchEvent(new Event('input')); })()")
        await b.eval("(() => { const li = document.querySelectorAll('#item-list li[data-id]')[1]; li.focus(); })()")
        seen["focused"] = await b.eval("document.activeElement.dataset.id")
        for kind in ("rawKeyDown", "keyUp"):
            await b.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13)
        await b.wait_for(f"document.querySelector('#item[data-id=\"{seen['focused']}\"]')")
        seen["tab_stops"] = await b.eval("[...document.querySelectorAll('#item-list li')].every(li => li.tabIndex === 0)")
        if shots:
            (shots / "report-item.png").write_bytes(await b.screenshot("#items"))

        # from a fresh page: one click on a suspicious item's link opens it (its item file loads then)
        await b.open((root / "data/report/index.html").as_uri())
        link = await b.eval("document.querySelector('table[data-view=unsupported_answers] a.item-link').textContent")
        await b.click("table[data-view=unsupported_answers] a.item-link")
        await b.wait_for(f"document.querySelector('#item[data-id=\"{link}\"] .rollout')")
        seen["linked"] = link
        await b.wait_for("PB.ready")
        # the suspect gold's item: its answers, and the note
        await b.click(f'table[data-view=suspect_golds] a.item-link[href="#item={SUSPECT}"]')
        await b.wait_for(f"document.querySelector('#item[data-id=\"{SUSPECT}\"] .rollout')")
        seen["suspect_item"] = await b.eval("document.getElementById('item').textContent")

        # a phone's width: nothing wider than the page, an item open too
        await b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=2, mobile=True)
        await b.open((root / "data/report/index.html").as_uri())
        await b.wait_for("window.PB && PB.ready")
        await b.click("#item-list li[data-id]")
        await b.wait_for("document.querySelector('#item .rollout')")
        await asyncio.sleep(0.3)  # plotly redraws on resize
        seen["narrow"] = await b.eval("""(() => { const w = document.documentElement.clientWidth;
            return {page: w, scroll: document.documentElement.scrollWidth,
                    wider: [...document.querySelectorAll('body *')].filter(e => e instanceof HTMLElement
                            && e.getBoundingClientRect().right > w + 1 && !e.closest('.scroll'))
                            .map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 5)}; })()""")
        if shots:
            (shots / "report-narrow.png").write_bytes(await b.screenshot())
        await b.send("Emulation.clearDeviceMetricsOverride")
        seen["errors"] = list(b.errors)

        # JavaScript off: the tables are there, and a note says what needs JavaScript
        await b.send("Emulation.setScriptExecutionDisabled", value=True)
        await b.open((root / "data/report/index.html").as_uri())
        await asyncio.sleep(0.5)
        doc = await b.send("DOM.getDocument", depth=-1)
        html = (await b.send("DOM.getOuterHTML", nodeId=doc["root"]["nodeId"]))["outerHTML"]
        seen["noscript_html"] = html
        seen["noscript_shot"] = await b.screenshot()
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
    view = {(r["policy_id"], r["set"], r["band"]): r["problems"] for r in sql(repo, 'SELECT * FROM band_counts')}
    assert {(c["policy_id"], c["set"], c["band"]): c["problems"] for c in seen["band_cells"]} == view
    assert all(str(c["problems"]) == c["shown"] for c in seen["band_cells"])
    names = {r["policy_id"]: r["name"] for r in sql(repo, "SELECT DISTINCT policy_id, name FROM policies")}
    bars = {(x, t["band"]): y for t in seen["band_bars"] for x, y in zip(t["x"], t["y"], strict=True)}
    label = {"main": "{}", "reformulated": "{} (reformulated)"}
    assert bars == {(label[s].format(names[p]), band): n for (p, s, band), n in view.items()}
    # the main set's learnable count is the one `passband summary` and the published default config give
    main = sql(repo, "SELECT count(*) AS n FROM difficulty d JOIN problems p USING (problem_id) "
                     "WHERE p.parent_id IS NULL AND d.band = 'learnable' AND d.policy_id = "
                     "(SELECT policy_id FROM policies WHERE name = 'smollm2-135m-3shot' LIMIT 1)")[0]["n"]
    primary = [c for c in seen["band_cells"] if c["set"] == "main" and c["band"] == "learnable"
               and names[c["policy_id"]] == "smollm2-135m-3shot"]
    assert [c["problems"] for c in primary] == [main]
    assert {c["set"] for c in seen["band_cells"]} == {"main", "reformulated"}


@pytest.mark.parametrize("width", WIDTHS)
def test_every_chart_fits_its_box(seen, width):
    inside = seen[f"inside_{width}"]
    assert len(inside) == 8
    for c in inside:
        assert c["fits"] and c["svg"] <= c["box"] + 1, c
        assert c["outside"] == 0, c
    band = next(c for c in inside if c["chart"] == "chart-band-counts")
    assert band["box"] < 0.75 * band["page"]  # beside the confidence chart, not the whole row
    assert band["parts"] >= 4  # both policies' bars (and the reformulated set's) drawn


def test_suspect_golds_are_shown_and_filtered(repo, seen):
    view = [r["problem_id"] for r in sql(repo, "SELECT problem_id FROM suspect_golds")]
    assert seen["golds"] == view == [SUSPECT]
    assert seen["gold_filter"] == 1
    assert "suspect gold" in seen["suspect_item"] and "35" in seen["suspect_item"]


def test_never_measured_items_are_apart_and_reachable(repo, seen):
    measured = sql(repo, "SELECT count(DISTINCT problem_id) AS n FROM difficulty")[0]["n"]
    assert seen["total"] == measured
    never = sql(repo, "SELECT problem_id FROM problems WHERE problem_id NOT IN (SELECT problem_id FROM difficulty) "
                      "ORDER BY problem_id")
    assert seen["unmeasured"] == [r["problem_id"] for r in never] and never


def test_the_answers_evidence_and_keyboard(repo, seen):
    opened = seen["opened"]
    policies = sql(repo, f"SELECT count(*) AS n FROM difficulty WHERE problem_id = '{opened['id']}'")[0]["n"]
    assert len(opened["answers"]) == policies
    groups = sql(repo, f"""SELECT d.policy_id, v.extracted, v.status, count(*) AS n FROM difficulty d
                           JOIN verdicts v ON v.problem_id = d.problem_id AND v.policy_id = d.policy_id
                            AND v.verifier_id = d.verifier_id AND v.sample_idx < d.n
                           WHERE d.problem_id = '{opened['id']}' GROUP BY ALL""")
    top: dict = {}
    for g in groups:
        top.setdefault(g["policy_id"], []).append(g["n"])
    # per policy the six most frequent answers of its counted verdicts, most frequent first
    assert sorted(sorted(c for _, c in table) for table in opened["answers"]) == \
        sorted(sorted(sorted(ns, reverse=True)[:6]) for ns in top.values())
    assert all([c for _, c in table] == sorted((c for _, c in table), reverse=True) for table in opened["answers"])
    assert opened["marks"] and not any(opened["marks"])  # each answer marked at its last occurrence
    if opened["flagged"]:
        assert opened["evidence"]  # a flag's evidence is on the page, not only in a tooltip
    assert seen["tab_stops"] and seen["focused"]


def test_a_phone_width_does_not_overflow(seen):
    n = seen["narrow"]
    assert n["page"] <= 400 and n["scroll"] <= n["page"] and n["wider"] == [], n


def test_without_javascript_a_note_says_so(seen):
    html = seen["noscript_html"]
    assert "JavaScript is off" in html and "needs JavaScript" in html
    assert 'data-view="band_counts"' in html  # the numbers are there without it
    assert not_blank(seen["noscript_shot"])


def test_flag_numbers_are_the_views(repo, seen):
    view = sql(repo, 'SELECT flag, flagged, "precision (labelled)" AS precision FROM flag_quality')
    assert [(c["flag"], int(c["flagged"]), c["precision"]) for c in seen["flag_cells"]] == \
           [(r["flag"], r["flagged"], r["precision"]) for r in view]
    assert any(int(c["flagged"]) > 0 for c in seen["flag_cells"])


def test_the_browser_filters(repo, seen):
    learnable = sql(repo, "SELECT count(DISTINCT problem_id) AS n FROM difficulty WHERE band = 'learnable'")[0]["n"]
    primary = sql(repo, "SELECT count(*) AS n FROM difficulty d JOIN policies p USING (policy_id) "
                        "WHERE band = 'learnable' AND p.name = 'smollm2-135m-3shot'")[0]["n"]
    assert (seen["learnable"], seen["learnable_primary"]) == (learnable, primary)
    assert learnable > primary > 0  # the policy filter narrows
    measured = "problem_id IN (SELECT problem_id FROM difficulty)"  # the list's default: the measured items
    assert seen["unsupported"] == sql(repo, "SELECT count(DISTINCT problem_id) AS n FROM flags "
                                            f"WHERE flag = 'unsupported_answer' AND {measured}")[0]["n"] > 0
    assert seen["gsm8k_test"] == sql(repo, f"SELECT count(*) AS n FROM problems WHERE source = 'gsm8k_test' "
                                           f"AND {measured}")[0]["n"]
    assert seen["pens"] == [r["problem_id"] for r in sql(repo, "SELECT problem_id FROM problems WHERE question "
                                                               f"LIKE '%pens%' AND {measured}")]


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
