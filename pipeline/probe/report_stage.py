"""``passband probe report``: the shell of the probe's reports (docs/probe.md, "Reports").

Reads one policy's rollouts (with their verdicts, flags and bands), the labelled set
(pipeline/annotate/flag_labels.jsonl: human labels, and the text flags the real verify and annotate cores give it) and,
optionally, a GRPO checkpoint with its ``records/`` (the rollouts and verdicts it recorded while training); runs
each through its model for activations (cached under ``probe/acts/<digest>/``: a rerun reuses them), trains a
T-SAE on the base rollouts' activations (or loads it: ``probe/<sae_id>/tsae.safetensors`` of ``passband probe``,
else ``probe/reports/sae/<slug>.safetensors``), and hands the codes to the pure core
(:mod:`pipeline.probe.report_core`): the shortcut probe, feature drift to the checkpoint, per-band enrichment and
the hard items' successes vs failures. Writes ``probe/reports/<report_id>/report.json`` and ``report.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.annotate.core import annotate_tables
from pipeline.annotate.detectors import labels
from pipeline.annotate.quality import LABELLED_SET, load_labels, measure
from pipeline.bands import LEARNABLE, TOO_HARD
from pipeline.config import AnnotateConfig, Params
from pipeline.io import atomic_write_text, read_table, write_json
from pipeline.keys import canonical_json, digest
from pipeline.probe import activations, sae, spans
from pipeline.probe.activations import ActivationStore
from pipeline.probe.core import ProbeConfig, ProbeError, answer_span, rollouts_digest, sae_id, scale_factor
from pipeline.probe.report_core import cross_validate, enrichment, feature_drift, fit_logistic, rollout_vectors
from pipeline.probe.report_markdown import markdown
from pipeline.probe.stage import inputs, probe_dir, prompt_text
from pipeline.tablesets import table_set
from pipeline.verify.core import source_digest

# the text flags that claim the "unsupported" label (read from their detector files): the weak labels the probe learns
SHORTCUT_FLAGS = tuple(f for f, label in labels().items() if label == "unsupported")
# the research's "hard" slice for success-vs-failure features: too_hard, and learnable items the policy solves at most
# this often (a slice of the report, not a band edge)
HARD_PASS_RATE = 0.25


@dataclass
class Part:
    """One set of rollouts: its keys, items (prompt, completion, answer span) and per-rollout facts."""

    name: str
    keys: list
    items: list
    correct: list  # bool per rollout
    flags: dict  # flag -> set of row indices
    human: list | None = None  # the labelled set's `unsupported` label per row
    bands: list | None = None


def file_digest(model_dir: Path) -> str:
    """sha256 of the checkpoint's weights (config.json beside them), 16 hex: what the activations depend on."""
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        p = Path(model_dir) / name
        if not p.is_file():
            raise ProbeError(f"{model_dir} has no {name}: not a checkpoint the probe can load")
        with p.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:16]


def cached_activations(model_dir: Path, items, *, cfg: ProbeConfig, cache: Path, threads: int | None):
    """:func:`pipeline.probe.activations.collect` of ``items`` through ``model_dir``, reused when its digest's folder
    is complete (the model's weights, the layer, the token cap, the items and the activations code)."""
    key = digest(canonical_json({"model": file_digest(model_dir), "layer": cfg.layer,
                                 "max_completion_tokens": cfg.max_completion_tokens,
                                 "items": digest(canonical_json([[*i[:2], i[2]] for i in items])),
                                 "code": source_digest({"a": Path(activations.__file__).read_text()})}), length=16)
    out = cache / key
    if (out / "meta.json").is_file():
        return activations.load(out), True
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=cache))
    try:
        activations.collect(model_dir, items, layer=cfg.layer, out_dir=tmp, batch_tokens=cfg.batch_tokens,
                            max_completion_tokens=cfg.max_completion_tokens, threads=threads)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return activations.load(out), False


def _concat(stores):
    """One in-memory store of several stores' rollouts, in order."""
    lengths = np.concatenate([s.lengths for s in stores])
    return ActivationStore(acts=np.concatenate([np.asarray(s.acts, dtype=np.float32) for s in stores]),
                           starts=np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64), lengths=lengths,
                           answer_mask=np.concatenate([s.answer_mask for s in stores]),
                           token_ids=np.concatenate([s.token_ids for s in stores]))


def _rows(store, idx):
    """Concatenated token rows of rollouts ``idx`` and their (starts, lengths)."""
    lengths = store.lengths[idx]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = np.concatenate([np.arange(store.starts[i], store.starts[i] + store.lengths[i]) for i in idx]) \
        if len(idx) else np.zeros(0, dtype=np.int64)
    return rows.astype(np.int64), starts, lengths


def main_part(params: Params, *, root: Path, policy: str | None, limit: int | None):
    pol, keys, _, items = inputs(params, root=root, policy=policy, limit=limit)
    ts = table_set(params, "main")
    status = {(v["problem_id"], v["policy_id"], v["sample_idx"]): v["status"]
              for v in read_table(root / ts.verdicts, name="verdicts").to_pylist()}
    band = {(d["problem_id"], d["policy_id"]): d["band"] for d in read_table(root / ts.difficulty, name="difficulty").to_pylist()}
    where = {k: i for i, k in enumerate(keys)}
    flags = {f: set() for f in SHORTCUT_FLAGS}
    for r in read_table(root / ts.flags, name="flags").to_pylist():
        k = (r["problem_id"], r["policy_id"], r["sample_idx"])
        if r["flag"] in flags and k in where:
            flags[r["flag"]].add(where[k])
    return pol, Part("main", keys, items, [status.get(k) == "correct" for k in keys], flags,
                     bands=[band.get(k[:2]) for k in keys])


def labelled_part(pol, tok, path: Path | None):
    """The labelled set rendered with the policy's prompt; its text flags from the real verify and annotate cores."""
    rows = load_labels(path or LABELLED_SET)
    q = measure(rows)
    idx = {r["id"]: i for i, r in enumerate(rows)}
    flags = {f: {idx[i] for i in q.hits.get(f, ())} for f in SHORTCUT_FLAGS}
    items = [(prompt_text(pol.render(r["question"]), tok), r["completion"],
              answer_span(r["completion"], r["final_answer"])) for r in rows]
    own = {f.flag: {"label": f.label, "flagged": f.flagged, "labelled": f.labelled, "both": f.both,
                    "precision": f.precision, "recall": f.recall} for f in q.flags if f.flag in SHORTCUT_FLAGS}
    part = Part("labelled", [("labelled", "labelled", i) for i in range(len(rows))], items,
                [bool(r["correct"]) for r in rows], flags, human=[bool(r["unsupported"]) for r in rows])
    return part, own


def checkpoint_part(pol, tok, checkpoint: Path, problems_dirs: list[Path]):
    """The checkpoint's recorded GRPO rollouts, their verdicts, and the text flags the annotate core gives them.
    Their problems are looked up in ``problems_dirs`` (the pool's table, and the reformulated one for an arm of
    children); a recorded problem found in none is an error naming it."""
    rec = checkpoint / "records"
    rolls = read_table(rec / "rollouts", name="rollouts")
    verdicts = read_table(rec / "verdicts", name="verdicts")
    if rolls.num_rows == 0:
        raise ProbeError(f"{rec / 'rollouts'} holds no rollouts: not a checkpoint written by `passband band-value train`")
    ids = set(rolls.column("problem_id").to_pylist())
    tables = [read_table(d, name="problems") for d in problems_dirs]
    tables = [t.filter(np.isin(t.column("problem_id").to_numpy(zero_copy_only=False), list(ids))) for t in tables]
    problems = pa.concat_tables(tables)
    missing = ids - set(problems.column("problem_id").to_pylist())
    if missing:
        raise ProbeError(f"{len(missing)} problems of {rec / 'rollouts'} are in none of the problems tables "
                         f"{', '.join(map(str, problems_dirs))} (e.g. {sorted(missing)[0]}): pass each with --problems")
    vid = verdicts.column("verifier_id")[0].as_py()
    _, flagt = annotate_tables(verdicts, rolls, problems, config=AnnotateConfig(), verifier_id=vid)
    q = {p["problem_id"]: p["question"] for p in problems.to_pylist()}
    v = {(r["problem_id"], r["policy_id"], r["sample_idx"]): r for r in verdicts.to_pylist()}
    rows = sorted(rolls.to_pylist(), key=lambda r: (r["policy_id"], r["problem_id"], r["sample_idx"]))
    keys = [(r["problem_id"], r["policy_id"], int(r["sample_idx"])) for r in rows]
    where = {k: i for i, k in enumerate(keys)}
    flags = {f: set() for f in SHORTCUT_FLAGS}
    for r in flagt.to_pylist():
        k = (r["problem_id"], r["policy_id"], r["sample_idx"])
        if r["flag"] in flags and k in where:
            flags[r["flag"]].add(where[k])
    items = [(prompt_text(pol.render(q[r["problem_id"]]), tok), r["completion"],
              answer_span(r["completion"], (v.get(k) or {}).get("extracted"))) for r, k in zip(rows, keys, strict=True)]
    return Part("checkpoint", keys, items, [(v.get(k) or {}).get("status") == "correct" for k in keys], flags)


def _load_or_train_sae(root: Path, params: Params, cfg: ProbeConfig, sid: str, x: np.ndarray, store):
    from safetensors.torch import load_file, save_file

    slug = sid.replace("/", "-")
    for p in (root / probe_dir(params) / slug / "tsae.safetensors", root / probe_dir(params) / "reports" / "sae" /
              f"{slug}.safetensors"):
        if p.is_file():
            model = sae.make_sae(x.shape[1], dataclasses.replace(cfg.sae, kind="tsae"))
            model.load_state_dict(load_file(str(p)))
            return model, str(p.relative_to(root)), True
    model, _ = sae.train_sae(x, store.starts, store.lengths, dataclasses.replace(cfg.sae, kind="tsae"), log_every=100)
    p = root / probe_dir(params) / "reports" / "sae" / f"{slug}.safetensors"
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    tmp.rename(p)
    return model, str(p.relative_to(root)), False


def _spans_for(tok, codes, store, feature: int, n: int = 3) -> list[str]:
    out = []
    for seq, row in spans.top_rows(codes[:, feature], store.lengths, n=n):
        lo, hi = spans.window(store.starts, store.lengths, seq, row)
        out.append(spans.text(tok, store.token_ids, lo, row, hi))
    return out


def run(params: Params, *, root: Path = Path("."), policy: str | None = None, limit: int | None = None,
        config: ProbeConfig | None = None, checkpoint: Path | None = None, problems: list[Path] | None = None,
        labelled: Path | None = None, use_labelled: bool = True, drift_limit: int | None = None, folds: int = 5,
        seed: int = 0, threads: int | None = None, out: Path | None = None, cache: Path | None = None) -> dict:
    """The reports for one policy (and a checkpoint): ``report.json`` and ``report.md`` in ``out`` (default
    ``probe/reports/<report_id>/``); returns the report (its ``out`` names the folder).

    Activations are cached per set of rollouts and model under ``cache`` (default ``probe/acts``)."""
    import torch
    from transformers import AutoTokenizer

    cfg = config or ProbeConfig()
    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    secs = {}
    pol, main = main_part(params, root=root, policy=policy, limit=limit)
    base_dir = Path(pol.model.path)
    tok = AutoTokenizer.from_pretrained(base_dir)
    lab, own = labelled_part(pol, tok, labelled) if use_labelled else (None, {})
    ck = None
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        dirs = [Path(p) for p in problems] if problems else [checkpoint.parents[1] / "problems"]
        ck = checkpoint_part(pol, tok, checkpoint, dirs)
    secs["inputs"] = round(time.perf_counter() - t0, 1)
    cache = Path(cache) if cache is not None else root / probe_dir(params) / "acts"
    # base model: main + labelled (+ the checkpoint's records, for drift); the checkpoint: a drift subset + its records
    parts = [p for p in (main, lab, ck) if p is not None]
    offsets = np.cumsum([0] + [len(p.keys) for p in parts])
    t = time.perf_counter()
    stores, hits = [], {}
    for p in parts:
        st, hits[p.name] = cached_activations(base_dir, p.items, cfg=cfg, cache=cache, threads=threads)
        stores.append(st)
    base_store = _concat(stores)
    secs["activations_base"] = round(time.perf_counter() - t, 1)
    idx = {p.name: np.arange(offsets[j], offsets[j + 1]) for j, p in enumerate(parts)}
    rows_main, s_main, l_main = _rows(base_store, idx["main"])
    x_main = np.asarray(base_store.acts[rows_main], dtype=np.float32)
    scale = scale_factor(x_main)
    sid = sae_id(cfg, model_revision=pol.model.revision, rollouts=rollouts_digest(main.keys, [i[1] for i in main.items]))
    t = time.perf_counter()
    model, sae_path, sae_loaded = _load_or_train_sae(root, params, cfg, sid, x_main * scale,
                                                     type("S", (), {"starts": s_main, "lengths": l_main}))
    secs["sae"] = round(time.perf_counter() - t, 1)
    h = cfg.sae.n_high
    quality = sae.quality(model, x_main * scale, s_main, l_main)

    def codes_of(store) -> np.ndarray:
        return sae.encode_all(model, np.asarray(store.acts, dtype=np.float32) * scale)[:, :h]

    codes_b = codes_of(base_store)
    vec = rollout_vectors(codes_b, starts=base_store.starts, lengths=base_store.lengths,
                          answer_mask=base_store.answer_mask, top_k=cfg.top_k)
    x_all = np.hstack([vec.mean, vec.answer])

    def pick(name):
        return idx[name]

    report: dict = {"sae_id": sid, "sae": sae_path, "sae_loaded": sae_loaded, "policy": pol.name,
                    "policy_id": pol.policy_id, "config": cfg.identity(), "scale": scale, "sae_quality": quality,
                    "sizes": {p.name: {"rollouts": len(p.keys), "tokens": int(base_store.lengths[pick(p.name)].sum())}
                              for p in parts},
                    "activations_cached": {"base": hits}}

    # 1. the shortcut probe --------------------------------------------------------------------------------------
    probe: dict = {"features": "per rollout: mean of each high-level feature over the completion's tokens, and over "
                               "the answer span's tokens (0 without one)", "folds": folds, "seed": seed, "runs": []}

    def cv(name, label_kind, label, rows, y, x=None):
        res = cross_validate(x_all[rows] if x is None else x, y, folds=folds, seed=seed)
        probe["runs"].append({"rollouts": name, "label_kind": label_kind, "label": label, **res})

    main_rows = pick("main")
    for f in SHORTCUT_FLAGS:
        cv("main", "text flag (weak label)", f, main_rows, np.isin(np.arange(len(main.keys)), list(main.flags[f])))
    if lab is not None:
        _labelled_probe(probe, cv, main, lab, main_rows, pick("labelled"), x_all, h, tok, codes_b, base_store)
    probe["text_flags_vs_human"] = own
    report["shortcut_probe"] = probe
    _bands_and_hard(report, cfg, main, main_rows, vec, tok, codes_b, base_store)

    # 2. drift ---------------------------------------------------------------------------------------------------------
    if ck is not None:
        n_d = len(main.keys) if drift_limit is None else min(drift_limit, len(main.keys))
        t = time.perf_counter()
        ck_main, hit_m = cached_activations(checkpoint, main.items[:n_d], cfg=cfg, cache=cache, threads=threads)
        ck_rec, hit_r = cached_activations(checkpoint, ck.items, cfg=cfg, cache=cache, threads=threads)
        ck_store = _concat([ck_main, ck_rec])
        secs["activations_checkpoint"] = round(time.perf_counter() - t, 1)
        report["activations_cached"]["checkpoint"] = {"main": hit_m, "checkpoint": hit_r}
        sel = np.concatenate([main_rows[:n_d], pick("checkpoint")])
        rows_b, s_d, l_d = _rows(base_store, sel)
        if not np.array_equal(l_d, ck_store.lengths):
            raise ProbeError("the checkpoint's tokenizer splits the rollouts unlike the base model's: no drift")
        codes_c = codes_of(ck_store)
        drift = {"checkpoint": str(checkpoint), "checkpoint_digest": file_digest(checkpoint),
                 "rollouts": {"main": n_d, "checkpoint_records": len(ck.keys)}}
        for name, r in (("all", slice(None)), ("main", slice(0, int(l_d[:n_d].sum()))),
                        ("checkpoint_records", slice(int(l_d[:n_d].sum()), None))):
            d = feature_drift(codes_b[rows_b][r], codes_c[r], top=8)
            drift[name] = d["summary"]
            if name == "all":
                st = type("S", (), {"starts": s_d, "lengths": l_d, "token_ids": ck_store.token_ids})
                drift["top"] = [{k: v for k, v in f.items() if not k.startswith("rows_")}
                                | {"spans_trained": _spans_for(tok, codes_c, st, f["feature"], 2),
                                   "spans_base": _spans_for(tok, codes_b[rows_b], st, f["feature"], 2)}
                                for f in d["top"]]
        report["drift"] = drift
        # the probe on the checkpoint's own rollouts, through the checkpoint (weak labels only)
        ck_rows = np.arange(int(n_d), int(n_d) + len(ck.keys))
        vc = rollout_vectors(codes_c, starts=ck_store.starts, lengths=ck_store.lengths,
                             answer_mask=ck_store.answer_mask, top_k=cfg.top_k)
        xc = np.hstack([vc.mean, vc.answer])[ck_rows]
        for f in SHORTCUT_FLAGS:
            y = np.isin(np.arange(len(ck.keys)), list(ck.flags[f]))
            cv("checkpoint records (through the checkpoint)", "text flag (weak label)", f, None, y, x=xc)
    secs["total"] = round(time.perf_counter() - t0, 1)
    report["seconds"] = secs
    rid = digest(canonical_json({"sae": sid, "checkpoint": report.get("drift", {}).get("checkpoint_digest"),
                                 "sizes": report["sizes"], "folds": folds, "seed": seed, "drift_limit": drift_limit}),
                 length=12)
    out = Path(out) if out is not None else root / probe_dir(params) / "reports" / rid
    out.mkdir(parents=True, exist_ok=True)
    report["report_id"] = rid
    write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", markdown(report))
    report["out"] = str(out)
    return report


def _labelled_probe(probe, cv, main, lab, main_rows, lab_rows, x_all, h, tok, codes_b, base_store) -> None:
    both = np.concatenate([main_rows, lab_rows])
    for f in SHORTCUT_FLAGS:
        y_main = np.isin(np.arange(len(main.keys)), list(main.flags[f]))
        y_lab = np.isin(np.arange(len(lab.keys)), list(lab.flags[f]))
        cv("labelled", "text flag (weak label)", f, lab_rows, y_lab)
        cv("main+labelled", "text flag (weak label)", f, both, np.concatenate([y_main, y_lab]))
    y_h = np.array(lab.human)
    cv("labelled", "human label", "unsupported", lab_rows, y_h)
    y_either = np.isin(np.arange(len(lab.keys)), list(lab.flags["unsupported_answer"] | lab.flags["computation_skip"]))
    cv("labelled", "text flag (weak label)", "unsupported_answer or computation_skip", lab_rows, y_either)
    cv("labelled", "human label, correct rollouts only", "unsupported", lab_rows[np.array(lab.correct)],
       y_h[np.array(lab.correct)])
    # the features the probe leans on, fitted once on every labelled row (interpretation only, not a score)
    if y_h.sum() >= 2:
        xs = x_all[lab_rows]
        mu, sd = xs.mean(0), xs.std(0)
        sd[sd < 1e-12] = 1
        w, _ = fit_logistic((xs - mu) / sd, y_h.astype(int))
        probe["top_weights_human_unsupported"] = [
            {"feature": int(j % h), "over": "completion" if j < h else "answer", "weight": float(w[j]),
             "spans": _spans_for(tok, codes_b, base_store, int(j % h), 2)} for j in np.argsort(-w)[:5]]


def _bands_and_hard(report, cfg, main, main_rows, vec, tok, codes_b, base_store) -> None:
    """Features enriched per band, and on hard items in successes against failures (the research's claim)."""
    bands = np.array([b or "none" for b in main.bands])
    top_main = vec.top[main_rows]
    enr = enrichment(top_main, bands, min_count=5, top=5)
    for g in enr.values():
        for r in g["features"]:
            r["spans"] = _spans_for(tok, codes_b, base_store, r["feature"], 2)
    report["band_enrichment"] = {"presence": f"feature in the rollout's top {cfg.top_k} by mean activation",
                                 "bands": enr}
    correct = np.array(main.correct)
    pr = _pass_rates(main)
    hard_kinds = {TOO_HARD: bands == TOO_HARD,
                  f"hard ({TOO_HARD} or {LEARNABLE} with pass rate <= {HARD_PASS_RATE})":
                      np.isin(bands, [TOO_HARD, LEARNABLE]) & (pr <= HARD_PASS_RATE)}
    hard = {}
    for name, m in hard_kinds.items():
        ok, bad = m & correct, m & ~correct
        entry = {"rollouts": int(m.sum()), "successes": int(ok.sum()), "failures": int(bad.sum()),
                 "problems": len({k[0] for k, mm in zip(main.keys, m, strict=True) if mm})}
        if ok.sum() >= 1 and bad.sum() >= 1:
            e = enrichment(top_main[m], np.where(correct[m], "success", "failure"), min_count=1, top=5)
            entry["enriched_in_success"] = e["success"]
            fires_ok, fires_bad = vec.fires[main_rows][ok], vec.fires[main_rows][bad]
            present_ok, present_bad = top_main[ok].mean(0), top_main[bad].mean(0)
            only = [int(f) for f in np.flatnonzero((present_ok >= 0.5) & (present_bad <= 0.1))]
            entry["only_on_success"] = {"rule": "in the top-k of >= half the successes and <= 10 % of the failures",
                                        "features": only}
            diff = fires_ok.mean(0) - fires_bad.mean(0)
            entry["firing_rate_gap"] = [{"feature": int(f), "success": float(fires_ok.mean(0)[f]),
                                         "failure": float(fires_bad.mean(0)[f]),
                                         "spans": _spans_for(tok, codes_b, base_store, int(f), 2)}
                                        for f in np.argsort(-diff)[:5]]
        hard[name] = entry
    report["hard_items"] = hard


def _pass_rates(part: Part) -> np.ndarray:
    tot: dict = {}
    for k, ok in zip(part.keys, part.correct, strict=True):
        n, c = tot.get(k[:2], (0, 0))
        tot[k[:2]] = (n + 1, c + int(ok))
    return np.array([tot[k[:2]][1] / tot[k[:2]][0] for k in part.keys])


__all__ = ["markdown", "run"]
