"""Tiny tables for the publish tests: a repository folder with its own params.yaml.

Main set: 12 problems from four sources (synthetic, gsm8k train/test, math), 11 measured by the
primary policy (one left unmeasured) and 5 also by a second policy; reformulated set: 3 rewrites
of hard items, 2 measured. Bands under the primary policy (k = 8):

    train: too_easy 2, learnable 3, too_hard 2, unsolved 2     test: learnable 1, too_easy 1
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from shared_data import shared_path

from pipeline.io import read_table, write_table
from pipeline.schema import schema

PRIMARY = "smollm2-135m-3shot"
PRIMARY_ID = "pol_aaaaaaaaaaaaaaaa"
OTHER = "qwen-0.5b-zeroshot"
OTHER_ID = "pol_bbbbbbbbbbbbbbbb"
VERIFIER = "math-verify/0.8.0/cfg_0123456789ab"
K = 8

# problem_id, source, split, question, answer, n_correct under the primary policy (None: unmeasured)
MAIN = [
    ("p_0000000000000001", "synthetic", "train", "What is 3 + 5?", "8", 8),
    ("p_0000000000000002", "synthetic", "train", "What is 4 * 2?", "8", 7),
    ("p_0000000000000003", "synthetic", "train", "What is 52 - 27?", "25", 4),
    ("p_0000000000000004", "synthetic", "train", "What is 17 + 26?", "43", 2),
    ("p_0000000000000005", "gsm8k_train", "train", "Mia has 14 pens. She buys 9 more. How many pens?", "23", 3),
    ("p_0000000000000006", "gsm8k_train", "train", "A train goes 60 km/h for 2 h. How far?", "120", 1),
    ("p_0000000000000007", "gsm8k_train", "train", "Tom reads 5 pages a day for 6 days. Pages?", "30", 0),
    ("p_0000000000000008", "gsm8k_test", "test", "What is 9 + 9?", "18", 8),
    ("p_0000000000000009", "gsm8k_test", "test", "Ann has 3 bags of 4 apples. Apples?", "12", 5),
    ("p_000000000000000a", "math_train", "train", "Compute $\\frac{1}{2}+\\frac{1}{4}$.", "\\frac{3}{4}", 1),
    ("p_000000000000000b", "math_train", "train", "Find $x$ if $2x = 10$.", "5", 0),
    ("p_000000000000000c", "math_train", "train", "What is $\\sqrt{49}$?", "7", None),
]
REFORM = [  # problem_id, parent_id, method, question, answer, n_correct
    ("p_00000000000000r1", "p_0000000000000007", "fobar", "Tom reads X pages a day for 6 days: 30 pages. X?", "5", 3),
    ("p_00000000000000r2", "p_000000000000000b", "hint_prefix", "Hint: divide by 2. Find $x$ if $2x = 10$.", "5", 6),
    ("p_00000000000000r3", "p_000000000000000a", "fobar", "Find X if 1/2 + X = 3/4.", "\\frac{1}{4}", None),
]
OTHER_MEASURED = {"p_0000000000000003": 8, "p_0000000000000005": 6, "p_0000000000000006": 4,
                  "p_0000000000000007": 2, "p_000000000000000b": 1}

EXPECTED = {  # config -> split -> rows
    "default": {"train": 9, "test": 2},
    "too_easy": {"train": 2, "test": 1},
    "learnable": {"train": 3, "test": 1},
    "too_hard": {"train": 2},
    "unsolved": {"train": 2},
    "reformulated": {"train": 2},
}


def band(c: int, n: int = K) -> str:
    p = c / n
    if c == 0:
        return "unsolved"
    if p < 0.2:
        return "too_hard"
    return "learnable" if p <= 0.8 else "too_easy"


def difficulty_row(pid: str, pol: str, c: int, *, flags: dict[str, float] | None = None) -> dict:
    p = c / K
    return {
        "problem_id": pid, "policy_id": pol, "verifier_id": VERIFIER, "n": K, "n_correct": c, "n_no_answer": 0,
        "n_failed": 0, "pass_rate": p, "ci_low": max(0.0, p - 0.3), "ci_high": min(1.0, p + 0.3),
        "pass_at_k": [(1, p), (8, 1.0 if c else 0.0)], "learnability": p * (1 - p), "band": band(c),
        "band_confidence": 0.9, "mean_tokens_correct": 12.0 if c else None, "std_tokens_correct": None,
        "mean_tokens_incorrect": 20.0 if c < K else None, "std_tokens_incorrect": None,
        "flag_rates": list((flags or {"rare_success": 0.125 if c == 1 else 0.0}).items()),
        "flagged_correct_rate": (1.0 if c == 1 else 0.0) if c else None,
        "budget": f"fixed(k={K})", "stop_reason": "fixed", "prior_policy_id": None,
    }


def policy_row(pol: str, name: str, model: str, template: str, version: str) -> dict:
    return {
        "policy_id": pol, "name": name, "model": model, "revision": "sha256:" + "0" * 12, "engine": "vllm",
        "dtype": "float32", "temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 48, "stop": ["\nQ:"],
        "prompt_template": template, "prompt_version": version, "prompt_digest": "d" * 16, "system_prompt": None,
        "chat": template != "fewshot_arith", "identity": json.dumps({"model": model}),
    }


def problem_row(pid, source, split, question, answer, *, parent=None, method=None) -> dict:
    return {
        "problem_id": pid, "source": source, "source_id": f"{source}:1", "split": split, "question": question,
        "answer": answer, "solution": f"so the answer is \\boxed{{{answer}}}" if source.startswith("math") else None,
        "subject": "Algebra" if source.startswith("math") else None, "level": None, "n_duplicates": 0,
        "parent_id": parent, "method": method, "method_version": "1" if method else None, "metadata": None,
    }


def params_dict(**publish) -> dict:
    return {
        "ingest": {"sources": [
            {"name": "synthetic", "kind": "synthetic", "split": "train"},
            {"name": "gsm8k_train", "kind": "gsm8k", "path": "src/gsm8k/train.jsonl", "split": "train"},
            {"name": "gsm8k_test", "kind": "gsm8k", "path": "src/gsm8k/test.jsonl", "split": "test"},
            {"name": "math_train", "kind": "math", "path": "src/math/train.jsonl", "split": "train"},
        ]},
        "policies": {PRIMARY: {"model": "embedded", "prompt": "fewshot_arith"},
                     OTHER: {"model": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "abc", "prompt": "zeroshot_boxed"}},
        "rollout": {"policies": [PRIMARY], "k": K},
        "publish": {"licenses": {"gsm8k": "mit", "math": "mit", "synthetic": "apache-2.0"},
                    "exports": ["default", "learnable", "reformulated"], **publish},
    }


def make_repo(root: Path, **publish) -> Path:
    """Write params.yaml, the sources' LICENSE files and every table publish reads; returns root."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params_dict(**publish), sort_keys=False))
    for kind in ("gsm8k", "math"):
        (root / "src" / kind).mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_path(f"{kind}/LICENSE"), root / "src" / kind / "LICENSE")
    problems = [problem_row(pid, src, split, q, a) for pid, src, split, q, a, _ in MAIN]
    diff = [difficulty_row(pid, PRIMARY_ID, c) for pid, *_, c in MAIN if c is not None]
    diff += [difficulty_row(pid, OTHER_ID, c) for pid, c in OTHER_MEASURED.items()]
    pols = [policy_row(PRIMARY_ID, PRIMARY, "HuggingFaceTB/SmolLM2-135M-Instruct", "fewshot_arith", "1"),
            policy_row(OTHER_ID, OTHER, "Qwen/Qwen2.5-0.5B-Instruct", "zeroshot_boxed", "1")]
    write_table(schema("problems").from_rows(problems), root / "data/problems/part-0.parquet", name="problems")
    write_table(schema("difficulty").from_rows(diff), root / "data/difficulty/part-0.parquet", name="difficulty")
    write_table(schema("policies").from_rows(pols), root / "data/policies/part-0.parquet", name="policies")
    rp = [problem_row(pid, method, None, q, a, parent=parent, method=method) for pid, parent, method, q, a, _ in REFORM]
    rd = [difficulty_row(pid, PRIMARY_ID, c) for pid, *_, c in REFORM if c is not None]
    base = root / "data/reformulated"
    write_table(schema("problems").from_rows(rp), base / "problems/part-0.parquet", name="problems")
    write_table(schema("difficulty").from_rows(rd), base / "difficulty/part-0.parquet", name="difficulty")
    write_table(schema("policies").from_rows(pols[:1]), base / "policies/part-0.parquet", name="policies")
    return root


def mark_suspect_gold(root: Path, pid: str = "p_0000000000000007", modal: str = "35", *, score: float = 0.97,
                      suspect: bool = True) -> str:
    """Make the primary policy's rollouts doubt ``pid``'s gold (gold_suspect, as annotate writes it when most rollouts
    agree on ``modal``, not the gold): what the report's suspect-gold section and filter show."""
    path = root / "data/difficulty/part-0.parquet"
    rows = read_table(path.parent, name="difficulty").to_pylist()
    hit = 0
    for r in rows:
        if r["problem_id"] == pid and r["policy_id"] == PRIMARY_ID:
            r.update(gold_suspicion=score, gold_suspect=suspect, modal_answer=modal, modal_share=0.875)
            hit += 1
    assert hit == 1, f"{pid} has no row of the primary policy"
    write_table(schema("difficulty").from_rows(rows), path, name="difficulty")
    return pid
