// The charts, drawn once the page is laid out, and the item browser: the measured items' index loads shard by shard
// (index/NNNNN.js), the never-measured items' (index/uNNNNN.js) when asked for, an item's file (items/NNNNN.js) when
// it opens. Data files are scripts calling PB.index / PB.items: a page opened from file:// may load scripts, not
// fetch files.
"use strict";
(function () {
  const META = JSON.parse(document.getElementById("pb-meta").textContent);
  const PAGE = 100;  // list rows shown before "more"
  const PB = window.PB = { rows: [], files: {}, waiting: {}, shown: PAGE, current: null, charts: 0,
    timing: {} };  // ms since navigation: first_rows (the list shows items), ready (the measured index whole)

  // --- charts: each from its JSON, in its box's width (drawn here, after layout), redrawn on resize ---
  function drawCharts() {
    for (const spec of document.querySelectorAll("script.figure")) {
      const div = document.getElementById(spec.dataset.for);
      const fig = JSON.parse(spec.textContent);
      fig.layout.width = undefined;
      Plotly.newPlot(div, fig.data, fig.layout, { displaylogo: false, responsive: true });
      PB.charts++;
    }
  }
  if (window.Plotly) drawCharts();
  window.addEventListener("load", () => {
    for (const div of document.querySelectorAll(".chart .plot")) if (div.data) Plotly.Plots.resize(div);
  });

  PB.index = function (n, rows) { for (const r of rows) PB.rows.push(r); };
  PB.items = function (n, records) {
    const byId = {};
    for (const r of records) byId[r.id] = r;
    PB.files[n] = byId;
  };

  function load(src) {
    return new Promise(function (resolve, reject) {
      const s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }
  const pad = (n) => String(n).padStart(5, "0");
  function itemFile(n) {
    if (PB.files[n]) return Promise.resolve(PB.files[n]);
    if (!PB.waiting[n]) PB.waiting[n] = load("items/" + pad(n) + ".js").then(() => PB.files[n]);
    return PB.waiting[n];
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const MANY = META.policies.length > 1;
  function band(b, p) {
    // p: the policy's position; with several policies each badge names its policy (number, and in full on hover)
    const label = p === undefined ? b : META.policies[p].name + ": " + (b || "not measured");
    return el("span", { class: "band", style: "background:" + (META.colours[b] || "#999"), title: label,
      "aria-label": label }, (MANY && p !== undefined ? (p + 1) + " " : "") + (b || "–"));
  }
  const fmt = (x) => (x === null || x === undefined) ? "–" : (typeof x === "number" ? (+x.toFixed(3)).toString() : x);

  // --- filters ---
  function options(sel, label, values) {
    if (label !== null) sel.append(el("option", { value: "" }, label));
    for (const [v, t] of values) sel.append(el("option", { value: v }, t));
  }
  const fPolicy = document.getElementById("f-policy"), fBand = document.getElementById("f-band"),
    fSource = document.getElementById("f-source"), fFlag = document.getElementById("f-flag"),
    fText = document.getElementById("f-text"), list = document.getElementById("item-list"),
    view = document.getElementById("item-view"), count = document.getElementById("f-count");
  options(fPolicy, "any policy", META.policies.map((p, i) => [String(i), p.name]));
  options(fBand, "any band", META.bands.map((b) => [b, b]).concat([["(unmeasured)", "not measured"]]));
  options(fFlag, "any flag", META.flags.map((f) => [f, f]).concat([["(none)", "no flag"], ["(gold)", "suspect gold"]]));
  document.getElementById("legend").textContent = MANY ? "Badges: " + META.policies.map((p, i) => (i + 1) + " = " +
    p.name).join(", ") + "." : "";

  function matches(r) {
    const pol = fPolicy.value, b = fBand.value, src = fSource.value, flag = fFlag.value;
    const text = fText.value.trim().toLowerCase();
    if (b === "(unmeasured)") {
      if (pol !== "" ? r.b[+pol] !== null : r.b.some((x) => x !== null)) return false;
    } else if (b) {
      if (pol !== "" ? r.b[+pol] !== b : !r.b.includes(b)) return false;
    } else if (pol !== "" ? r.b[+pol] === null : r.b.every((x) => x === null)) return false;
    if (src && r.s !== src) return false;
    if (flag === "(none)") { if (r.f.length > 0) return false; }
    else if (flag === "(gold)") { if (!r.g) return false; }
    else if (flag && !r.f.includes(flag)) return false;
    if (text && !(r.q.toLowerCase().includes(text) || r.id.toLowerCase().includes(text))) return false;
    return true;
  }
  function render() {
    const hits = PB.rows.filter(matches);
    const loading = PB.measuredRows < META.measured || (PB.unmeasuredAsked && !PB.unmeasuredLoaded);
    count.textContent = hits.length + " items" + (loading ? " (index loading…)" : "") + "; " + META.measured +
      " measured, " + (META.items - META.measured) + " never measured";
    list.replaceChildren();
    for (const r of hits.slice(0, PB.shown)) {
      const li = el("li", { "data-id": r.id, "data-file": String(r.k), tabindex: "0", role: "button",
        onclick: () => openItem(r.id, r.k),
        onkeydown: (ev) => {
          if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); openItem(r.id, r.k); }
          else if (ev.key === "ArrowDown" && li.nextElementSibling) { ev.preventDefault(); li.nextElementSibling.focus(); }
          else if (ev.key === "ArrowUp" && li.previousElementSibling) { ev.preventDefault(); li.previousElementSibling.focus(); }
        } },
        el("div", {}, ...r.b.map((x, i) => x ? band(x, i) : null), r.g ? el("span", { class: "flag gold-flag" }, "suspect gold") : null,
          el("span", { class: "id" }, r.id), r.r ? " ↳ reformulated" : ""),
        el("div", { class: "q" }, r.q), r.f.length ? el("div", {}, ...r.f.map((f) => el("span", { class: "flag" }, f))) : null);
      if (PB.current === r.id) li.classList.add("open");
      list.append(li);
    }
    if (hits.length > PB.shown) {
      const more = () => { PB.shown += PAGE; render(); };
      list.append(el("li", { class: "more", tabindex: "0", role: "button", onclick: more,
        onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); more(); } } },
        "show " + Math.min(PAGE, hits.length - PB.shown) + " more"));
    }
  }
  for (const f of [fPolicy, fBand, fSource, fFlag]) f.addEventListener("change", () => {
    PB.shown = PAGE;
    if (fBand.value === "(unmeasured)") loadUnmeasured();
    render();
  });
  fText.addEventListener("input", () => { PB.shown = PAGE; render(); });

  // --- one item ---
  function highlighted(text, marks, answer) {
    // marks: a flag's quoted evidence, where it first occurs; answer: the extracted answer, at its last occurrence
    // (the extractors take the final answer: the last \boxed{} or the last answer phrase)
    const pre = el("pre", {});
    const spots = [];
    for (const m of marks) {
      if (!m || m.length < 1) continue;
      const at = text.indexOf(m);
      if (at >= 0) spots.push([at, at + m.length]);
    }
    if (answer) {
      const at = text.lastIndexOf(answer);
      if (at >= 0) spots.push([at, at + answer.length, "answer"]);
    }
    spots.sort((a, b) => a[0] - b[0]);
    let pos = 0;
    for (const [a, b, kind] of spots) {
      if (a < pos) continue;
      pre.append(text.slice(pos, a), el("mark", kind ? { class: kind, title: "the extracted answer" } : {}, text.slice(a, b)));
      pos = b;
    }
    pre.append(text.slice(pos));
    return pre;
  }
  function quoted(evidence) {
    const out = [];
    const re = /'([^']{2,200})'|"([^"]{2,200})"/g;
    let m;
    while ((m = re.exec(evidence || "")) !== null) out.push(m[1] || m[2]);
    return out;
  }
  function rollout(r) {
    const marks = [].concat(...r.flags.map((f) => quoted(f.evidence)));
    const inFinal = r.extracted && r.final.includes(r.extracted);
    return el("div", { class: "rollout " + r.verdict, "data-sample": String(r.i) },
      el("div", {}, "#" + r.i + " ", el("span", { class: "verdict" }, r.verdict), " · extracted ",
        el("code", {}, r.extracted === null ? "(none)" : r.extracted), " · finish " + (r.finish || "–") + " ",
        ...r.flags.map((f) => el("span", { class: "flag" }, f.flag))),
      r.flags.some((f) => f.evidence) ? el("ul", { class: "evidence" }, ...r.flags.filter((f) => f.evidence).map((f) =>
        el("li", {}, el("b", {}, f.flag + ": "), f.evidence))) : null,
      r.thinking !== null ? el("details", {}, el("summary", {}, "thinking (" + r.thinking.length + " characters" +
        (r.closed === false ? ", never closed" : "") + ")"), highlighted(r.thinking, marks, inFinal ? null : r.extracted)) : null,
      highlighted(r.final, marks, inFinal ? r.extracted : null));
  }
  function link(id, label) {
    return el("a", { href: "#item=" + encodeURIComponent(id), class: "item-link" }, label || id);
  }
  function showItem(rec) {
    const hist = el("table", { class: "history" }, el("tr", {}, ...["policy", "band", "pass rate", "95 % interval", "n",
      "correct", "band confidence"].map((h) => el("th", {}, h))));
    for (const p of rec.policies) {
      hist.append(el("tr", {}, el("td", {}, p.policy), el("td", {}, band(p.band)), el("td", {}, fmt(p.pass_rate)),
        el("td", {}, fmt(p.ci[0]) + " – " + fmt(p.ci[1])), el("td", {}, String(p.n)), el("td", {}, String(p.n_correct)),
        el("td", {}, fmt(p.band_confidence))));
    }
    const parts = [
      el("h3", {}, rec.id), el("p", {}, "source " + rec.source + (rec.split ? " · split " + rec.split : "")),
      rec.parent ? el("p", {}, "reformulation (" + rec.method + ") of ", link(rec.parent)) : null,
      el("pre", { class: "question" }, rec.question),
      el("p", {}, "gold: ", el("span", { class: "gold" }, rec.gold)),
      rec.solution ? el("details", {}, el("summary", {}, "reference solution"), el("pre", {}, rec.solution)) : null,
      el("h4", {}, "Across policies"), rec.policies.length ? el("div", { class: "scroll" }, hist) : el("p", { class: "empty" }, "not measured yet"),
      rec.children.length ? el("p", {}, "children: ", ...rec.children.map((c) => el("span", {}, link(c.id), " (" + c.method + ") "))) : null,
    ];
    for (const p of rec.policies) {
      const answers = el("table", { class: "answers" }, el("tr", {}, ...["answer", "verdict", "rollouts"].map((h) => el("th", {}, h))),
        ...p.answers.map(([a, v, n]) => el("tr", {}, el("td", {}, el("code", {}, a === null ? "(none)" : a)), el("td", {}, v),
          el("td", { class: "num" }, String(n)))));
      parts.push(el("h4", {}, p.policy + ": answers"),
        el("p", { class: "note" }, p.distinct_answers + " distinct answers in " + p.n + " counted rollouts" +
          (p.distinct_answers > p.answers.length ? ", the " + p.answers.length + " most frequent shown" : "") +
          "; gold suspicion " + fmt(p.gold_suspicion)),
        p.gold_suspect ? el("p", { class: "suspect" }, "suspect gold: the rollouts agree on an answer that is not the gold") : null,
        el("div", { class: "scroll" }, answers),
        el("h4", {}, p.policy + ": " + p.shown + " of " + p.n + " rollouts shown"),
        ...p.rollouts.map(rollout));
    }
    view.replaceChildren(el("div", { id: "item", "data-id": rec.id }, ...parts));
  }
  function fileOf(id) {
    const find = () => { const x = PB.rows.find((y) => y.id === id); return x ? x.k : null; };
    const r = find();
    if (r !== null) return Promise.resolve(r);
    // not among the measured items: it may be a never-measured one
    return indexLoaded.then(() => find() !== null ? find() : loadUnmeasured().then(find));
  }
  function openItem(id, file) {
    PB.current = id;
    for (const li of list.children) li.classList.toggle("open", li.dataset.id === id);
    const where = (file === undefined || file === null) ? fileOf(id) : Promise.resolve(file);
    return where.then((n) => {
      if (n === null) throw new Error("no item " + id);
      return itemFile(n);
    }).then((byId) => {
      if (!byId[id]) throw new Error("item " + id + " is not in its file");
      showItem(byId[id]);
      if (location.hash !== "#item=" + encodeURIComponent(id)) history.replaceState(null, "", "#item=" + encodeURIComponent(id));
    }).catch((e) => { view.replaceChildren(el("p", { class: "empty" }, String(e.message))); });
  }
  PB.open = openItem;

  document.addEventListener("click", (ev) => {
    const a = ev.target.closest("a.item-link");
    if (!a) return;
    ev.preventDefault();
    const id = decodeURIComponent(a.getAttribute("href").slice("#item=".length));
    document.getElementById("browser").scrollIntoView();
    openItem(id, a.dataset.file !== undefined ? +a.dataset.file : null);
  });

  // the measured items' index, shard by shard, after the page has drawn; the never-measured items' when asked
  PB.measuredRows = 0;
  let chain = Promise.resolve();
  for (let n = 0; n < META.index_files; n++) {
    chain = chain.then(() => load("index/" + pad(n) + ".js")).then(() => {
      PB.measuredRows = PB.rows.length;
      render();
      if (PB.timing.first_rows === undefined) PB.timing.first_rows = performance.now();  // the list is usable
    });
  }
  let unmeasured = null;
  function loadUnmeasured() {
    PB.unmeasuredAsked = true;
    if (!unmeasured) {
      unmeasured = chain.then(() => {
        let c = Promise.resolve();
        for (let n = 0; n < META.unmeasured_files; n++) c = c.then(() => load("index/u" + pad(n) + ".js")).then(render);
        return c;
      }).then(() => {
        PB.unmeasuredLoaded = true;
        const sources = new Set([...fSource.options].map((o) => o.value));
        options(fSource, null, [...new Set(PB.rows.map((r) => r.s))].filter((x) => !sources.has(x)).sort().map((x) => [x, x]));
        render();
      });
    }
    return unmeasured;
  }
  PB.loadUnmeasured = loadUnmeasured;
  const indexLoaded = chain.then(() => {
    const sources = [...new Set(PB.rows.map((r) => r.s))].sort();
    options(fSource, "any source", sources.map((s) => [s, s]));
    PB.ready = true;
    PB.timing.ready = performance.now();  // every measured item searchable
    render();
    const m = location.hash.match(/^#item=(.+)$/);
    if (m) openItem(decodeURIComponent(m[1]));
  });
  PB.loaded = indexLoaded;
  render();
})();
