"""Shared pytest fixtures. Each block belongs to one stage's tests; add yours as a new block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Every Ray these tests start (a local one, a LocalCluster on 127.0.0.1) runs without Ray's token
# authentication. The driver reads RAY_AUTH_MODE once per process; a value that changes between two
# Ray sessions of one process (LocalCluster sets it) makes the later session's GCS and driver disagree:
# its actors are cancelled before they run, or its GCS refuses the driver.
os.environ["RAY_AUTH_MODE"] = "disabled"


# --- rollout: the embedded model and one real vLLM engine per session -------------------------
# Real-engine tests are marked `engine`; run them under `flock /tmp/passband-engine.lock` on a
# shared machine. The engine is small (8 sequences, 512 tokens, 1 GiB KV cache) and started once.


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The converted embedded checkpoint at data/models/smollm2-135m-instruct (what `passband prepare-model` writes).

    Converted here when missing (about 30 s); a checkpoint for the same GGUF digest is reused.
    """
    from pipeline.model import convert_gguf, find_embedded_gguf
    from pipeline.rollout.policy import EMBEDDED_DIR

    out = REPO / "data" / "models" / EMBEDDED_DIR
    convert_gguf(find_embedded_gguf(), out)
    return out


@pytest.fixture(scope="session")
def vllm_engine(embedded_model_dir):
    """A started `vllm` engine on the embedded model, shared by every test of the session."""
    from pipeline.engines.registry import ModelSpec, create_engine
    from pipeline.model import read_manifest

    m = read_manifest(embedded_model_dir)
    spec = ModelSpec(m["model_id"], str(embedded_model_dir), m["revision"], "float32")
    engine = create_engine("vllm", spec, {"max_num_seqs": 8, "max_model_len": 512, "kv_cache_gib": 1}, root=REPO)
    engine.start()
    yield engine
    engine.close()


# --- verify / annotate: stage runs on the session engine ------------------------------------------


@pytest.fixture(scope="session")
def shared_engine_factory(vllm_engine, embedded_model_dir):
    """An ``engine_factory`` for ``pipeline.rollout.run`` that hands out the session's vLLM engine (never closing it)."""

    class Shared:
        def __call__(self, name, model, options, root):
            assert name == "vllm" and model.path == str(embedded_model_dir)
            return self

        def start(self):
            return 0.0

        def close(self):
            pass

        def __getattr__(self, attr):
            return getattr(vllm_engine, attr)

    return Shared()
