"""The 342 real SmolLM2-135M completions (tests/data/embedded_completions.jsonl) as a measured table set.

Two prompt styles become two policies (``pol_fewshot``, ``pol_chat_boxed``); the problems, rollouts and
policies tables are written under ``root/data``, then passband's verify and annotate stages run on them.
The docs test's catalog (README's ``passband summary``) and ``benchmarks/probe_embedded.py`` both use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "tests" / "data" / "embedded_completions.jsonl"


def build(root: Path):
    """Write the set under ``root`` and measure it; the params and the rollout rows (each with its question and style)."""
    from pipeline import annotate, verify
    from pipeline.config import load_params
    from pipeline.io import write_table
    from pipeline.keys import problem_id
    from pipeline.schema import schema

    # a generous verify timeout: every completion grades in well under a second, but on a loaded box 2 s turned
    # 3 to 12 of the 342 into `timeout` verdicts, and the README's summary (a checked output) changed with the load
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
              "policies": {"p": {"model": "embedded"}}, "rollout": {"policies": ["p"]},
              "verify": {"workers": 2, "timeout_s": 30.0}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    probs, rolls, seen = {}, [], {}
    for r in (json.loads(line) for line in COMPLETIONS.read_text().splitlines()):
        pid = problem_id(r["question"])
        probs.setdefault(pid, {"problem_id": pid, "source": r["source"], "source_id": pid, "question": r["question"],
                               "answer": r["gold"], "n_duplicates": 0})
        pol = f"pol_{r['style']}"
        idx = seen.setdefault((pid, pol), [0])
        rolls.append({"problem_id": pid, "policy_id": pol, "sample_idx": idx[0], "seed": idx[0],
                      "completion": r["completion"], "n_tokens": r["n_tokens"], "finish_reason": r["finish_reason"],
                      "question": r["question"], "style": r["style"]})
        idx[0] += 1
    columns = schema("rollouts").names
    write_table(schema("problems").from_rows(list(probs.values())), root / "data/problems/part-0.parquet", name="problems")
    write_table(schema("rollouts").from_rows([{k: r[k] for k in columns} for r in rolls]),
                root / "data/rollouts/part-0.parquet", name="rollouts")
    pols = [{"policy_id": f"pol_{style}", "name": f"smollm2-{style}", "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
             "revision": "gguf", "engine": "vllm", "dtype": "float32", "temperature": 0.8, "top_p": 1.0, "top_k": -1,
             "max_tokens": 48, "stop": [], "prompt_template": style, "prompt_version": "1", "prompt_digest": "d",
             "chat": style != "fewshot", "identity": "{}"} for style in ("fewshot", "chat_boxed")]
    write_table(schema("policies").from_rows(pols), root / "data/policies/part-0.parquet", name="policies")
    p = load_params(root / "params.yaml")
    verify.run(p, root=root, progress=False)
    annotate.run(p, root=root, progress=False)
    return p, rolls
