"""The probe's T-SAE (pipeline/probe): its loss terms on synthetic data with a known answer, the features table,
the sae_id, and (marked slow) real activations and a real `passband probe` run on the embedded model."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from pipeline.probe.core import ProbeConfig, answer_span, feature_rows, rollouts_digest, sae_id
from pipeline.probe.sae import SAEConfig, TemporalSAE, info_nce, quality, train_sae


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def atoms(n: int, d: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).normal(size=(n, d))
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def planted(*, d=32, n=48, k=3, seqs=400, length=16, seed=0, n_coarse=0):
    """Each token: k random atoms of a planted dictionary with weights in [1, 2]. With ``n_coarse``, one of the
    atoms is always one of the first ``n_coarse`` (weight in [2, 3]): a coarse level the T-SAE's high prefix can hold."""
    rng = np.random.default_rng(seed)
    dic = atoms(n, d, seed)
    rows = []
    for _ in range(seqs * length):
        if n_coarse:
            idx = [rng.integers(n_coarse), *(n_coarse + rng.choice(n - n_coarse, k - 1, replace=False))]
            w = np.r_[rng.uniform(2, 3), rng.uniform(1, 2, k - 1)]
        else:
            idx, w = rng.choice(n, k, replace=False), rng.uniform(1, 2, k)
        rows.append(w @ dic[idx])
    return dic, np.stack(rows).astype(np.float32), np.arange(seqs) * length, np.full(seqs, length)


def slow_feature(*, d=32, n_slow=8, n_fast=32, seqs=400, length=16, seed=0):
    """Each sequence carries one slow atom (weight 2) on every token, plus 2 fast atoms drawn anew per token."""
    rng = np.random.default_rng(seed)
    dic = atoms(n_slow + n_fast, d, seed)
    x = np.zeros((seqs * length, d), np.float32)
    for s in range(seqs):
        slow = dic[rng.integers(n_slow)]
        for t in range(length):
            x[s * length + t] = 2 * slow + rng.uniform(1, 2, 2) @ dic[n_slow + rng.choice(n_fast, 2, replace=False)]
    return x, np.arange(seqs) * length, np.full(seqs, length)


def max_cosines(model, dic: np.ndarray) -> np.ndarray:
    w = model.W_dec.detach().numpy()
    w = w / np.linalg.norm(w, axis=1, keepdims=True)
    return (dic @ w.T).max(axis=1)


@pytest.mark.parametrize("kind", ["plain", "tsae"])
def test_a_planted_sparse_dictionary_is_recovered(kind):
    # plain: TopK 3 over 96 latents; tsae: 1 of the 19 high latents + 2 low ones active, on a dictionary with a
    # coarse level of 10 atoms (one on every token), which the high prefix must reconstruct alone (Matryoshka)
    dic, x, starts, lengths = planted(n_coarse=10 if kind == "tsae" else 0)
    cfg = SAEConfig(kind=kind, n_latents=96, k_high=1 if kind == "tsae" else 2, k_low=2 if kind == "tsae" else 1,
                    steps=1500, batch_sequences=128, lr=3e-3, contrastive_weight=0.0)
    model, _ = train_sae(x, starts, lengths, cfg)
    cos = max_cosines(model, dic)
    assert cos.min() >= 0.9, f"{kind}: planted atoms {np.flatnonzero(cos < 0.9).tolist()} not recovered: {cos.round(2)}"
    assert quality(model, x, starts, lengths)["fve"] > 0.8
    if kind == "tsae":  # the coarse atoms live in the high prefix
        w = model.W_dec.detach().numpy()[: cfg.n_high]
        assert (dic[:10] @ (w / np.linalg.norm(w, axis=1, keepdims=True)).T).max(axis=1).min() >= 0.9


def test_an_untrained_sae_does_not_recover_the_dictionary():
    """The recovery test can fail: random decoder rows are far from the planted atoms."""
    dic, *_ = planted()
    assert max_cosines(TemporalSAE(32, SAEConfig(n_latents=96)), dic).min() < 0.9


def test_the_contrastive_term_makes_adjacent_high_level_codes_closer():
    x, starts, lengths = slow_feature()
    base = SAEConfig(kind="tsae", n_latents=64, high_fraction=0.25, k_high=2, k_low=2, steps=1000,
                     batch_sequences=128, lr=3e-3)
    dist = {}
    for w in (0.0, 1.0):
        model, _ = train_sae(x, starts, lengths, dataclasses.replace(base, contrastive_weight=w))
        q = quality(model, x, starts, lengths)
        dist[w] = 1 - q["adjacent_high_cosine"]
        assert q["random_pair_high_cosine"] < 0.5  # codes still tell sequences apart
        assert q["fve"] > 0.9  # and reconstruct
    assert dist[1.0] < dist[0.0] - 0.03, dist


def test_info_nce_is_low_for_matched_pairs_and_high_for_shuffled_ones():
    a = torch.eye(8)
    assert float(info_nce(a, a, temperature=0.1)) < 0.01
    assert float(info_nce(a, a.roll(1, 0), temperature=0.1)) > 5


def test_tsae_losses_include_the_prefix_and_contrastive_terms():
    model = TemporalSAE(16, SAEConfig(n_latents=20, high_fraction=0.2, k_high=2, k_low=3))
    x0, x1 = torch.randn(8, 16), torch.randn(8, 16)
    terms = model.losses(x0, x1)
    assert set(terms) == {"loss", "reconstruction", "prefix_reconstruction", "contrastive"}
    want = terms["reconstruction"] + terms["prefix_reconstruction"] + terms["contrastive"]
    assert terms["loss"].item() == pytest.approx(want.item())
    z = model.encode(torch.cat([x0, x1]))
    assert int((z[:, :4] > 0).sum(1).max()) <= 2 and int((z[:, 4:] > 0).sum(1).max()) <= 3


def test_feature_rows_keep_the_top_k_by_mean_with_the_answer_span():
    codes = np.array([[0, 1, 0], [0, 3, 2], [5, 0, 0], [1, 0, 0]], dtype=np.float32)  # rollout 0: rows 0-1
    t = feature_rows(codes, starts=np.array([0, 2]), lengths=np.array([2, 2]), answer_mask=np.array([0, 1, 0, 0], bool),
                     keys=[("p1", "pol", 0), ("p1", "pol", 1)], sae="tsae-L1/x", top_k=2)
    rows = t.to_pylist()
    assert [(r["sample_idx"], r["feature"], r["rank"]) for r in rows] == [(0, 1, 1), (0, 2, 2), (1, 0, 1)]
    assert rows[0]["mean_completion"] == 2.0 and rows[0]["mean_answer"] == 3.0 and rows[0]["max_completion"] == 3.0
    assert rows[2]["mean_answer"] is None  # no answer token in rollout 1
    assert t.schema.metadata[b"passband.table"] == b"features"


def test_answer_span_is_the_last_occurrence():
    assert answer_span("2 + 3 = 5. The answer is 5.", "5") == (25, 26)
    assert answer_span("no digits", "5") is None and answer_span("x", None) is None


def test_sae_id_changes_with_config_model_and_rollouts():
    cfg = ProbeConfig()
    r = rollouts_digest([("p", "pol", 0)], ["text"])
    base = sae_id(cfg, model_revision="sha256:a", rollouts=r)
    assert base.startswith("tsae-L15/")
    assert sae_id(cfg, model_revision="sha256:a", rollouts=r) == base
    assert sae_id(dataclasses.replace(cfg, batch_tokens=99), model_revision="sha256:a", rollouts=r) == base
    assert sae_id(dataclasses.replace(cfg, layer=3), model_revision="sha256:a", rollouts=r) != base
    assert sae_id(cfg, model_revision="sha256:b", rollouts=r) != base
    assert sae_id(cfg, model_revision="sha256:a", rollouts=rollouts_digest([("p", "pol", 0)], ["other"])) != base


# --- the embedded model -----------------------------------------------------------------------------------------

def _embedded_rows(n: int) -> list[dict]:
    from pathlib import Path

    path = Path(__file__).parent / "data" / "embedded_completions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r["style"] == "fewshot"][:n]


@pytest.mark.slow
def test_activations_match_a_plain_forward_pass(embedded_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.probe.activations import collect

    rows = _embedded_rows(4)
    items = [(f"Q: {r['question']}\nA:", r["completion"], answer_span(r["completion"], r["gold"])) for r in rows]
    store = collect(embedded_model_dir, items, layer=7, out_dir=tmp_path, batch_tokens=64)  # several batches
    tok = AutoTokenizer.from_pretrained(embedded_model_dir)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, dtype=torch.float32)
    for i, (prompt, completion, _) in enumerate(items):
        p = tok(prompt)["input_ids"]
        c = tok(completion, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            hs = model(input_ids=torch.tensor([p + c]), output_hidden_states=True).hidden_states[7][0, len(p):]
        assert store.lengths[i] == len(c)
        np.testing.assert_allclose(store.acts[store.rows(i)], hs.numpy(), rtol=1e-4, atol=1e-3)
    assert store.answer_mask.any()
    from pipeline.probe.core import ProbeError

    with pytest.raises(ProbeError, match=r"layer 30: .* has decoder layers 0\.\.29"):
        collect(embedded_model_dir, items, layer=30, out_dir=tmp_path / "x")


@pytest.mark.slow
def test_passband_probe_on_real_rollouts(probe_project, tmp_path):
    """`passband probe` on 24 real completions of the embedded model: SAEs saved, features queryable, second run idle."""
    from click.testing import CliRunner

    from pipeline.catalog import query
    from pipeline.cli import cli

    p, _, _ = probe_project(24)
    argv = ["probe", "--params", str(tmp_path / "params.yaml"), "--layer", "9", "--latents", "64", "--steps", "30",
            "--top-k", "3", "--threads", "1"]
    first = CliRunner().invoke(cli, argv)
    assert first.exit_code == 0, first.output
    assert "tsae: FVE" in first.output and "plain: FVE" in first.output
    (out,) = (tmp_path / "data" / "probe").glob("tsae-L9-*")
    report = json.loads((out / "report.json").read_text())
    assert report["rollouts"] == 24 and set(report["quality"]) == {"tsae", "plain"}
    assert (out / "tsae.safetensors").is_file() and (out / "plain.safetensors").is_file()
    assert report["examples"] and all("[[" in s["text"] for e in report["examples"].values() for s in e["spans"])
    df = query(p, "SELECT sample_idx, count(*) AS n, max(rank) AS top FROM features GROUP BY 1 ORDER BY 1", root=tmp_path)
    assert df.height == 24 and df["top"].max() <= 3
    assert not list((tmp_path / "data" / "probe").glob(".work-*"))  # the activations are gone
    second = CliRunner().invoke(cli, argv)
    assert second.exit_code == 0 and "nothing to do" in second.output, second.output


def test_feature_bands_view_counts_features_per_band(tmp_path):
    import yaml
    from publish_tables import PRIMARY_ID, VERIFIER, difficulty_row

    from pipeline.catalog import query
    from pipeline.config import load_params
    from pipeline.io import write_table
    from pipeline.schema import schema

    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
        "policies": {"p": {"model": "embedded"}}, "rollout": {"policies": ["p"]}}))
    params = load_params(tmp_path / "params.yaml")
    easy, hard = "p_0000000000000001", "p_0000000000000002"
    write_table(schema("difficulty").from_rows([difficulty_row(easy, PRIMARY_ID, 8), difficulty_row(hard, PRIMARY_ID, 1)]),
                tmp_path / "data/difficulty/part-0.parquet", name="difficulty")
    write_table(schema("verdicts").from_rows([
        {"problem_id": pid, "policy_id": PRIMARY_ID, "sample_idx": i, "verifier_id": VERIFIER,
         "status": "correct" if pid == easy or i == 0 else "incorrect"} for pid in (easy, hard) for i in range(2)]),
        tmp_path / "data/verdicts/part-0.parquet", name="verdicts")
    # feature 7 fires on both easy rollouts and one hard one; feature 3 on the hard ones only
    rows = [(easy, 0, 7), (easy, 1, 7), (hard, 0, 7), (hard, 0, 3), (hard, 1, 3)]
    write_table(schema("features").from_rows([
        {"problem_id": pid, "policy_id": PRIMARY_ID, "sample_idx": i, "sae_id": "tsae-L1/x", "feature": f, "rank": 1,
         "mean_completion": 1.0, "mean_answer": None, "max_completion": 1.0, "n_tokens": 3} for pid, i, f in rows]),
        tmp_path / "data/features/part-0.parquet", name="features")
    got = {(r["band"], r["feature"]): r for r in query(params, "SELECT * FROM feature_bands", root=tmp_path).to_dicts()}
    assert got[("too_easy", 7)]["share"] == 1.0 and got[("too_easy", 7)]["lift"] == pytest.approx(1 / 0.75, abs=1e-3)
    assert got[("too_hard", 3)]["rollouts"] == 2 and got[("too_hard", 3)]["lift"] == 2.0
    assert got[("too_hard", 3)]["correct_share"] == 1.0 and ("too_easy", 3) not in got


def test_probe_errors_are_one_line(embedded_model_dir, tmp_path):
    """An unknown policy, a policy with no rollouts: one line naming it and what to do, no traceback."""
    import yaml
    from click.testing import CliRunner

    from pipeline.cli import cli

    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
        "policies": {"p": {"model": "embedded", "prompt": "fewshot_arith"}}, "rollout": {"policies": ["p"]},
        "paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]}}))
    argv = ["probe", "--params", str(tmp_path / "params.yaml")]
    res = CliRunner().invoke(cli, [*argv, "--policy", "nope"])
    assert res.exit_code == 1 and "unknown policy 'nope'; params.yaml names: p" in res.output
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 1 and "has no rollouts" in res.output and "passband rollout" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
