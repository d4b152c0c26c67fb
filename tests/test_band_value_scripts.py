"""The band-value experiment's analysis scripts (experiments/band_value): their arithmetic on cases with a
known answer, and a run over a made-up finished run."""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent / "experiments" / "band_value"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cal = _load("signal_calibration")


def test_uniform_prior_with_no_data_gives_the_closed_form():
    # Beta(1, 1): the number of successes in g draws is uniform on 0..g, so P(all equal) = 2 / (g + 1)
    for g in (2, 8, 16):
        assert cal.p_signal_posterior(0, 0, g) == pytest.approx(1 - 2 / (g + 1))
        assert cal.p_signal_beta(0, 0, g, 1.0, 1.0) == pytest.approx(1 - 2 / (g + 1))


def test_plugin_and_posterior_on_measured_items():
    assert cal.p_signal_plugin(4, 8, 8) == pytest.approx(1 - 2 * 0.5 ** 8)
    assert cal.p_signal_plugin(0, 8, 8) == 0 and cal.p_signal_plugin(8, 8, 8) == 0
    # the posterior keeps some chance for an item never solved in 8 samples, less with a U-shaped prior
    assert 0.3 < cal.p_signal_posterior(0, 8, 8) < 0.6
    assert cal.p_signal_beta(0, 8, 8, 0.16, 0.36) < cal.p_signal_posterior(0, 8, 8)
    # more samples at the same rate: the posterior's prediction approaches the plug-in one
    assert abs(cal.p_signal_posterior(400, 800, 8) - cal.p_signal_plugin(4, 8, 8)) < 1e-3


def test_the_population_prior_is_recovered_from_simulated_measurements():
    rng = random.Random(0)
    measured = [(sum(rng.random() < p for _ in range(8)), 8) for p in (rng.betavariate(0.3, 0.6) for _ in range(3000))]
    a, b = cal.fit_beta_prior(measured)
    assert a / (a + b) == pytest.approx(1 / 3, abs=0.03)  # the mean
    assert 0.18 < a < 0.5 and 0.35 < b < 1.0  # the U shape (a, b < 1), within the grid's resolution and noise


def _write(path: Path, table: str, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")


def test_calibration_over_a_made_up_run(tmp_path):
    """One arm, one run, two windows: window 1 holds a group with a signal, window 2 one without; the item was
    measured 4 of 8 before training."""
    import yaml

    (tmp_path / "band_value.yaml").write_text(yaml.safe_dump({
        "arms": {"learnable": ["learnable"]}, "draws": [0], "seeds": [0], "grpo": {"num_generations": 8}}))
    (tmp_path / "data/arms/d0").mkdir(parents=True)
    (tmp_path / "data/arms/d0/learnable.jsonl").write_text(json.dumps({"problem_id": "p1", "n": 8, "n_correct": 4}) + "\n")
    _write(tmp_path / "data/difficulty", "difficulty", [{"n_correct": c, "n": 8} for c in (0, 0, 8, 4, 8, 0)])
    ck = tmp_path / "data/checkpoints/learnable-d0-s0"
    ck.mkdir(parents=True)
    (ck / "train_log.json").write_text("{}")
    w1, w2 = "pol_w1", "pol_w2"
    _write(ck / "records/policies", "policies", [
        {"policy_id": w2, "identity": json.dumps({"steps": [8, 16]})},
        {"policy_id": w1, "identity": json.dumps({"steps": [0, 8]})}])
    rolls, verdicts = [], []
    for pol, statuses, texts in ((w1, ["correct"] * 3 + ["incorrect"] * 5, [f"t{i}" for i in range(8)]),
                                 (w2, ["correct"] * 8, ["same"] * 8)):
        for i, (s, t) in enumerate(zip(statuses, texts, strict=True)):
            rolls.append({"problem_id": "p1", "policy_id": pol, "sample_idx": i, "completion": t})
            verdicts.append({"problem_id": "p1", "policy_id": pol, "sample_idx": i, "status": s})
    _write(ck / "records/rollouts", "rollouts", rolls)
    _write(ck / "records/verdicts", "verdicts", verdicts)
    out = cal.calibration(tmp_path)["arms"]["learnable"]
    assert out["runs"] == ["d0-s0"]
    first, second = out["windows"][0], out["windows"][1]
    assert first["realised"] == 1.0 and second["realised"] == 0.0
    assert first["distinct_completions"] == 8 and second["distinct_completions"] == 1
    assert first["mean_group_pass_rate"] == pytest.approx(3 / 8) and second["mean_group_pass_rate"] == 1.0
    assert first["predicted_plugin"] == pytest.approx(1 - 2 * 0.5 ** 8)
    assert out["all"]["groups"] == 2 and out["all"]["realised"] == 0.5
    assert math.isclose(first["predicted_posterior"], second["predicted_posterior"])


def test_measured_dir_follows_the_arm_configs(tmp_path):
    cfg = {"arms": {"learnable": ["learnable"], "children": ["reformulated"]}}
    assert cal.measured_dir(tmp_path, cfg, "learnable", "difficulty") == tmp_path / "data" / "difficulty"
    assert cal.measured_dir(tmp_path, cfg, "children", "rollouts") == tmp_path / "data" / "reformulated" / "rollouts"


def test_engine_agreement_summary_grades_and_counts_groups(monkeypatch):
    """Two groups of 8 for one item: the first mixed (4 right, 2 distinct texts), the second all wrong."""
    monkeypatch.syspath_prepend(str(HERE))  # the script imports signal_calibration from beside it
    agree = _load("engine_agreement")
    texts = {"p1": ["The answer is 4."] * 4 + ["The answer is 5."] * 4 + [f"It is {n}." for n in range(10, 18)]}
    s = agree.summary(texts, {"p1": "4"})
    assert s["groups"] == 2 and s["signal_share"] == 0.5
    assert s["rates"] == {"p1": 0.25} and s["pass_rate"] == 0.25
    assert s["distinct_per_group"] == (2 + 8) / 2


def test_progress_reads_the_checkpoints_log_else_the_committed_results_copy(tmp_path):
    """A run whose checkpoint is gone (a lost cache) still counts from results/<run>/train_log.json."""
    import yaml

    progress = _load("progress")
    (tmp_path / "band_value.yaml").write_text(yaml.safe_dump({"arms": {"learnable": ["learnable"]}, "draws": [0],
                                                              "seeds": [0, 1, 2]}))
    for folder, seconds, signal in (("data/checkpoints/learnable-d0-s0", 10.0, 3), ("results/learnable-d0-s1", 30.0, 1)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "train_log.json").write_text(json.dumps(
            {"seconds": seconds, "log": [{"reward": 0.5}], "groups": 4, "groups_with_signal": signal}))
    p = progress.progress(tmp_path)
    arm = p["arms"]["learnable"]
    assert (p["runs_done"], p["runs_planned"]) == (2, 3) and arm["runs"] == ["d0-s0", "d0-s1"]
    assert arm["seconds_mean"] == 20.0 and (arm["groups"], arm["groups_with_signal"]) == (8, 4)
    lo, hi = arm["signal_share_95"]
    assert lo < 0.5 < hi


def test_spearman_and_lr_area_on_known_cases(monkeypatch):
    import numpy as np

    monkeypatch.syspath_prepend(str(HERE))  # the scripts import signal_vs_gain from beside them
    gain = _load("signal_vs_gain")
    disp = _load("weight_displacement")
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert disp.spearman.__module__ == "signal_vs_gain"  # one rank correlation, shared
    assert gain.spearman(x, x ** 3) == pytest.approx(1.0)  # monotone: rank correlation 1, not Pearson's
    assert gain.spearman(x, -x) == pytest.approx(-1.0)
    assert math.isnan(gain.spearman(x, np.ones(4)))
    assert gain.spearman(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(0.8660254)  # ties
    # the linear decay over 16 steps: step k runs at (17 - k) / 16 of the rate
    assert disp.lr_area(1, 16) == pytest.approx(8.5) and disp.lr_area(16, 16) == pytest.approx(1 / 16)
    assert disp.lr_area(7, 16) == pytest.approx(55 / 16) and disp.lr_area(None, 16) == 0.0


def _report(deltas_by_arm: dict) -> dict:
    policies = [{"arm": "base", "policy": "base"}]
    for arm, rows in deltas_by_arm.items():
        policies += [{"arm": arm, "policy": f"{arm}-{i}", "groups": 16, "groups_with_signal": s, "delta": d}
                     for i, (s, d) in enumerate(rows)]
    return {"sets": {"heldout": {"policies": policies}}}


def test_signal_vs_gain_finds_a_planted_within_arm_correlation(monkeypatch):
    gain = _load("signal_vs_gain")
    monkeypatch.setattr(gain, "SHUFFLES", 400)
    # within each arm the change rises with the signal; across arms the levels are unrelated
    planted = _report({"a": [(s, 0.01 * s) for s in range(2, 10)], "b": [(s, 0.3 + 0.01 * s) for s in range(1, 9)]})
    r = gain.analyse(planted)["heldout"]
    assert r["runs"] == 16
    assert r["change"]["rho_within_arms"] == pytest.approx(1.0) and r["change"]["p_within_arms"] < 0.01
    assert r["change"]["per_arm"] == {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}
    assert r["few_signal"]["runs"] == 7 and r["many_signal"]["runs"] == 0
    # no relation: changes in no order of the signal, the permutation p is large
    flat = _report({"a": list(enumerate([0.1, -0.2, 0.05, 0.0, -0.1, 0.2, -0.05, 0.15]))})
    assert gain.analyse(flat)["heldout"]["change"]["p"] > 0.2


def test_weight_displacement_over_made_up_checkpoints(tmp_path, monkeypatch):
    import torch
    import yaml
    from safetensors.torch import save_file

    monkeypatch.syspath_prepend(str(HERE))
    disp = _load("weight_displacement")
    (tmp_path / "band_value.yaml").write_text(yaml.safe_dump({"grpo": {"steps": 4}}))
    base = {"w": torch.ones(4, 4), "b": torch.ones(4)}
    (tmp_path / "base").mkdir()
    save_file(base, str(tmp_path / "base" / "model.safetensors"))
    moved = {"w": torch.ones(4, 4), "b": torch.ones(4)}
    moved["w"][0, :2] += 0.5  # 2 of 20 weights moved by 0.5: distance sqrt(0.5) / sqrt(20)
    ck = tmp_path / "data" / "checkpoints" / "hard-d0-s1"
    ck.mkdir(parents=True)
    save_file(moved, str(ck / "model.safetensors"))
    (ck / "train_log.json").write_text(json.dumps({"log": [{"step": k, "reward_std": s} for k, s in
                                                            ((1, 0.0), (2, 0.4), (3, 0.0), (4, 0.3))]}))
    (tmp_path / "data" / "checkpoints" / "hard-d0-s2").mkdir()  # no weights (evicted from the cache): skipped
    [row] = disp.runs(tmp_path / "base", root=tmp_path)
    assert row["run"] == "hard-d0-s1" and row["arm"] == "hard"
    assert (row["signal_steps"], row["first_signal_step"]) == (2, 2)
    assert row["lr_area_from_first"] == pytest.approx((3 + 2 + 1) / 4)
    assert row["relative_distance"] == pytest.approx(math.sqrt(0.5) / math.sqrt(20))
    assert row["changed_share"] == pytest.approx(2 / 20)


def test_power_runs_needed_and_over_a_made_up_report(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    power = _load("power")
    # the textbook figure: d = 1 sd per arm, two-sided 0.05, 80 % power -> 2 (1.96 + 0.84)^2 = 15.7 runs an arm
    assert power.runs_needed(0.1, 0.1, 0.1, 0.05) == pytest.approx(15.70, abs=0.01)
    assert power.runs_needed(0.1, 0.1, 0.1, 0.05 / 8) > power.runs_needed(0.1, 0.1, 0.1, 0.05)
    assert power.runs_needed(0.0, 0.1, 0.1, 0.05) == math.inf
    report = _report({"a": [(8, 0.10), (8, 0.20)], "b": [(2, 0.0), (2, 0.0)]})
    report["sets"]["heldout"]["contrasts"] = [{"better": "a", "worse": "b"}]
    [c] = power.analyse(report)["heldout"]["contrasts"]
    assert c["diff"] == pytest.approx(0.15) and c["sd"] == [pytest.approx(0.0707107), 0.0]
    assert c["runs_needed_alpha_05"] == pytest.approx(7.849 * 0.005 / 0.0225, rel=1e-3)
