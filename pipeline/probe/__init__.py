"""The probe: a temporal sparse autoencoder (T-SAE) over one policy's own rollouts, and per-rollout features.

``passband probe`` (docs/probe.md) runs, for one policy of params.yaml:

1. teacher-forced forward passes of each rollout (its prompt, rendered as the rollout stage renders it,
   then its completion) through the policy's checkpoint with transformers, keeping the residual stream
   entering layer ``layer`` on the completion's tokens (:mod:`pipeline.probe.activations`, a memmap);
2. a T-SAE and a plain TopK SAE trained on those activations (:mod:`pipeline.probe.sae`), saved under
   ``probe/<sae_id>/`` beside the tables (``data/probe``) with their quality report;
3. the ``features`` table (schemas/features.yaml): each rollout's top high-level features, one shard per
   sae_id under ``data/features`` (:mod:`pipeline.probe.core`).

A second run with the same config, model and rollouts finds its sae_id's shard and report and does nothing.
The probe is not a stage of the main ``dvc.yaml`` (it would push the main job past its time budget).
"""

from __future__ import annotations

from pipeline.errors import require_extra

# torch & co. come with the ``probe`` extra, not with passband itself: without them, importing the probe is one
# line that names the extra (the CLI shows it for ``passband probe``), not a traceback from deep inside sae.py
require_extra("probe", "passband probe", "torch", "transformers", "safetensors")

from pipeline.probe.report_stage import run as run_report  # noqa: E402
from pipeline.probe.sae import SAEConfig  # noqa: E402
from pipeline.probe.stage import ProbeConfig, ProbeError, ProbeResult, probe_dir, run, train_and_extract  # noqa: E402

__all__ = ["ProbeConfig", "ProbeError", "ProbeResult", "SAEConfig", "probe_dir", "run", "run_report",
           "train_and_extract"]
