"""Shared pytest fixtures. Each block belongs to one stage's tests; add yours as a new block."""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The tests' helpers and generators live in tests/support (docs/operations.md, "Tests"); the tests import them by
# their plain names, as when they sat beside them.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# Every Ray these tests start (a local one, a LocalCluster on 127.0.0.1) runs without Ray's token
# authentication. The driver reads RAY_AUTH_MODE once per process; a value that changes between two
# Ray sessions of one process (LocalCluster sets it) makes the later session's GCS and driver disagree:
# its actors are cancelled before they run, or its GCS refuses the driver.
os.environ["RAY_AUTH_MODE"] = "disabled"


# --- the suite on two processes (pytest-xdist, `-n 2 --dist loadgroup` in pyproject.toml) ---------
# Most tests use one core (Python, a subprocess waiting on another), so two workers nearly halve the
# suite on the 2-core box. A test file runs whole on one worker (its module fixtures, such as the
# differential corpus or the hostile suite's runs, are built once). The files that use the session's
# vLLM engine (the fixtures below) or start a Ray cluster (marked `ray`) share one lane, in order: one
# engine per run, never two Ray clusters at once. `-n 0` runs everything in one process.

ENGINE_LANE = "engine-lane"
SESSION_ENGINE_FIXTURES = frozenset({"vllm_engine", "shared_engine_factory"})


# A file's cost in seconds, for the order the groups are handed out in: the files whose time is mostly one test
# or a module fixture (the differential corpus, the hostile suite's runs), which a count of markers misjudges,
# at their wall time in a quiet run of the whole suite on two workers (28 Nov 2026, 14 min); any other file is
# priced by its markers. Only the order matters: a long file handed out last keeps one worker busy while the other
# idles.
MEASURED_S = {
    # the engine lane's heaviest files
    "test_engines_ray": 235, "test_rollout_engine": 160, "test_reformulate_engine": 55, "test_verify_engine": 50,
    "test_rollout_adaptive": 50, "test_verify_ray": 45, "test_rewards_callers": 20,
    # real engines (or TRL) of their own
    "test_band_value": 150, "test_faults_engine": 95, "test_train_recorder": 90, "test_engines_logs": 30,
    # module fixtures and long single tests
    "test_hostile_suite": 105, "test_faults": 75, "test_verify_differential": 70, "test_faults_dvc": 60,
    "test_dvc_reproducible": 45, "test_suite_under_load": 45, "test_rewards": 30, "test_ingest_sources": 30,
    "test_probe_reports": 20,
}


def _weight(item) -> float:
    """A rough cost in seconds: a real-engine test takes a minute, a slow one ten seconds, any other a fifth of one."""
    return 60.0 if item.get_closest_marker("engine") else 10.0 if item.get_closest_marker("slow") else 0.2


def group_costs(items, group: dict[str, str]) -> collections.Counter:
    """Each group's cost: its files' measured seconds (MEASURED_S) where listed, else their tests' weights."""
    per_file: collections.Counter = collections.Counter()
    for item in items:
        per_file[item.module.__name__] += _weight(item)
    per_file.update({name: MEASURED_S[name] - per_file[name] for name in per_file if name in MEASURED_S})
    files = {item.module.__name__: group[item.nodeid] for item in items}
    cost: collections.Counter = collections.Counter()
    for name, g in files.items():
        cost[g] += per_file[name]
    return cost


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    lane = {item.module.__name__ for item in items
            if SESSION_ENGINE_FIXTURES & set(item.fixturenames) or item.get_closest_marker("ray")}
    group = {item.nodeid: ENGINE_LANE if item.module.__name__ in lane else item.module.__name__ for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))
    # The heaviest groups first (xdist hands groups out in collection order with --no-loadscope-reorder), so
    # no long group starts last while the other worker idles; a group's tests keep their order.
    cost = group_costs(items, group)
    items.sort(key=lambda item: -cost[group[item.nodeid]])


# --- rollout: the embedded model and one real vLLM engine per session -------------------------
# Real-engine tests are marked `engine`; run them under `flock /tmp/passband-engine.lock` on a
# shared machine. The engine is small (8 sequences, 512 tokens, 1 GiB KV cache) and started once.


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The converted embedded checkpoint at data/models/smollm2-135m-instruct (what `passband prepare-model` writes).

    Converted here when missing (about 30 s); a checkpoint for the same GGUF digest is reused. Each xdist worker
    asks for it, under the lock `passband prepare-model` takes: the first converts it, the others find it done (two
    conversions at once would swap the folder under an engine reading it).
    """
    from pipeline.locks import hold
    from pipeline.model import convert_gguf, find_embedded_gguf
    from pipeline.rollout.policy import EMBEDDED_DIR

    out = REPO / "data" / "models" / EMBEDDED_DIR
    with hold(REPO, "prepare-model", wait_s=600):
        convert_gguf(find_embedded_gguf(), out)
    return out


@pytest.fixture(scope="session")
def vllm_engine(embedded_model_dir):
    """A started `vllm` engine on the embedded model, shared by every test of the session."""
    from pipeline.engines import ModelSpec, create_engine
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


# --- probe: a project folder holding real completions of the embedded model ------------------------


@pytest.fixture
def probe_project(embedded_model_dir, tmp_path):
    """``make(n)``: params.yaml in tmp_path with one policy ``p`` (the embedded model, few-shot prompt) and the first
    ``n`` few-shot completions of tests/data/embedded_completions.jsonl written as its problems and rollouts tables.
    Returns (params, policy, rollout rows)."""
    import json

    import yaml

    from pipeline.config import load_params
    from pipeline.io import write_table
    from pipeline.keys import problem_id
    from pipeline.rollout.policy import resolve_policy
    from pipeline.schema import schema

    def make(n: int):
        params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
                  "policies": {"p": {"model": "embedded", "prompt": "fewshot_arith"}}, "rollout": {"policies": ["p"]},
                  "paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]}}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        p = load_params(tmp_path / "params.yaml")
        pol = resolve_policy("p", p.policies["p"], models_dir=embedded_model_dir.parent)
        lines = (REPO / "tests/data/embedded_completions.jsonl").read_text().splitlines()
        rows = [r for r in map(json.loads, lines) if r["style"] == "fewshot"][:n]
        probs = {problem_id(r["question"]): {"problem_id": problem_id(r["question"]), "source": "synthetic",
                                             "source_id": "s", "question": r["question"], "answer": r["gold"],
                                             "n_duplicates": 0} for r in rows}
        rolls = [{"problem_id": problem_id(r["question"]), "policy_id": pol.policy_id, "sample_idx": i, "seed": i,
                  "completion": r["completion"], "n_tokens": r["n_tokens"], "finish_reason": r["finish_reason"]}
                 for i, r in enumerate(rows)]
        write_table(schema("problems").from_rows(list(probs.values())), tmp_path / "data/problems/part-0.parquet",
                    name="problems")
        write_table(schema("rollouts").from_rows(rolls), tmp_path / "data/rollouts/part-0.parquet", name="rollouts")
        return p, pol, rolls

    return make
