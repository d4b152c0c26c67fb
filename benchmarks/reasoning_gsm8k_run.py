"""Build the four reasoning models' GSM8K run (docs/tables.md, docs/flags.md) from the fetched benchmark files.

    python benchmarks/reasoning_gsm8k_run.py FETCHED OUT
    cd OUT && passband ingest && passband rollout && passband verify && passband annotate --no-plots && passband summary
    python benchmarks/gold_suspicion.py --root OUT --draws 200 [--review-precision 0.5]

FETCHED holds ``thinking-llms-interp__benchmark_results_<name>_gsm8k.json`` (thaotnguyen/thinking-llms-interp@501921e,
``hybrid/results/``; the four GSM8K files). OUT gets one ``plain`` dump per thinking model (DeepSeek-R1-Distill
Llama-8B, Qwen-1.5B and Qwen-32B, QwQ-32B; one sample a problem), the problems file and a params.yaml that imports
them with the ``r1_distill`` prompt (so a completion cut inside its thinking is no answer). Keys are GSM8K's
``#### value``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

MODELS = {  # file name part -> (policy, model)
    "llama-3.1-8b": ("r1-llama-8b", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"),
    "qwen2.5-32b-on-deepseek-r1-distill-qwen-32b": ("r1-qwen-32b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
    "qwen2.5-32b": ("qwq-32b", "Qwen/QwQ-32B"),
    "qwen2.5-math-1.5b": ("r1-qwen-1.5b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"),
}
PREFIX, SUFFIX = "thinking-llms-interp__benchmark_results_", "_gsm8k.json"


def gold(answer) -> str:
    """A GSM8K solution's ``#### value``, separators removed; any other answer as written."""
    answer = str(answer)
    return answer.split("####")[-1].strip().replace(",", "") if "####" in answer else answer


def build(fetched: Path, out: Path) -> dict:
    (out / "dumps").mkdir(parents=True, exist_ok=True)
    policies, problems = {}, {}
    for part, (name, model) in MODELS.items():
        path = fetched / f"{PREFIX}{part}{SUFFIX}"
        if not path.exists():
            raise SystemExit(f"{path} is missing: fetch it from thaotnguyen/thinking-llms-interp@501921e hybrid/results/")
        rows = []
        for task in json.loads(path.read_text(encoding="utf-8"))["tasks"]:
            text = task["model_answers"].get("thinking_model")
            problems.setdefault(task["question"], gold(task["correct_answer"]))
            if isinstance(text, str):
                rows.append({"question": task["question"], "answer": gold(task["correct_answer"]), "completions": [text]})
        (out / "dumps" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        policies[name] = {"model": model, "revision": "as-published", "prompt": "r1_distill",
                          "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 5000},
                          "dump": {"path": f"dumps/{name}.jsonl", "layout": "plain"}}
    (out / "dumps" / "problems.jsonl").write_text(
        "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in problems.items()), encoding="utf-8")
    params = {"ingest": {"sources": [{"name": "gsm8k", "kind": "jsonl", "path": "dumps/problems.jsonl", "split": "test",
                                      "mapping": {"question": "question", "answer": "answer"}}]},
              "policies": policies, "rollout": {"policies": list(policies), "k": 1}}
    (out / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fetched", type=Path, help="the folder holding the fetched benchmark files")
    ap.add_argument("out", type=Path, help="the run's folder (created)")
    args = ap.parse_args()
    params = build(args.fetched, args.out)
    print(f"{args.out}: {len(params['policies'])} policies; now run the stages there (see this file's doc)")


if __name__ == "__main__":
    main()
