"""The probe's pure core: the SAE id, activation scaling, answer spans and the per-rollout ``features`` rows.

Given completion-token activations (:mod:`pipeline.probe.activations`) and a trained T-SAE
(:mod:`pipeline.probe.sae`), :func:`feature_rows` keeps, per rollout, the ``top_k`` high-level latents with the
highest mean activation over the completion's tokens, with their mean over the answer's tokens::

    {"problem_id": "p_...", "policy_id": "pol_...", "sample_idx": 0, "sae_id": "tsae-L15/3f1c0a9e2b7d",
     "feature": 41, "rank": 1, "mean_completion": 0.83, "mean_answer": 1.92, "max_completion": 3.1, "n_tokens": 15}
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.errors import PassbandError
from pipeline.keys import canonical_json, digest
from pipeline.probe.sae import SAEConfig
from pipeline.schema import schema
from pipeline.verify.core import source_digest

# the modules whose code decides a feature: editing one is a new sae_id (as VERDICT_MODULES for verifier_id)
PROBE_MODULES = ("pipeline.probe.activations", "pipeline.probe.sae", "pipeline.probe.core")

Key = tuple[str, str, int]  # problem_id, policy_id, sample_idx


class ProbeError(PassbandError):
    """The probe cannot run as asked (an unknown policy, no rollouts, a layer the model does not have)."""


@dataclass(frozen=True)
class ProbeConfig:
    layer: int = 15  # residual stream entering this decoder layer (SmolLM2-135M has 30)
    top_k: int = 8  # high-level features kept per rollout
    max_completion_tokens: int = 256
    batch_tokens: int = 4096
    sae: SAEConfig = field(default_factory=SAEConfig)

    def identity(self) -> dict:
        d = asdict(self)
        d.pop("batch_tokens")  # how many rows a forward pass takes changes no activation
        return d


def code_digest() -> str:
    return source_digest({m: Path(importlib.import_module(m).__file__).read_text() for m in PROBE_MODULES})


def rollouts_digest(keys: Sequence[Key], completions: Sequence[str]) -> str:
    """Digest of the training rollouts: their keys and texts, in key order."""
    rows = sorted((k, digest(c)) for k, c in zip(keys, completions, strict=True))
    return digest(canonical_json([[*k, d] for k, d in rows]))


def sae_id(cfg: ProbeConfig, *, model_revision: str, rollouts: str, kind: str = "tsae") -> str:
    """``<kind>-L<layer>/<digest>``: the layer readable; the config, the model's revision, the training rollouts'
    digest and the probe's code hashed."""
    identity = {"config": cfg.identity(), "kind": kind, "model_revision": model_revision, "rollouts": rollouts,
                "code": code_digest()}
    return f"{kind}-L{cfg.layer}/{digest(canonical_json(identity), length=12)}"


def scale_factor(acts: np.ndarray, *, sample: int = 65536, seed: int = 0) -> float:
    """The factor that gives the activations a mean squared norm of d_model (sae-lens's "expected_average_only_in")."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(acts), size=min(sample, len(acts)), replace=False))
    x = np.asarray(acts[rows], dtype=np.float64)
    return float(np.sqrt(acts.shape[1] / (x ** 2).sum(1).mean()))


def answer_span(completion: str, extracted: str | None) -> tuple[int, int] | None:
    """Character span of the extracted answer's last occurrence in the completion, or None."""
    if not extracted:
        return None
    at = completion.rfind(extracted)
    return (at, at + len(extracted)) if at >= 0 else None


def feature_rows(codes_high: np.ndarray, *, starts: np.ndarray, lengths: np.ndarray, answer_mask: np.ndarray,
                 keys: Sequence[Key], sae: str, top_k: int) -> pa.Table:
    """The ``features`` table: per rollout, its ``top_k`` high-level features by mean activation (ties: lower index),
    only features active on some token of the completion."""
    rows = []
    for i, (pid, pol, idx) in enumerate(keys):
        n = int(lengths[i])
        if n == 0:
            continue
        c = codes_high[starts[i]: starts[i] + n]
        mean = c.mean(0)
        mx = c.max(0)
        ans = answer_mask[starts[i]: starts[i] + n]
        mean_ans = c[ans].mean(0) if ans.any() else None
        order = np.lexsort((np.arange(len(mean)), -mean))[:top_k]
        for rank, f in enumerate(order, start=1):
            if mx[f] <= 0:
                break
            rows.append({"problem_id": pid, "policy_id": pol, "sample_idx": int(idx), "sae_id": sae,
                         "feature": int(f), "rank": rank, "mean_completion": float(mean[f]),
                         "mean_answer": None if mean_ans is None else float(mean_ans[f]),
                         "max_completion": float(mx[f]), "n_tokens": n})
    return schema("features").from_rows(rows)
