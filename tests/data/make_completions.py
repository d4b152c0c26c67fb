"""Sample real completions of the embedded model for the verify golden table.

    flock /tmp/passband-engine.lock .venv/bin/python tests/data/make_completions.py

Writes ``tests/data/embedded_completions.jsonl`` (one row per completion: source, prompt style,
question, gold, completion, finish_reason). ``verify_golden.jsonl`` was grown from these rows:
each golden case quotes one real completion and the status a careful reader gives it.
Two prompt styles: the 3-shot ``Q:/A:`` arithmetic style ("... The answer is 8.") and a chat
turn asking for ``\\boxed{}``, on synthetic, GSM8K and MATH problems.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pipeline.engine_support.vllm_env import configure_cpu_env  # noqa: E402

FEWSHOT = (
    "Q: What is 2 + 3?\nA: 2 + 3 = 5. The answer is 5.\n\n"
    "Q: Tom has 4 apples. He buys 3 more. How many apples does Tom have now?\nA: 4 + 3 = 7. The answer is 7.\n\n"
    "Q: What is 6 * 7?\nA: 6 * 7 = 42. The answer is 42.\n\n"
)


def main() -> None:
    import polars as pl

    problems = pl.read_parquet(REPO / "data/problems/*.parquet")
    rng = random.Random(0)
    picks = []
    for src, n in (("synthetic", 40), ("gsm8k_test", 16), ("math_train", 16)):
        rows = problems.filter(pl.col("source") == src).to_dicts()
        picks += [(src, r) for r in rng.sample(rows, min(n, len(rows)))]
    configure_cpu_env(cache_root=REPO / "data" / "cache" / "vllm")
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(REPO / "data/models/smollm2-135m-instruct"), dtype="float32", seed=0,
              max_model_len=2048, max_num_seqs=32, enforce_eager=True)
    tok = llm.get_tokenizer()
    prompts, meta, params = [], [], []
    for i, (src, r) in enumerate(picks):
        styles = [("fewshot", FEWSHOT + f"Q: {r['question']}\nA:", ["\nQ:", "\n\n"])]
        if src != "synthetic" or i % 4 == 0:
            msg = [{"role": "user", "content": r["question"] + "\nPut the final answer in \\boxed{}."}]
            styles.append(("chat_boxed", tok.apply_chat_template(msg, tokenize=False, add_generation_prompt=True), []))
        for style, prompt, stop in styles:
            for j in range(3):
                prompts.append(prompt)
                meta.append({"source": src, "style": style, "question": r["question"], "gold": r["answer"]})
                params.append(SamplingParams(temperature=0.8, max_tokens=96 if style == "fewshot" else 192,
                                             stop=stop, seed=1000 * i + j))
    outs = llm.generate(prompts, params, use_tqdm=False)
    with open(REPO / "tests/data/embedded_completions.jsonl", "w") as fh:
        for m, o in zip(meta, outs, strict=True):
            c = o.outputs[0]
            fh.write(json.dumps({**m, "completion": c.text, "n_tokens": len(c.token_ids),
                                 "finish_reason": c.finish_reason}) + "\n")


if __name__ == "__main__":
    main()
