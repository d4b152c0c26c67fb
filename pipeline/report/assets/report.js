// The item browser: the index loads shard by shard (index/NNNNN.js), an item's file (items/NNNNN.js) when it opens.
// Data files are scripts calling PB.index / PB.items: a page opened from file:// may load scripts, not fetch files.
"use strict";
(function () {
  const META = JSON.parse(document.getElementById("pb-meta").textContent);
  const PAGE = 100;  // list rows shown before "more"
  const PB = window.PB = { rows: [], files: {}, waiting: {}, shown: PAGE, current: null };

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
  function band(b) {
    return el("span", { class: "band", style: "background:" + (META.colours[b] || "#999") }, b || "–");
  }
  const fmt = (x) => (x === null || x === undefined) ? "–" : (typeof x === "number" ? (+x.toFixed(3)).toString() : x);

  // --- filters ---
  function options(sel, label, values) {
    sel.append(el("option", { value: "" }, label));
    for (const [v, t] of values) sel.append(el("option", { value: v }, t));
  }
  const fPolicy = document.getElementById("f-policy"), fBand = document.getElementById("f-band"),
    fSource = document.getElementById("f-source"), fFlag = document.getElementById("f-flag"),
    fText = document.getElementById("f-text"), list = document.getElementById("item-list"),
    view = document.getElementById("item-view"), count = document.getElementById("f-count");
  options(fPolicy, "any policy", META.policies.map((p, i) => [String(i), p.name]));
  options(fBand, "any band", META.bands.map((b) => [b, b]));
  options(fFlag, "any flag", META.flags.map((f) => [f, f]).concat([["(none)", "no flag"]]));

  function matches(r) {
    const pol = fPolicy.value, b = fBand.value, src = fSource.value, flag = fFlag.value;
    const text = fText.value.trim().toLowerCase();
    if (b) {
      if (pol !== "" ? r.b[+pol] !== b : !r.b.includes(b)) return false;
    } else if (pol !== "" && r.b[+pol] === null) return false;
    if (src && r.s !== src) return false;
    if (flag === "(none)" ? r.f.length > 0 : (flag && !r.f.includes(flag))) return false;
    if (text && !(r.q.toLowerCase().includes(text) || r.id.toLowerCase().includes(text))) return false;
    return true;
  }
  function render() {
    const hits = PB.rows.filter(matches);
    count.textContent = hits.length + " of " + PB.rows.length + " items" +
      (PB.rows.length < META.items ? " (index loading…)" : "");
    list.replaceChildren();
    for (const r of hits.slice(0, PB.shown)) {
      const li = el("li", { "data-id": r.id, "data-file": String(r.k), onclick: () => openItem(r.id, r.k) },
        el("div", {}, ...r.b.filter((x) => x).map(band), el("span", { class: "id" }, r.id), r.r ? " ↳ reformulated" : ""),
        el("div", {}, r.q), r.f.length ? el("div", {}, ...r.f.map((f) => el("span", { class: "flag" }, f))) : null);
      if (PB.current === r.id) li.classList.add("open");
      list.append(li);
    }
    if (hits.length > PB.shown) {
      list.append(el("li", { class: "more", onclick: () => { PB.shown += PAGE; render(); } },
        "show " + Math.min(PAGE, hits.length - PB.shown) + " more"));
    }
  }
  for (const f of [fPolicy, fBand, fSource, fFlag]) f.addEventListener("change", () => { PB.shown = PAGE; render(); });
  fText.addEventListener("input", () => { PB.shown = PAGE; render(); });

  // --- one item ---
  function highlighted(text, marks) {
    // marks: strings to highlight (a flag's quoted evidence, the extracted answer), where they occur
    const pre = el("pre", {});
    const spots = [];
    for (const m of marks) {
      if (!m || m.length < 1) continue;
      const at = text.indexOf(m);
      if (at >= 0) spots.push([at, at + m.length]);
    }
    spots.sort((a, b) => a[0] - b[0]);
    let pos = 0;
    for (const [a, b] of spots) {
      if (a < pos) continue;
      pre.append(text.slice(pos, a), el("mark", {}, text.slice(a, b)));
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
    const marks = [r.extracted].concat(...r.flags.map((f) => quoted(f.evidence)));
    return el("div", { class: "rollout " + r.verdict, "data-sample": String(r.i) },
      el("div", {}, "#" + r.i + " ", el("span", { class: "verdict" }, r.verdict), " · extracted ",
        el("code", {}, r.extracted === null ? "(none)" : r.extracted), " · finish " + (r.finish || "–") + " ",
        ...r.flags.map((f) => el("span", { class: "flag", title: f.evidence || "" }, f.flag))),
      r.thinking !== null ? el("details", {}, el("summary", {}, "thinking (" + r.thinking.length + " characters" +
        (r.closed === false ? ", never closed" : "") + ")"), highlighted(r.thinking, marks)) : null,
      highlighted(r.final, marks));
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
      el("h4", {}, "Across policies"), rec.policies.length ? hist : el("p", { class: "empty" }, "not measured yet"),
      rec.children.length ? el("p", {}, "children: ", ...rec.children.map((c) => el("span", {}, link(c.id), " (" + c.method + ") "))) : null,
    ];
    for (const p of rec.policies) {
      parts.push(el("h4", {}, p.policy + ": " + p.shown + " of " + p.n + " rollouts shown"),
        ...p.rollouts.map(rollout));
    }
    view.replaceChildren(el("div", { id: "item", "data-id": rec.id }, ...parts));
  }
  function fileOf(id) {
    const r = PB.rows.find((x) => x.id === id);
    return r ? Promise.resolve(r.k) : indexLoaded.then(() => { const x = PB.rows.find((y) => y.id === id); return x ? x.k : null; });
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

  // the index, shard by shard, after the page has drawn
  let chain = Promise.resolve();
  for (let n = 0; n < META.index_files; n++) chain = chain.then(() => load("index/" + pad(n) + ".js")).then(render);
  const indexLoaded = chain.then(() => {
    const sources = [...new Set(PB.rows.map((r) => r.s))].sort();
    options(fSource, "any source", sources.map((s) => [s, s]));
    PB.ready = true;
    render();
    const m = location.hash.match(/^#item=(.+)$/);
    if (m) openItem(decodeURIComponent(m[1]));
  });
  PB.loaded = indexLoaded;
  render();
})();
