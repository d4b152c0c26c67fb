"""Does the trainer's sampler draw what passband's measurement drew? The base policy, two engines, same items.

The arms' items were measured with vLLM (8 samples an item, the policy's sampling, cut at its stop string);
GRPO samples them with transformers' ``generate``, as TRL's GRPOTrainer does (the prompt's tokens with no
special tokens added, ``do_sample``, the same temperature, top_p 1, top_k 0, generation ended by the
newline tokens). This samples ``--k`` completions an item the trainer's way from the *untrained* model, grades
them with passband's ``judge_many``, and prints beside the pool measurement: mean pass rate, distinct texts per
group of 8, the share of groups of 8 with a signal, and the mean absolute difference of per-item pass rates
(with the difference two halves of the transformers samples show, the noise floor). Agreement means a fall in
the groups' signal during training is the policy moving, not the engines differing.

    .venv/bin/python experiments/band_value/engine_agreement.py [--arm learnable] [--k 16] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import duckdb
import torch
import yaml
from signal_calibration import measured_dir  # beside this script
from transformers import AutoModelForCausalLM, AutoTokenizer

from pipeline.config import load_params
from pipeline.rollout.policy import resolve_policy
from pipeline.verify import judge_many

HERE = Path(__file__).resolve().parent
GROUP = 8


def items(cfg: dict, arm: str, root: Path = HERE) -> list[dict]:
    seen: dict[str, dict] = {}
    for draw in cfg["draws"]:
        for line in (root / "data" / "arms" / f"d{draw}" / f"{arm}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            seen.setdefault(r["problem_id"], r)
    return list(seen.values())


def measured(cfg: dict, arm: str, ids: list[str], root: Path = HERE) -> dict[str, list[str]]:
    """The measurement's completions of each item (vLLM, base policy)."""
    src = measured_dir(root, cfg, arm, "rollouts")
    rows = duckdb.connect().execute(
        f"SELECT problem_id, completion FROM read_parquet('{src}/**/*.parquet') WHERE problem_id IN "
        f"(SELECT unnest(?)) ORDER BY problem_id, sample_idx", [ids]).fetchall()
    out: dict[str, list[str]] = {}
    for pid, c in rows:
        out.setdefault(pid, []).append(c)
    return out


def sample_like_trl(model, tok, prompt: str, *, k: int, temperature: float, max_new: int, eos: list[int],
                    stop: str) -> list[str]:
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].repeat(k, 1)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=temperature,
                             top_p=1.0, top_k=0, max_new_tokens=max_new, eos_token_id=eos,
                             pad_token_id=tok.pad_token_id)
    texts = tok.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
    return [t.split(stop, 1)[0] for t in texts]


def summary(texts: dict[str, list[str]], golds: dict[str, str]) -> dict:
    pairs = [(golds[pid], t) for pid, ts in texts.items() for t in ts]
    verdicts = iter(judge_many(pairs))
    rates, distinct, signal, groups = {}, 0, 0, 0
    for pid, ts in texts.items():
        ok = [next(verdicts).status == "correct" for _ in ts]
        rates[pid] = sum(ok) / len(ok)
        for i in range(0, len(ts) - GROUP + 1, GROUP):
            groups += 1
            distinct += len(set(ts[i:i + GROUP]))
            signal += 0 < sum(ok[i:i + GROUP]) < GROUP
    return {"rates": rates, "groups": groups, "pass_rate": sum(rates.values()) / len(rates),
            "distinct_per_group": distinct / groups, "signal_share": signal / groups}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", default="learnable", help="whose items (band_value.yaml arms; both draws)")
    parser.add_argument("--k", type=int, default=16, help="transformers samples an item (a multiple of 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    params = load_params(HERE / "params.yaml")
    name = params.rollout.policies[0]
    pol = resolve_policy(name, params.policies[name], models_dir=HERE / params.paths.models)
    tok = AutoTokenizer.from_pretrained(pol.model.path)
    model = AutoModelForCausalLM.from_pretrained(pol.model.path, dtype=torch.float32).eval()
    (stop,) = pol.sampling.stop
    eos = sorted(i for t, i in tok.get_vocab().items() if stop in tok.convert_tokens_to_string([t]))
    cfg = yaml.safe_load((HERE / "band_value.yaml").read_text(encoding="utf-8"))
    rows = items(cfg, args.arm)
    golds = {r["problem_id"]: r["answer"] for r in rows}
    t0 = time.perf_counter()
    trl = {r["problem_id"]: sample_like_trl(model, tok, pol.render(r["question"]).text, k=args.k,
                                            temperature=pol.sampling.temperature, max_new=pol.sampling.max_tokens,
                                            eos=eos, stop=stop) for r in rows}
    seconds = time.perf_counter() - t0
    vllm = measured(cfg, args.arm, list(golds))
    a, b = summary(vllm, golds), summary(trl, golds)
    half1 = summary({p: t[: args.k // 2] for p, t in trl.items()}, golds)
    half2 = summary({p: t[args.k // 2:] for p, t in trl.items()}, golds)
    diff = sum(abs(a["rates"][p] - b["rates"][p]) for p in golds) / len(golds)
    floor = sum(abs(half1["rates"][p] - half2["rates"][p]) for p in golds) / len(golds)
    print(f"{args.arm}: {len(rows)} items; transformers {args.k} samples an item in {seconds:.0f}s\n")
    print("| engine | samples / item | mean pass rate | distinct texts / 8 | groups of 8 with a signal |")
    print("|---|---|---|---|---|")
    for label, s, k in (("vLLM (the measurement)", a, GROUP), ("transformers as TRL (base model)", b, args.k)):
        print(f"| {label} | {k} | {s['pass_rate']:.3f} | {s['distinct_per_group']:.2f} | "
              f"{s['signal_share']:.2f} ({s['groups']} groups) |")
    print(f"\nmean |pass rate difference| per item: vLLM 8 vs transformers {args.k}: {diff:.3f}; "
          f"transformers half vs half ({args.k // 2} each): {floor:.3f}")


if __name__ == "__main__":
    main()
