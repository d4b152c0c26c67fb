"""The probe's reports (pipeline/probe/report_core.py) on synthetic features whose answer is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.probe.report_core import (
    best_threshold,
    cross_validate,
    enrichment,
    feature_drift,
    fit_logistic,
    log_odds,
    rollout_vectors,
    stratified_folds,
)


def _features(n=400, d=20, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_logistic_probe_recovers_a_planted_linear_label():
    x = _features()
    w = np.zeros(x.shape[1])
    w[[2, 7]] = [1.0, -1.0]
    y = x @ w > 1.0  # about 24 % positive, a linear rule of two features
    res = cross_validate(x, y, folds=5, seed=0)
    assert res["positives"] == int(y.sum()) and res["folds"] == 5 and len(res["thresholds"]) == 5
    assert res["precision"] >= 0.85 and res["recall"] >= 0.85 and res["f1"] >= 0.9


def test_logistic_probe_is_near_chance_on_a_random_label():
    x = _features()
    y = np.random.default_rng(1).random(len(x)) < 0.25
    res = cross_validate(x, y, folds=5, seed=0)
    assert abs(res["precision"] - res["prevalence"]) < 0.12
    assert res["f1"] < 0.5


def test_too_few_positives_is_skipped_with_a_reason():
    x = _features(n=50)
    y = np.zeros(50, dtype=bool)
    y[3] = True
    res = cross_validate(x, y)
    assert res["positives"] == 1 and "too few" in res["skipped"]


def test_folds_are_stratified():
    y = np.array([1] * 10 + [0] * 40)
    fold = stratified_folds(y, 5, seed=0)
    for f in range(5):
        assert (y[fold == f] == 1).sum() == 2 and (y[fold == f] == 0).sum() == 8


def test_best_threshold_and_fit():
    scores = np.array([0.1, 0.2, 0.8, 0.9])
    assert best_threshold(scores, np.array([0, 0, 1, 1])) == 0.8
    x = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    w, _ = fit_logistic(x, np.array([0, 0, 1, 1]), l2=1.0)
    assert w[0] > 0


def _codes(tokens=300, h=12, seed=0):
    rng = np.random.default_rng(seed)
    return np.where(rng.random((tokens, h)) < 0.3, rng.gamma(2.0, 0.5, size=(tokens, h)), 0.0)


def test_feature_drift_is_zero_for_identical_codes():
    c = _codes()
    d = feature_drift(c, c.copy(), starts=np.array([0, 100, 200]), lengths=np.array([100, 100, 100]))
    s = d["summary"]
    assert s["mean_abs_delta_mean"] == 0 and s["mean_abs_delta_rate"] == 0 and s["top_feature_changed"] == 0
    assert s["cosine_mean_codes"] == pytest.approx(1.0) and s["mean_token_cosine"] == pytest.approx(1.0)
    assert d["top"] == []


def test_feature_drift_finds_a_planted_shift_in_one_latent():
    c = _codes()
    t = c.copy()
    t[:, 5] += 1.0  # latent 5 now fires on every token, harder
    d = feature_drift(c, t, starts=np.array([0, 100, 200]), lengths=np.array([100, 100, 100]), top=3)
    assert d["top"][0]["feature"] == 5
    assert d["top"][0]["delta_mean"] == pytest.approx(1.0)
    assert d["top"][0]["rate_trained"] == 1.0 and d["top"][0]["delta_rate"] > 0.5
    assert len(d["top"]) == 1  # no other latent moved
    assert len(d["top"][0]["rows_trained"]) == 3 and len({r // 100 for r in d["top"][0]["rows_trained"]}) == 3
    assert d["summary"]["mean_abs_delta_mean"] == pytest.approx(1.0 / 12)
    assert d["summary"]["cosine_mean_codes"] < 1.0
    with pytest.raises(ValueError, match="the same tokens"):
        feature_drift(c, t[:10])


def test_enrichment_finds_a_planted_group_feature():
    rng = np.random.default_rng(0)
    present = rng.random((200, 6)) < 0.2
    groups = np.array(["easy"] * 100 + ["hard"] * 100)
    present[:100, 4] = rng.random(100) < 0.9
    present[100:, 4] = False
    e = enrichment(present, groups, min_count=5, top=3)
    top = e["easy"]["features"][0]
    assert top["feature"] == 4 and top["ci"][0] > 2 and e["easy"]["significant"] >= 1
    assert e["easy"]["rollouts"] == 100 and all(r["feature"] != 4 for r in e["hard"]["features"])
    lo, a, b = log_odds(10, 10, 10, 10)
    assert lo == 0 and a < 0 < b


def test_rollout_vectors():
    codes = np.array([[1.0, 0.0, 0.0], [3.0, 0.0, 2.0], [0.0, 4.0, 0.0]])
    v = rollout_vectors(codes, starts=np.array([0, 2]), lengths=np.array([2, 1]),
                        answer_mask=np.array([False, True, False]), top_k=1)
    assert v.mean[0].tolist() == [2.0, 0.0, 1.0] and v.answer[0].tolist() == [3.0, 0.0, 2.0]
    assert v.has_answer.tolist() == [True, False] and v.answer[1].tolist() == [0.0, 0.0, 0.0]
    assert v.top.tolist() == [[True, False, False], [False, True, False]]
    assert v.fires[0].tolist() == [1.0, 0.0, 0.5]


def test_probe_report_command_has_help():
    from pipeline.cli import cli

    res = CliRunner().invoke(cli, ["probe", "report", "--help"])
    assert res.exit_code == 0 and "--checkpoint" in res.output and "--drift-limit" in res.output
    res = CliRunner().invoke(cli, ["probe", "--help"])
    assert res.exit_code == 0 and "report" in res.output


@pytest.mark.slow
def test_report_on_real_rollouts_and_a_checkpoint_identical_to_the_base(embedded_model_dir, probe_project, tmp_path):
    """The shell end to end on 16 real completions, 40 labelled rows and a "checkpoint" holding the base model's
    own weights: the report is written, and the drift is exactly zero."""
    import json

    from pipeline.annotate.quality import LABELLED_SET
    from pipeline.io import write_table
    from pipeline.probe.core import ProbeConfig
    from pipeline.probe.report_stage import run
    from pipeline.probe.sae import SAEConfig
    from pipeline.schema import schema

    p, _, rolls = probe_project(16)
    ck = tmp_path / "ckpt"
    ck.mkdir()
    for f in embedded_model_dir.iterdir():
        if f.is_file():
            (ck / f.name).symlink_to(f)
    ck_rolls = [{**r, "policy_id": "pol_trained", "sample_idx": i} for i, r in enumerate(rolls[:6])]
    write_table(schema("rollouts").from_rows(ck_rolls), ck / "records/rollouts/part-0.parquet", name="rollouts")
    write_table(schema("verdicts").from_rows([
        {"problem_id": r["problem_id"], "policy_id": "pol_trained", "sample_idx": r["sample_idx"], "verifier_id": "v",
         "status": "incorrect"} for r in ck_rolls]), ck / "records/verdicts/part-0.parquet", name="verdicts")
    lab = tmp_path / "labels.jsonl"
    lab.write_text("\n".join(LABELLED_SET.read_text().splitlines()[:40]) + "\n")
    cfg = ProbeConfig(layer=9, sae=SAEConfig(n_latents=64, steps=30))
    r = run(p, root=tmp_path, config=cfg, checkpoint=ck, problems=[tmp_path / "data/problems"], labelled=lab,
            threads=1)
    assert r["sizes"]["main"]["rollouts"] == 16 and r["sizes"]["labelled"]["rollouts"] == 40
    assert r["sizes"]["checkpoint"]["rollouts"] == 6 and not r["sae_loaded"]
    # zero up to float noise: the two passes batch differently, so a token's TopK can flip at a near tie (a trained
    # checkpoint drifts by ~0.03 on this measure; see docs/probe.md)
    for part in ("all", "main", "checkpoint_records"):
        assert r["drift"][part]["mean_abs_delta_mean"] < 1e-3 and r["drift"][part]["mean_abs_delta_rate"] < 5e-3
        assert r["drift"][part]["cosine_mean_codes"] == pytest.approx(1, abs=1e-4)
    assert all(abs(f["delta_mean"]) < 1e-2 for f in r["drift"]["top"])
    runs = {(x["rollouts"], x["label_kind"], x["label"]): x for x in r["shortcut_probe"]["runs"]}
    assert ("labelled", "human label", "unsupported") in runs
    out = Path(r["out"])
    assert json.loads((out / "report.json").read_text())["report_id"] == r["report_id"]
    assert "Feature drift" in (out / "report.md").read_text()
    again = run(p, root=tmp_path, config=cfg, checkpoint=ck, problems=[tmp_path / "data/problems"], labelled=lab,
                threads=1)
    assert again["sae_loaded"] and again["activations_cached"] == {
        "base": {"main": True, "labelled": True, "checkpoint": True}, "checkpoint": {"main": True, "checkpoint": True}}
    assert again["report_id"] == r["report_id"]
    alone = run(p, root=tmp_path, config=cfg, checkpoint=ck, problems=[tmp_path / "data/problems"], use_labelled=False,
                out=tmp_path / "drift", threads=1)
    assert set(alone["sizes"]) == {"main", "checkpoint"} and (tmp_path / "drift" / "report.md").is_file()
    assert not any(x["rollouts"].startswith(("labelled", "main+")) for x in alone["shortcut_probe"]["runs"])


def test_checkpoint_records_find_their_problems_in_several_tables_or_name_the_missing_one(tmp_path):
    """An arm of reformulated children records problems that live in the reformulated table, not the pool's:
    --problems takes both; a recorded problem in neither is a ProbeError naming the tables, not a KeyError."""
    from pipeline.io import write_table
    from pipeline.probe.core import ProbeError
    from pipeline.probe.report_stage import checkpoint_part
    from pipeline.schema import schema

    def problem(pid):
        return {"problem_id": pid, "source": "synthetic", "source_id": pid, "question": f"What is {pid}?",
                "answer": "1", "n_duplicates": 0}

    write_table(schema("problems").from_rows([problem("p_pool")]), tmp_path / "pool/part-0.parquet", name="problems")
    write_table(schema("problems").from_rows([problem("p_child")]), tmp_path / "children/part-0.parquet",
                name="problems")
    ck = tmp_path / "ckpt"
    rolls = [{"problem_id": pid, "policy_id": "pol_t", "sample_idx": 0, "seed": 0, "completion": "1",
              "n_tokens": 1, "finish_reason": "stop"} for pid in ("p_pool", "p_child")]
    write_table(schema("rollouts").from_rows(rolls), ck / "records/rollouts/part-0.parquet", name="rollouts")
    write_table(schema("verdicts").from_rows([{"problem_id": r["problem_id"], "policy_id": "pol_t", "sample_idx": 0,
                                               "verifier_id": "v", "status": "correct"} for r in rolls]),
                ck / "records/verdicts/part-0.parquet", name="verdicts")
    with pytest.raises(ProbeError, match=r"1 problems of .* are in none of the problems tables .*p_child"):
        checkpoint_part(None, None, ck, [tmp_path / "pool"])
