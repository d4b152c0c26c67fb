"""The probe's figures on real rollouts: a T-SAE and a plain SAE on the embedded SmolLM2-135M's own completions.

    nice -n 10 .venv/bin/python benchmarks/probe_embedded.py [--layer 15] [--latents 512] [--steps 1500] [--threads 2]

Inputs: the 342 real completions of tests/data/embedded_completions.jsonl (3 samples per problem, two prompt
styles as two policies), with the prompts tests/data/make_completions.py sampled them from, verified and
annotated by the verify and annotate stages in a temp folder (bands per problem and style). Prints the SAEs'
quality (fraction of variance explained, reconstruction cosine, L0, adjacent-token cosine of high-level codes),
the features most enriched per band (the feature_bands view) with the token spans that fire them hardest,
features in correct vs failed completions, and the flags a feature-based shortcut probe would need.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import embedded_set  # noqa: E402  (tests/support/embedded_set.py: the docs test's measured set)

FEWSHOT = (  # tests/data/make_completions.py's prompt
    "Q: What is 2 + 3?\nA: 2 + 3 = 5. The answer is 5.\n\n"
    "Q: Tom has 4 apples. He buys 3 more. How many apples does Tom have now?\nA: 4 + 3 = 7. The answer is 7.\n\n"
    "Q: What is 6 * 7?\nA: 6 * 7 = 42. The answer is 42.\n\n"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layer", type=int, default=15)
    ap.add_argument("--latents", type=int, default=512)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer

    from pipeline.catalog import query
    from pipeline.io import write_table
    from pipeline.probe import train_and_extract
    from pipeline.probe.core import ProbeConfig, answer_span, rollouts_digest, sae_id
    from pipeline.probe.sae import SAEConfig

    torch.set_num_threads(args.threads)
    model_dir = REPO / "data/models/smollm2-135m-instruct"
    tok = AutoTokenizer.from_pretrained(model_dir)
    with tempfile.TemporaryDirectory(prefix="passband-probe-bench-") as t:
        tmp = Path(t)
        t0 = time.perf_counter()
        params, rolls = embedded_set.build(tmp)
        verdicts = {(v["problem_id"], v["policy_id"], v["sample_idx"]): v
                    for v in query(params, "SELECT * FROM verdicts", root=tmp).to_dicts()}
        t1 = time.perf_counter()
        keys, items = [], []
        for r in rolls:
            k = (r["problem_id"], r["policy_id"], r["sample_idx"])
            if r["style"] == "fewshot":
                prompt = FEWSHOT + f"Q: {r['question']}\nA:"
            else:
                msg = [{"role": "user", "content": r["question"] + "\nPut the final answer in \\boxed{}."}]
                prompt = tok.apply_chat_template(msg, tokenize=False, add_generation_prompt=True)
            keys.append(k)
            items.append((prompt, r["completion"], answer_span(r["completion"], verdicts[k]["extracted"])))
        cfg = ProbeConfig(layer=args.layer, top_k=8,
                          sae=dataclasses.replace(SAEConfig(), n_latents=args.latents, steps=args.steps))
        sid = sae_id(cfg, model_revision="embedded", rollouts=rollouts_digest(keys, [r["completion"] for r in rolls]))
        res = train_and_extract(model_dir, keys, items, cfg=cfg, sae_id=sid, work_dir=tmp / "acts",
                                n_examples=cfg.sae.n_high)
        write_table(res.table, tmp / "data/features/part-0.parquet", name="features")
        print(f"inputs: {len(keys)} completions, {res.tokens} completion tokens, layer {args.layer}, "
              f"{args.latents} latents ({cfg.sae.n_high} high-level), k {cfg.sae.k_high}+{cfg.sae.k_low}, "
              f"{args.steps} steps x {cfg.sae.batch_sequences} adjacent pairs; verify+annotate {t1 - t0:.0f} s, "
              f"activations {res.seconds['activations']} s, training both {res.seconds['training']} s "
              f"({args.threads} threads)")
        print("\nSAE quality (all completion tokens; high-level = the T-SAE's prefix, every latent for plain)")
        print(f"{'sae':6} {'FVE':>6} {'cos':>6} {'L0':>5} {'alive':>6} {'adj hi cos':>10} {'rand hi cos':>11}")
        for kind, q in res.quality.items():
            print(f"{kind:6} {q['fve']:6.3f} {q['recon_cosine']:6.3f} {q['l0']:5.1f} {q['alive_fraction']:6.2f} "
                  f"{q['adjacent_high_cosine']:10.3f} {q['random_pair_high_cosine']:11.3f}")
        print("\nBands of the probed rollouts (rollouts per band and policy, correct ones)")
        print(query(params, "SELECT d.band, r.policy_id, count(*) AS rollouts, count(*) FILTER (WHERE v.status = "
                    "'correct') AS correct FROM rollouts r JOIN difficulty d USING (problem_id, policy_id) JOIN "
                    "verdicts v USING (problem_id, policy_id, sample_idx) GROUP BY ALL ORDER BY ALL", root=tmp))
        enriched = query(params, "SELECT band, feature, rollouts, band_rollouts, share, share_all, lift "
                         "FROM feature_bands WHERE rollouts >= 5 QUALIFY row_number() OVER (PARTITION BY band "
                         "ORDER BY lift DESC, rollouts DESC) <= 3 ORDER BY band, lift DESC", root=tmp)
        print("\nMost enriched features per band (in >= 5 of the band's rollouts' top 8; feature_bands view)")
        print(enriched)
        print("\nCorrect vs failed completions (all bands): features with the largest share difference")
        print(query(params, """
            WITH p AS (SELECT DISTINCT f.problem_id, f.policy_id, f.sample_idx, v.status = 'correct' AS ok
                       FROM features f JOIN verdicts v USING (problem_id, policy_id, sample_idx)),
                 n AS (SELECT count(*) FILTER (WHERE ok) AS n_ok, count(*) FILTER (WHERE NOT ok) AS n_bad FROM p),
                 h AS (SELECT f.feature, count(*) FILTER (WHERE p.ok) AS ok, count(*) FILTER (WHERE NOT p.ok) AS bad
                       FROM features f JOIN p USING (problem_id, policy_id, sample_idx) GROUP BY 1)
            SELECT feature, ok, n_ok, round(ok / n_ok, 3) AS share_correct, bad, n_bad,
                   round(bad / n_bad, 3) AS share_failed
            FROM h, n ORDER BY abs(ok / n_ok - bad / n_bad) DESC LIMIT 6""", root=tmp))
        print("\nShortcut flags the feature probe would learn from (positives among these completions)")
        print(query(params, "SELECT flag, count(*) AS rollouts FROM flags WHERE flag IN ('unsupported_answer', "
                    "'computation_skip') GROUP BY 1 ORDER BY 1", root=tmp))
        shown = set(enriched["feature"].to_list())
        print("\nToken spans that fire the enriched features hardest ([[token]]; one span per rollout)")
        for f in sorted(shown):
            ex = res.examples.get(str(f))
            if ex:
                for s in ex["spans"]:
                    print(f"  feature {f} ({s['activation']}): {s['text']!r}")
            else:
                print(f"  feature {f}: not among the {len(res.examples)} most frequent features with saved spans")


if __name__ == "__main__":
    main()
