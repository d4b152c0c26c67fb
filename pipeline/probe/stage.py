"""The probe stage's shell and helpers; :mod:`pipeline.probe` describes the stage and re-exports its public names."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.config import Params
from pipeline.io import claim_table_dir, read_table, write_json, write_table
from pipeline.probe import activations, sae, spans
from pipeline.probe.core import ProbeConfig, ProbeError, answer_span, feature_rows, rollouts_digest, sae_id, scale_factor
from pipeline.rollout.policy import resolve_policy
from pipeline.tablesets import features_dir, table_set
from pipeline.verify.core import verifier_id


@dataclass
class Trained:
    """What :func:`train_and_extract` gives: both SAEs, their loss logs and quality, the features table, examples."""

    config: ProbeConfig
    models: dict
    logs: dict
    quality: dict
    table: object  # pa.Table (features)
    examples: dict
    tokens: int
    scale: float
    seconds: dict
    codes: np.ndarray  # tokens x n_high: the T-SAE's high-level codes
    store: object  # the ActivationStore (its memmap is gone with the work folder)


@dataclass
class ProbeResult:
    sae_id: str
    rollouts: int = 0
    tokens: int = 0
    rows: int = 0
    skipped: bool = False
    quality: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    out_dir: Path | None = None


def probe_dir(params: Params) -> str:
    """Where trained SAEs and their reports live: ``probe/`` beside ``paths.difficulty`` (``data/probe``)."""
    return posixpath.join(posixpath.dirname(params.paths.difficulty.rstrip("/")) or ".", "probe")


def prompt_text(prompt, tok) -> str:
    if prompt.text is not None:
        return prompt.text
    text = tok.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
    bos = getattr(tok, "bos_token", None)
    if bos and text.startswith(bos) and tok("a")["input_ids"][:1] == [tok.bos_token_id]:
        text = text[len(bos):]  # tokenising with special tokens adds it back, as the engine's tokenisation does
    return text


def inputs(params: Params, *, root: Path, policy: str | None, limit: int | None):
    """The policy, its rollouts' keys, completions and (prompt, completion, answer span) items."""
    name = policy or params.rollout.policies[0]
    if name not in params.policies:
        raise ProbeError(f"unknown policy {name!r}; params.yaml names: {', '.join(params.policies)}")
    pol = resolve_policy(name, params.policies[name], models_dir=root / params.paths.models, root=root)
    ts = table_set(params, "main")
    rolls = read_table(root / ts.rollouts, name="rollouts").to_pylist()
    rolls = sorted((r for r in rolls if r["policy_id"] == pol.policy_id),
                   key=lambda r: (r["problem_id"], r["sample_idx"]))[:limit]
    if not rolls:
        raise ProbeError(f"policy {name!r} ({pol.policy_id}) has no rollouts in {ts.rollouts}: run `passband rollout` first")
    questions = {r["problem_id"]: r["question"] for r in read_table(root / ts.problems, name="problems").to_pylist()}
    vid = verifier_id(params.verify)
    extracted = {(v["problem_id"], v["policy_id"], v["sample_idx"]): v["extracted"]
                 for v in read_table(root / ts.verdicts, name="verdicts").to_pylist() if v["verifier_id"] == vid}
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(pol.model.path)
    keys, completions, items = [], [], []
    for r in rolls:
        k = (r["problem_id"], r["policy_id"], int(r["sample_idx"]))
        keys.append(k)
        completions.append(r["completion"])
        prompt = prompt_text(pol.render(questions[r["problem_id"]]), tok)
        items.append((prompt, r["completion"], answer_span(r["completion"], extracted.get(k))))
    return pol, keys, completions, items


def run(params: Params, *, root: Path = Path("."), policy: str | None = None, limit: int | None = None,
        config: ProbeConfig | None = None, threads: int | None = None) -> ProbeResult:
    """The shell: tables and the checkpoint in; ``probe/<sae_id>/`` and a ``features`` shard out."""
    import torch

    cfg = config or ProbeConfig()
    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    pol, keys, completions, items = inputs(params, root=root, policy=policy, limit=limit)
    sid = sae_id(cfg, model_revision=pol.model.revision, rollouts=rollouts_digest(keys, completions))
    slug = sid.replace("/", "-")
    out = root / probe_dir(params) / slug
    fdir = root / features_dir(params)
    shard = fdir / f"{slug}.parquet"
    result = ProbeResult(sae_id=sid, rollouts=len(keys), out_dir=out)
    if (out / "report.json").is_file() and shard.is_file():
        result.skipped = True
        result.quality = json.loads((out / "report.json").read_text())["quality"]
        return result
    (root / probe_dir(params)).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".work-", dir=root / probe_dir(params)) as work:
        res = train_and_extract(Path(pol.model.path), keys, items, cfg=cfg, sae_id=sid, work_dir=Path(work))
    result.tokens, result.rows, result.quality = res.tokens, res.table.num_rows, res.quality
    result.seconds = {**res.seconds, "total": round(time.perf_counter() - t0, 1)}
    save(out, res, report={"sae_id": sid, "policy": pol.name, "policy_id": pol.policy_id,
                           "model_revision": pol.model.revision, "rollouts": len(keys), "seconds": result.seconds})
    table = res.table
    claim_table_dir(fdir, name="features")
    write_table(table, shard, name="features")
    return result


def train_and_extract(model_dir: Path, keys, items, *, cfg: ProbeConfig, sae_id: str, work_dir: Path,
                      n_examples: int = 16) -> Trained:
    """Activations of ``items`` into ``work_dir``, both SAEs trained, the features table and top-activating spans."""
    t0 = time.perf_counter()
    store = activations.collect(model_dir, items, layer=cfg.layer, out_dir=work_dir, batch_tokens=cfg.batch_tokens,
                                max_completion_tokens=cfg.max_completion_tokens)
    t1 = time.perf_counter()
    scale = scale_factor(store.acts)
    x = np.asarray(store.acts, dtype=np.float32) * scale  # the training set, in memory: tokens x d_model x 4 bytes
    models, logs, quality = {}, {}, {}
    for kind in ("tsae", "plain"):
        scfg = dataclasses.replace(cfg.sae, kind=kind)
        models[kind], logs[kind] = sae.train_sae(x, store.starts, store.lengths, scfg, log_every=100)
        quality[kind] = sae.quality(models[kind], x, store.starts, store.lengths)
    t2 = time.perf_counter()
    codes = sae.encode_all(models["tsae"], x)[:, : cfg.sae.n_high]
    table = feature_rows(codes, starts=store.starts, lengths=store.lengths, answer_mask=store.answer_mask,
                         keys=keys, sae=sae_id, top_k=cfg.top_k)
    examples = _decode(top_examples(codes, store, table, n_features=n_examples, per_feature=3), store.token_ids,
                       model_dir)
    store.acts = None  # the memmap's file goes with work_dir
    return Trained(config=cfg, models=models, logs=logs, quality=quality, table=table, examples=examples,
                   tokens=len(x), scale=scale, codes=codes, store=store,
                   seconds={"activations": round(t1 - t0, 1), "training": round(t2 - t1, 1)})


def top_examples(codes: np.ndarray, store, table, *, n_features: int, per_feature: int) -> dict:
    """For the features most often in a rollout's top list: the token windows where each fires hardest (one per
    rollout), as (rollout index, token row, activation, first row, last row)."""
    feats, counts = np.unique(table.column("feature").to_numpy(), return_counts=True)
    chosen = feats[np.argsort(-counts, kind="stable")][:n_features]
    out = {}
    for f in chosen:
        rows = []
        for seq, t in spans.top_rows(codes[:, f], store.lengths, n=per_feature):
            lo, hi = spans.window(store.starts, store.lengths, seq, t)
            rows.append((seq, t, float(codes[t, f]), lo, hi))
        out[int(f)] = {"rollouts_in_top": int(counts[feats == f][0]), "spans": rows}
    return out


def _decode(examples: dict, token_ids: np.ndarray, model_dir: Path) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    out = {}
    for f, ex in examples.items():
        shown = []
        for _, t, act, lo, hi in ex["spans"]:
            shown.append({"activation": round(act, 3), "text": spans.text(tok, token_ids, lo, t, hi)})
        out[str(f)] = {"rollouts_in_top": ex["rollouts_in_top"], "spans": shown}
    return out


def save(out: Path, res: Trained, *, report: dict) -> None:
    """Weights (safetensors) and report.json (``report`` plus config, quality, examples, loss logs) in a temp folder
    renamed into place."""
    from safetensors.torch import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        report = {**report, "config": res.config.identity(), "tokens": res.tokens, "scale": res.scale,
                  "quality": res.quality, "examples": res.examples, "loss_log": res.logs}
        for kind, m in res.models.items():
            save_file({k: v.detach().contiguous() for k, v in m.state_dict().items()}, str(tmp / f"{kind}.safetensors"))
        write_json(tmp / "report.json", report)
        if out.exists():  # an earlier, unfinished or older report of this sae_id: only a folder of ours is replaced
            if not (out / "report.json").is_file() or out.is_symlink():
                raise ProbeError(f"{out} is in the way and holds no report.json of passband's: move it away")
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


__all__ = ["ProbeConfig", "ProbeError", "ProbeResult", "probe_dir", "run"]
