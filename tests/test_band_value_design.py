"""The pre-registered band-value design (experiments/band_value): its tests on known cases, the power simulation,
the run plan and draws, the held-out set's disjointness from the pool across skills, the signal gate, and the
analysis script's recorded digest."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent.parent / "experiments" / "band_value"
REPO = HERE.parent.parent


def _load(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def pa(monkeypatch):
    return _load("prereg_analysis", monkeypatch)


@pytest.fixture
def dp(monkeypatch):
    return _load("design_power", monkeypatch)


@pytest.fixture
def design(monkeypatch):
    return _load("design", monkeypatch)


# --- the tests the analysis uses ----------------------------------------------------------------------

def test_student_t_tail_and_quantile_on_table_values(pa):
    assert pa.t_sf(2.228, 10) == pytest.approx(0.025, abs=2e-4)  # the t table's 97.5 % point at 10 df
    assert pa.t_sf(1.645, 1e6) == pytest.approx(0.05, abs=2e-4)  # the normal limit
    assert pa.t_sf(-2.228, 10) == pytest.approx(0.975, abs=2e-4)
    assert pa.t_ppf(0.95, 20) == pytest.approx(1.725, abs=1e-3)


def test_welch_by_hand(pa):
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 2.5, 3.0]
    va, vb = statistics.variance(a) / 4, statistics.variance(b) / 3
    t, df, se = pa.welch(a, b)
    assert se == pytest.approx(math.sqrt(va + vb))
    assert t == pytest.approx((2.5 - 2.5) / se)
    assert df == pytest.approx((va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2))
    with pytest.raises(ValueError, match="zero spread"):
        pa.welch([1.0, 1.0], [2.0, 2.0])


def test_welch_permutation_test_direction_and_agreement_with_welch(pa):
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.1, 0.03, 16), rng.normal(0.0, 0.12, 56)
    p = pa.welch_permutation_p(a, b, resamples=20_000)
    assert p < 0.01 and pa.welch_permutation_p(b, a, resamples=20_000) > 0.99  # one-sided: the direction matters
    same_a, same_b = rng.normal(0, 0.03, 16), rng.normal(0, 0.12, 56)
    assert pa.welch_permutation_p(same_a, same_b, resamples=20_000) == pytest.approx(
        pa.welch_p(same_a, same_b), abs=0.03)  # large samples: the permutation and t distributions agree
    with pytest.raises(ValueError, match=">= 2 runs"):
        pa.welch_permutation_p([1.0], [1.0, 2.0])


def test_holm_and_tost(pa):
    assert pa.holm([0.01, 0.04]) == [0.02, 0.04]
    assert pa.holm([0.04, 0.01]) == [0.04, 0.02]
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 0.01, 30), rng.normal(0, 0.01, 30)
    assert pa.tost(a, b, 0.05) < 0.001  # equal arms, tight: equivalent within a wide margin
    assert pa.tost(a, b, 0.001) > 0.2  # not within a margin narrower than the noise
    lo, hi = pa.welch_interval(a, b, 0.90)
    d = float(np.mean(a) - np.mean(b))
    margin = max(abs(lo), abs(hi)) + 1e-9  # TOST at alpha 0.05 rejects exactly when the 90 % interval fits
    assert pa.tost(a, b, margin) == pytest.approx(0.05, abs=1e-6) and lo < d < hi


def test_the_analysis_over_made_up_results(pa, tmp_path):
    import pyarrow as pa_
    import pyarrow.parquet as pq

    def write(name, rates):
        (tmp_path / name / "difficulty").mkdir(parents=True)
        pq.write_table(pa_.Table.from_pylist([{"problem_id": f"p{i}", "pass_rate": r} for i, r in enumerate(rates)]),
                       tmp_path / name / "difficulty" / "part-0.parquet")

    write("base", [0.2, 0.4])
    for r, shift in enumerate([0.20, 0.22, 0.24, 0.21]):
        write(f"learnable-d{r}-s{r}", [0.2 + shift, 0.4 + shift])
    for r, shift in enumerate([0.0, -0.1, 0.1, 0.02, -0.05, 0.03], start=10):
        write(f"hard-d{r}-s{r}", [0.2 + shift, 0.4 + shift])
    res = pa.analyse(pa.run_means(tmp_path))
    assert res["items"] == 2 and res["base"] == pytest.approx(0.3)
    assert res["arms"]["learnable"]["mean_change"] == pytest.approx(0.2175)
    assert res["primary"]["contrast"] == "learnable > hard" and res["primary"]["runs"] == [4, 6]
    assert res["primary"]["diff"] == pytest.approx(0.2175)
    assert res["primary"]["p_one_sided"] < 0.05 and res["primary"]["decided"]
    assert "secondary" not in res  # no random or hard_signal runs: nothing to correct
    write("stray", [0.1, 0.1])
    with pytest.raises(SystemExit, match="not a run of the design"):
        pa.run_means(tmp_path)


# --- the committed runs' re-analysis and the power simulation ------------------------------------------------

def test_the_committed_runs_reanalysed(dp):
    """The figures the write-up quotes, from results/ as committed."""
    runs = dp.committed_runs()
    assert len(runs) == 50
    r = dp.reanalysis(runs)
    lh = r["learnable_vs_hard_two_sided"]
    assert lh["diff"] == pytest.approx(0.078, abs=5e-4)
    assert lh["mean_difference_permutation"] == pytest.approx(0.045, abs=5e-4)
    assert lh["welch_t"] == pytest.approx(0.060, abs=5e-4)
    assert lh["mann_whitney"] == pytest.approx(0.17, abs=5e-3)
    assert r["per_draw"][0]["learnable_minus_hard"] == pytest.approx(0.131, abs=5e-4)
    assert r["per_draw"][1]["learnable_minus_hard"] == pytest.approx(0.025, abs=5e-4)
    assert r["sampling_share"] == pytest.approx(0.014, abs=5e-4)  # k samples an item: ~1 % of the variance
    assert r["ood"]["min_p_holm"] == pytest.approx(0.746, abs=5e-4) and r["ood"]["min_p"] > 0.09
    ci = r["online_vs_learnable"]["welch_ci90"]
    assert ci[0] == pytest.approx(-0.031, abs=5e-4) and ci[1] == pytest.approx(0.041, abs=5e-4)


def test_variance_components_recover_a_planted_draw_effect(dp):
    rng = np.random.default_rng(1)
    runs = [{"arm": "x", "draw": d, "seed": s, "delta": m + rng.normal(0, 0.02)}
            for d, m in enumerate(rng.normal(0, 0.1, 400)) for s in range(5)]
    c = dp.components(runs, "x")
    assert c["sd_within"] == pytest.approx(0.02, rel=0.05)
    assert c["sd_between"] == pytest.approx(0.1, rel=0.1)
    assert c["sd_fresh"] == pytest.approx(math.hypot(0.1, 0.02), rel=0.1)


def test_simulated_power_matches_the_textbook_case(dp):
    """Normal runs, sd 0.1 both arms, 20 a side, true difference 0.08: one-sided 0.05 power is about
    Phi(0.08 / (0.1 sqrt(2/20)) - 1.645) = 0.81 (a little less for Welch's t); no difference: the level."""
    comp = {"sd_fresh": 0.1}
    expect = statistics.NormalDist().cdf(0.08 / (0.1 * math.sqrt(0.1)) - 1.645)
    assert dp.power(comp, comp, 20, 20, 0.08, model="normal", sims=2000) == pytest.approx(expect, abs=0.04)
    assert dp.power(comp, comp, 20, 20, 0.0, model="normal", sims=2000) == pytest.approx(0.05, abs=0.02)
    assert dp.neyman(72, 0.03, 0.12) == (14, 58)


# --- the design: held-out sets, runs, draws -----------------------------------------------------------

def test_solution_steps_and_a_shared_step(design):
    assert design.steps("38 + 47 = 85. 85 - 9 = 76. The answer is \\boxed{76}.") == {("+", 38, 47), ("-", 85, 9)}
    assert design.steps("47 + 38 = 85.") == design.steps("38 + 47 = 85.")  # + and * commute
    assert design.steps("9 - 3 = 6.") != design.steps("3 - 9 = -6.")

    class It:
        def __init__(self, solution):
            self.solution = solution

    pool = [It("Tom: 38 + 47 = 85. 85 - 9 = 76.")]
    held = [It("47 + 38 = 85."), It("38 + 48 = 86.")]
    assert design.shares_a_step(held, pool) == [held[0]]


def test_the_committed_sets_share_steps_and_the_designs_do_not(design):
    """The caveat's counts (14 of 126 held-out, 5 of 56 OOD items compute a step of some pool item; 22 OOD items
    repeat a held-out skill and operands), and the design's sets, as committed in prereg/, free of both."""
    from pipeline.config import load_params
    from pipeline.ingest.synthetic import SyntheticOptions, generate, operands_of, template_of
    from pipeline.keys import problem_id

    params = load_params(HERE / "params.yaml")
    old = {s.name: list(generate(SyntheticOptions(**s.options))) for s in params.ingest.sources}
    assert (len(design.shares_a_step(old["heldout"], old["pool"])), len(old["heldout"])) == (14, 126)
    assert (len(design.shares_a_step(old["ood"], old["pool"])), len(old["ood"])) == (5, 56)
    key = lambda i: (i.skill, tuple(sorted(operands_of(i))))  # noqa: E731
    assert sum(key(i) in {key(h) for h in old["heldout"]} for i in old["ood"]) == 22

    new = design.design_sets()
    assert new["pool"] == old["pool"]
    for name in ("heldout", "ood"):
        assert not design.shares_a_step(new[name], new["pool"]), name
        assert not {template_of(i) for i in new[name]} & {template_of(i) for i in new["pool"]}
        assert not {problem_id(i.question) for i in new[name]} & {problem_id(i.question) for i in new["pool"]}
        committed = (HERE / "prereg" / f"{name}.jsonl").read_text(encoding="utf-8")
        assert committed == design.jsonl(new[name]), f"prereg/{name}.jsonl is stale: run design.py sets"
    assert not {key(i) for i in new["ood"]} & {key(i) for i in new["heldout"]}
    assert len(new["heldout"]) >= 120  # L2's test half holds 18 products, 14 of them free of pool steps


def test_the_plan_keeps_the_arms_ratio_in_every_prefix(design):
    cfg = design.load_design()
    runs = cfg["runs"]
    plan = design.plan(runs, first_run=cfg["first_run"])
    assert len(plan) == sum(runs.values())
    assert {a: sum(r["arm"] == a for r in plan) for a in runs} == runs
    assert len({r["item_seed"] for r in plan}) == len(plan)  # every run its own draw
    assert all(re.fullmatch(rf"{r['arm']}-d{r['run']}-s{r['run']}", r["name"]) for r in plan)
    total = len(plan)
    for k in range(1, total + 1):
        for arm, n in runs.items():
            assert abs(sum(r["arm"] == arm for r in plan[:k]) - n * k / total) <= 1, (k, arm)


def test_a_runs_draw_is_fresh_seeded_and_order_free(design):
    rows = [{"problem_id": f"p{i:02d}", "band": "too_hard", "level": "L8" if i >= 36 else "L5"} for i in range(40)]
    configs = {"too_hard": rows[:25], "unsolved": rows[25:]}
    a = design.draw(configs, ["too_hard", "unsolved"], size=16, seed=100)
    assert len({r["problem_id"] for r in a}) == 16
    assert a == design.draw({"too_hard": rows[:25][::-1], "unsolved": rows[25:]}, ["too_hard", "unsolved"], size=16,
                            seed=100)
    assert a != design.draw(configs, ["too_hard", "unsolved"], size=16, seed=101)
    with pytest.raises(ValueError, match="hold 40 items"):
        design.draw(configs, ["too_hard", "unsolved"], size=41, seed=0)
    some = design.draw(configs, ["too_hard", "unsolved"], size=36, seed=0, levels=["L5"])
    assert {r["level"] for r in some} == {"L5"}
    with pytest.raises(ValueError, match="hold 36 items of"):
        design.draw(configs, ["too_hard", "unsolved"], size=37, seed=0, levels=["L5"])


# --- the signal gate -----------------------------------------------------------------------------------

def test_the_signal_gate_steps_only_on_a_signal_and_stops(monkeypatch):
    """A tiny model through the gated AdamW and linear schedule: groups without a signal (zero gradient) leave the
    weights and the schedule alone, where plain AdamW's momentum moves the weights; the gate stops after its steps."""
    import torch
    from transformers import TrainerControl, get_linear_schedule_with_warmup

    gate_mod = _load("signal_gate", monkeypatch)

    def setup():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)
        return model, opt, get_linear_schedule_with_warmup(opt, 0, 100)

    def group(model, opt, sched, signal):
        opt.zero_grad()
        (float(signal) * model(torch.ones(1, 3)).pow(2).sum()).backward()
        opt.step()
        sched.step()

    model, opt, sched = setup()
    gate = gate_mod.SignalGate(steps=3)
    gate.install(opt, sched)
    control = TrainerControl()
    weights, lrs, stopped_at = [], [], None
    for i, signal in enumerate([1, 0, 0, 1, 0, 1, 1]):
        group(model, opt, sched, signal)
        weights.append(model.weight.detach().clone())
        lrs.append(opt.param_groups[0]["lr"])
        if gate.on_step_end(None, None, control).should_training_stop:
            stopped_at = i
            break
    assert torch.equal(weights[0], weights[1]) and torch.equal(weights[1], weights[2])  # skipped: no move
    assert not torch.equal(weights[2], weights[3])
    assert stopped_at == 5 and gate.stats == {"steps_taken": 3, "groups_skipped": 3}
    # the schedule decays over the 3 taken steps, not the trainer's 100: 0.1 * (3 - taken) / 3
    assert lrs == pytest.approx([0.1 * 2 / 3, 0.1 * 2 / 3, 0.1 * 2 / 3, 0.1 / 3, 0.1 / 3, 0.0])

    plain_model, plain_opt, plain_sched = setup()  # the ungated optimizer moves on a zero gradient
    group(plain_model, plain_opt, plain_sched, 1)
    before = plain_model.weight.detach().clone()
    group(plain_model, plain_opt, plain_sched, 0)
    assert not torch.equal(before, plain_model.weight)


# --- the pre-registration's digest ---------------------------------------------------------------------------

def test_the_preregistered_digest_matches_the_analysis_script():
    text = (HERE / "PREREGISTRATION.md").read_text(encoding="utf-8")
    recorded = dict(re.findall(r"`sha256:([0-9a-f]{64})`\s+`([\w./-]+)`", text))
    assert recorded, "PREREGISTRATION.md records no sha256 digest"
    for digest, path in recorded.items():
        actual = hashlib.sha256((HERE / path).read_bytes()).hexdigest()
        assert actual == digest, f"{path} changed after its pre-registration (sha256 {actual})"
    assert "prereg_analysis.py" in recorded.values()


# --- running the design, the fake engine standing in for vLLM and for training -----------------------------------

def _prereg_project(tmp_path):
    """prereg/params.yaml and the held-out set in tmp_path, the fake engine in place of vLLM."""
    import shutil

    import yaml

    raw = yaml.safe_load((HERE / "prereg" / "params.yaml").read_text())
    raw["paths"]["models"] = "data/models"
    raw["policies"]["smollm2-135m-3shot"].update({"model": "fake-model", "revision": "r1", "engine": "fake"})
    raw["rollout"]["engine_options"] = {"fake": {"correct_rate": 0.4}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    for name in ("heldout.jsonl", "ood.jsonl"):
        shutil.copy(HERE / "prereg" / name, tmp_path / name)


def test_the_design_draws_measures_and_analyses_runs(design, tmp_path, monkeypatch):
    """ingest (the held-out set from its JSONL) -> every run's draw -> stand-in checkpoints -> measure base and
    each run on the held-out set only -> the pre-registered analysis reads results/."""
    from click.testing import CliRunner

    from bandvalue import experiment as bv  # beside design.py (the fixture put its folder on sys.path)
    from pipeline.cli import cli

    _prereg_project(tmp_path)
    res = CliRunner().invoke(cli, ["ingest", "--no-progress", "--params", str(tmp_path / "params.yaml")],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    cfg = {**design.load_design(), "runs": {"learnable": 2, "hard": 3}, "arm_size": 3}
    bands = ["learnable"] * 6 + ["too_hard"] * 6 + ["unsolved"] * 4 + ["too_hard"] * 2
    pool = [{"problem_id": f"p{i:02d}", "question": f"q{i}", "answer": "1", "band": b, "pass_rate": 0.5, "n": 8,
             "n_correct": 4, "level": "L9" if i >= 16 else "L3"} for i, b in enumerate(bands)]
    configs = {b: [r for r in pool if r["band"] == b] for b in ("learnable", "too_hard", "unsolved")}
    configs["default"] = pool
    assert design.write_run_arms(configs, cfg, root=tmp_path) == 5
    runs = design.plan(cfg["runs"], first_run=cfg["first_run"])
    drawn = {r["name"]: bv.read_arm(tmp_path / f"data/arms/d{r['run']}/{r['arm']}.jsonl") for r in runs}
    assert all(len(v) == 3 for v in drawn.values())
    assert all(x["level"] == "L3" for v in drawn.values() for x in v)  # L8-L9 never drawn
    assert {x["band"] for r in runs if r["arm"] == "hard" for x in drawn[r["name"]]} <= {"too_hard", "unsolved"}
    assert len({tuple(x["problem_id"] for x in v) for v in drawn.values()}) == 5  # a fresh draw a run
    for i, r in enumerate(runs):  # stand-ins for trained checkpoints
        d = tmp_path / "data/checkpoints" / r["name"]
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(r["name"].encode())
        (d / "train_log.json").write_text(json.dumps({"log": [], "seconds": 1.0, "groups": 16, "groups_with_signal": i}))
    for name in ["base", *(r["name"] for r in runs)]:
        design.measure_run(name, root=tmp_path, design=cfg)
    held = [json.loads(line)["question"] for line in (tmp_path / "heldout.jsonl").read_text().splitlines()]
    import pyarrow.parquet as pq

    measured = pq.read_table(tmp_path / "results" / runs[0]["name"] / "difficulty").num_rows
    assert measured == len(held) == 122  # the held-out set only: the OOD set is not measured
    pa_ = _load("prereg_analysis", monkeypatch)
    res = pa_.analyse(pa_.run_means(tmp_path / "results"))
    assert res["items"] == 122 and res["primary"]["runs"] == [2, 3] and 0 <= res["primary"]["p_one_sided"] <= 1


def test_a_signal_gated_run_trains_with_the_gate(design, tmp_path, monkeypatch):
    """The hard_signal arm's training gets the gate among its callbacks and the cap on groups as its steps; the
    gate's counts land in the run's training log; other arms train as before."""
    from bandvalue import experiment as bv  # beside design.py (the fixture put its folder on sys.path)

    _prereg_project(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    seen = []
    monkeypatch.setattr(bv, "train_arm", lambda rows, *, callbacks=(), config=None, **kw: seen.append((callbacks, config)))

    def fake_train(params, cfg, *, root, arm, draw, seed):  # band-value training's call of train_arm, recorded
        bv.train_arm([], callbacks=["recorder"], config=cfg.grpo)
        out = root / cfg.checkpoints_dir / bv.run_name(arm, draw, seed)
        out.mkdir(parents=True)
        (out / "train_log.json").write_text(json.dumps({"log": [], "seconds": 1.0}))

    monkeypatch.setattr(bv, "train", fake_train)
    cfg = design.load_design()
    plan = design.plan(cfg["runs"], first_run=cfg["first_run"])
    gated = next(r["name"] for r in plan if r["arm"] == "hard_signal")
    plain = next(r["name"] for r in plan if r["arm"] == "hard")
    assert not design.is_trained(gated, root=tmp_path)
    stats = design.train_run(gated, root=tmp_path)
    callbacks, grpo = seen[-1]
    assert callbacks[0] == "recorder" and type(callbacks[1]).__name__ == "SignalGate" and callbacks[1].steps == 16
    assert grpo.steps == 16 * cfg["max_groups_per_step"]
    log = json.loads((tmp_path / "data/checkpoints" / gated / "train_log.json").read_text())
    assert log["signal_gate"] == stats == {"steps_taken": 0, "groups_skipped": 0}
    assert design.is_trained(gated, root=tmp_path)  # the runner measures it without training it again
    del log["signal_gate"]  # stopped between the checkpoint and the gate's counts: trained again
    (tmp_path / "data/checkpoints" / gated / "train_log.json").write_text(json.dumps(log))
    assert not design.is_trained(gated, root=tmp_path)
    assert not design.is_trained(plain, root=tmp_path)
    assert design.train_run(plain, root=tmp_path) is None
    assert design.is_trained(plain, root=tmp_path)
    assert seen[-1][0] == ["recorder"] and seen[-1][1].steps == 16
    with pytest.raises(ValueError, match="no run 'hard-d1-s1'"):
        design.train_run("hard-d1-s1", root=tmp_path)


# --- the exploratory figures beside the pre-registered analysis ------------------------------------------

@pytest.fixture
def ex(monkeypatch):
    return _load("prereg_exploratory", monkeypatch)


def _exact_p(a, b, stat):
    """The exact one-sided permutation p over every split of the pooled runs."""
    from itertools import combinations

    x = [*a, *b]
    observed, hits, total = stat(a, b), 0, 0
    for idx in combinations(range(len(x)), len(a)):
        pa = [x[i] for i in idx]
        pb = [x[i] for i in range(len(x)) if i not in idx]
        hits += stat(pa, pb) >= observed - 1e-12
        total += 1
    return hits / total


def test_the_other_tests_of_the_primary_match_their_exact_permutation_p(ex):
    a, b = [0.31, 0.40, 0.29, 0.35], [0.30, 0.12, 0.22, 0.27, 0.05]
    mean_diff = lambda u, v: statistics.mean(u) - statistics.mean(v)  # noqa: E731

    def rank_sum(u, v):
        return float(ex.ranks(np.asarray([*u, *v], dtype=float))[: len(u)].sum())

    assert ex.mean_permutation_p(a, b) == pytest.approx(_exact_p(a, b, mean_diff), abs=0.005)
    assert ex.rank_sum_permutation_p(a, b) == pytest.approx(_exact_p(a, b, rank_sum), abs=0.005)
    # fully separated arms: the rank sum's p is one split in C(4, 2) = 6; reversed, every split reaches it
    assert ex.rank_sum_permutation_p([3.0, 4.0], [1.0, 2.0]) == pytest.approx(1 / 6, abs=0.005)
    assert ex.rank_sum_permutation_p([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1.0, abs=1e-4)


def test_the_signal_adjusted_difference_recovers_a_planted_arm_effect(ex):
    rng = np.random.default_rng(0)
    first = np.array([True] * 12 + [False] * 40)
    sig = np.where(first, rng.integers(7, 13, 52), rng.integers(1, 9, 52)).astype(float)
    noise = rng.normal(0, 0.005, 52)
    with_arm = ex.adjusted_difference(0.05 * first + 0.01 * sig + noise, first, sig, resamples=2000)
    assert with_arm["difference"] == pytest.approx(0.05, abs=0.01)
    assert with_arm["ci95_bootstrap"][0] < 0.05 < with_arm["ci95_bootstrap"][1]
    # all of the arms' raw difference is the signal count: the adjusted difference is about 0
    signal_only = ex.adjusted_difference(0.01 * sig + noise, first, sig, resamples=2000)
    assert abs(signal_only["difference"]) < 0.01
    assert signal_only["ci95_bootstrap"][0] < 0 < signal_only["ci95_bootstrap"][1]


def test_exploratory_figures_over_made_up_results(ex, tmp_path):
    import pyarrow as pa_
    import pyarrow.parquet as pq

    items = [f"p_{i:02d}" for i in range(10)]

    def measured(name, rate, log=None):
        (tmp_path / name / "difficulty").mkdir(parents=True)
        pq.write_table(pa_.table({"problem_id": items, "pass_rate": [rate] * len(items)}),
                       tmp_path / name / "difficulty" / "part-0.parquet")
        if log is not None:
            (tmp_path / name / "train_log.json").write_text(json.dumps(log))

    measured("base", 0.20)
    for i, (rate, sig) in enumerate([(0.30, 9), (0.31, 11), (0.28, 10)]):
        measured(f"learnable-d{i}-s{i}", rate, {"groups": 16, "groups_with_signal": sig})
    for i, (rate, sig) in enumerate([(0.18, 2), (0.24, 5), (0.21, 3), (0.26, 6)], start=10):
        measured(f"hard-d{i}-s{i}", rate, {"groups": 16, "groups_with_signal": sig})
    measured("hard_signal-d20-s20", 0.25, {"groups": 60, "groups_with_signal": 16,
                                           "signal_gate": {"steps_taken": 16, "groups_skipped": 44}})
    res = ex.explore(tmp_path)
    assert "hard_signal" not in res["signal_against_gain"]["per_arm"]  # one run: no correlation
    for i, (rate, drawn) in enumerate([(0.22, 40), (0.27, 70)], start=21):  # the gate: 16 with a signal every run
        measured(f"hard_signal-d{i}-s{i}", rate, {"groups": drawn, "groups_with_signal": 16,
                                                  "signal_gate": {"steps_taken": 16, "groups_skipped": drawn - 16}})
    three = ex.explore(tmp_path)
    gated = three["signal_against_gain"]["per_arm"]["hard_signal"]
    assert gated == {"runs": 3, "rho": None, "p": None, "constant": 16}  # undefined, not a rho of nan with p 0
    assert "| hard_signal | 3 | undefined: every run had 16 |" in ex.markdown(three)
    s = res["signal"]
    assert s["learnable"]["groups_with_signal"] == 30 and s["learnable"]["per_run_range"] == [9, 11]
    assert s["hard"]["share"] == pytest.approx(16 / 64)
    assert s["hard_signal"]["gate"] == {"steps_taken": [16], "groups_drawn": [60]}
    assert "gate" not in s["hard"]
    hard = res["signal_against_gain"]["per_arm"]["hard"]
    assert hard["runs"] == 4 and hard["rho"] == pytest.approx(1.0)  # more signal, more gain, in order
    o = res["primary_under_other_tests"]
    assert 0 < o["mann_whitney_permutation"] <= 0.03  # every learnable run above every hard one: 1 in C(7, 3)
    text = ex.markdown(res)
    assert text.startswith("*Exploratory") and "| hard_signal | 1 |" in text and "60 a run (60-60)" in text


# --- the result: the locked script on the committed runs -------------------------------------------------------

def _close(got, saved, path="result"):
    """``got`` (a fresh analysis, through JSON) equals ``saved`` to 1e-9 in every number, key for key."""
    if isinstance(saved, dict):
        assert isinstance(got, dict) and got.keys() == saved.keys(), path
        for k in saved:
            _close(got[k], saved[k], f"{path}.{k}")
    elif isinstance(saved, list):
        assert isinstance(got, list) and len(got) == len(saved), path
        for i, (g, s) in enumerate(zip(got, saved, strict=True)):
            _close(g, s, f"{path}[{i}]")
    elif isinstance(saved, float):
        assert got == pytest.approx(saved, rel=1e-9, abs=1e-12), path
    else:
        assert got == saved, path


@pytest.mark.slow
def test_the_pre_registered_result_is_the_locked_scripts_on_the_committed_runs(pa, ex, design):
    """The design ran to its size (every planned run, no other, each measured on all 122 held-out items), and the
    result the write-up reports is what the digest-locked script gives on ``prereg/results`` as committed:
    ``prereg/analysis/*.json`` to 1e-9, and the figures RESULTS.md, README.md and docs/training.md quote."""
    d = design.load_design()
    planned = {r["name"] for r in design.plan(d["runs"], first_run=d["first_run"])}
    results = HERE / "prereg" / "results"
    assert {p.name for p in results.iterdir() if p.is_dir()} == planned | {"base"} and len(planned) == 76
    saved = HERE / "prereg" / "analysis"
    res = json.loads(json.dumps(pa.analyse(pa.run_means(results))))
    _close(res, json.loads((saved / "primary.json").read_text()))
    assert pa.markdown(res) + "\n" == (saved / "primary.md").read_text()
    explored = json.loads(json.dumps(ex.explore(results)))
    _close(explored, json.loads((saved / "exploratory.json").read_text()))
    assert ex.markdown(explored) + "\n" == (saved / "exploratory.md").read_text()

    assert res["items"] == 122 and {a: x["runs"] for a, x in res["arms"].items()} == d["runs"]
    p = res["primary"]
    assert p["decided"] and p["p_one_sided"] < 0.001 and p["ci95"][0] > 0  # learnable > hard, decided
    assert not any(s["decided"] for s in res["secondary"])  # neither secondary decided
    quoted = {  # each figure as the write-up words it
        "diff": f"{p['diff']:+.3f}", "ci95": f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]", "p": f"{p['p_one_sided']:.5f}",
    }
    text = {name: (REPO / name).read_text(encoding="utf-8")
            for name in ("experiments/band_value/RESULTS.md", "README.md", "docs/training.md")}
    for name, body in text.items():
        for what in ("diff", "ci95", "p"):
            assert quoted[what] in body, f"{name} does not quote the primary's {what} {quoted[what]}"
    results_md = text["experiments/band_value/RESULTS.md"]
    for c in (p, *res["secondary"]):  # each contrast's row of the table: difference, both intervals, p
        runs = f"| {c['runs'][0]} / {c['runs'][1]} | "
        row = next((line for line in results_md.splitlines() if runs in line and c["contrast"] in line), "")
        for ci in ("ci90", "ci95"):
            assert f"[{c[ci][0]:+.3f}, {c[ci][1]:+.3f}]" in row, (c["contrast"], ci, row)
        assert f"{c['diff']:+.3f}" in row, (c["contrast"], row)
        if c is not p:
            assert f"| {c['p_one_sided']:.3f} | {c['p_holm']:.2f} | no |" in row, (c["contrast"], row)
    adjusted = explored["signal_against_gain"]["adjusted"]
    assert f"{adjusted['difference']:+.3f}" in results_md


# The first design's pool, as the audit of 2 Dec 2026 counted it (its published folder is in no cache any more):
# 108 items, of which L1-L7 (the levels the runs drew from) held 22 learnable and 39 hard.
FIRST_POOL = {"items": 108, "learnable": 22, "hard": 39, "size": 16, "steps": 16, "model": "135M"}


def _blocks(text: str, needle: str) -> list[str]:
    """Each paragraph or list item of ``text`` (tables left out) that holds ``needle``, with the one after it (a
    claim's scope may be the next bullet)."""
    blocks = [b for b in re.split(r"\n\s*\n|\n(?=\s*- )", text) if not b.lstrip().startswith("|")]
    hits = [b + "\n" + (blocks[i + 1] if i + 1 < len(blocks) else "") for i, b in enumerate(blocks) if needle in b]
    assert hits, f"no paragraph quotes {needle!r}"
    return hits


def _block(text: str, needle: str) -> str:
    return _blocks(text, needle)[0]


def test_every_claim_of_the_first_result_carries_its_scope(pa, design):
    """Each place that quotes the pre-registered primary names, in the same paragraph, the model, the steps, the one
    pool and how much the runs' draws overlap (the expected share two learnable draws have in common); and the
    exploratory signal-adjusted figure is quoted only beside what it rests on."""
    saved = json.loads((HERE / "prereg" / "analysis" / "primary.json").read_text())
    diff = f"{saved['primary']['diff']:+.3f}"
    shared = design.expected_shared(FIRST_POOL["size"], FIRST_POOL["learnable"])
    share = f"{100 * shared / FIRST_POOL['size']:.0f} %"
    assert share == "73 %" and f"{shared:.1f}" == "11.6"
    for name in ("experiments/band_value/RESULTS.md", "README.md", "docs/training.md"):
        for block in _blocks((REPO / name).read_text(encoding="utf-8"), diff):
            for what in (FIRST_POOL["model"], f"{FIRST_POOL['steps']} GRPO steps", f"{FIRST_POOL['items']}", share):
                assert what in block, f"{name}: the paragraph quoting {diff} does not name {what!r}:\n{block}"
            assert "each its own item draw" not in block and "about the band, not about one draw" not in block
    explored = json.loads((HERE / "prereg" / "analysis" / "exploratory.json").read_text())
    support = explored["signal_against_gain"]["support"]
    adjusted = f"{explored['signal_against_gain']['adjusted']['difference']:+.3f}"
    for name in ("experiments/band_value/RESULTS.md", "docs/training.md"):
        block = _block((REPO / name).read_text(encoding="utf-8"), adjusted)
        assert f"{support['predicted_pooled']:+.3f}" in block and f"{support['gated_observed']:+.3f}" in block, name
        assert f"only {support['second_arm_runs_at_or_above_quartile']} of the 51 hard runs" in block, name
    assert "leaves about no learnable" not in (REPO / "docs" / "training.md").read_text(encoding="utf-8")


def test_the_children_claim_is_the_50_run_figure():
    """docs/reformulation.md no longer says reformulating bought training value (a superseded 3-seed design); it
    quotes the 50-run design's children > hard row as RESULTS.md has it."""
    doc = (REPO / "docs" / "reformulation.md").read_text(encoding="utf-8")
    assert "bought training value" not in doc
    row = next(line for line in (HERE / "RESULTS.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| children > hard | 10 / 10 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    diff, holm = cells[2].split()[0], float(cells[5])
    block = _block(doc, "superseded design")
    assert diff in block and f"Holm-adjusted {holm:.2f}" in block and "not" in block


# --- the gated design (PREREGISTRATION_GATED.md) ---------------------------------------------------------------

GATED = HERE / "gated"


@pytest.fixture
def ga(monkeypatch):
    return _load("gated_analysis", monkeypatch)


def test_a_level_matched_draw_copies_the_mix(design):
    assert design.allocate({"L1": 10, "L2": 5, "L3": 1}, 16) == {"L1": 10, "L2": 5, "L3": 1}
    assert design.allocate({"L1": 3, "L2": 3, "L3": 3}, 16) == {"L1": 6, "L2": 5, "L3": 5}  # ties: mix order
    assert design.allocate({"L1": 1, "L6": 0}, 4) == {"L1": 4, "L6": 0}
    with pytest.raises(ValueError, match="empty level mix"):
        design.allocate({"L1": 0}, 4)
    rows = [{"problem_id": f"p{i:02d}", "level": f"L{1 + i % 4}", "band": "x"} for i in range(40)]
    learnable = rows[:6]  # levels L1 L2 L3 L4 L1 L2
    mix = design.level_mix(learnable, ["L1", "L2", "L3", "L4"])
    assert mix == {"L1": 2, "L2": 2, "L3": 1, "L4": 1}
    a = design.draw({"default": rows}, ["default"], size=12, seed=7, levels=["L1", "L2", "L3", "L4"], mix=mix)
    assert sorted(r["level"] for r in a) == sorted(["L1"] * 4 + ["L2"] * 4 + ["L3"] * 2 + ["L4"] * 2)
    assert len({r["problem_id"] for r in a}) == 12
    assert a == design.draw({"default": rows[::-1]}, ["default"], size=12, seed=7, levels=["L1", "L2", "L3", "L4"],
                            mix=mix)  # order-free
    assert a != design.draw({"default": rows}, ["default"], size=12, seed=8, levels=["L1", "L2", "L3", "L4"], mix=mix)
    with pytest.raises(ValueError, match="items of L3, the level mix asks for"):
        design.draw({"default": rows[:8]}, ["default"], size=8, seed=0, mix={"L3": 1})


def test_the_gated_design_is_runnable_and_its_heldout_set_is_disjoint(design):
    cfg = design.load_design(GATED / "design.yaml")
    assert cfg["runs"] == {"learnable": 16, "random": 28}
    assert set(cfg["signal_gated"]) == set(cfg["runs"]) and cfg["level_matched"] == {"random": "learnable"}
    plan = design.plan(cfg["runs"], first_run=cfg["first_run"])
    assert len(plan) == 44 and plan[0]["run"] == 200
    for k in range(1, 45):
        assert abs(sum(r["arm"] == "learnable" for r in plan[:k]) - 16 * k / 44) <= 1
    sets = design.gated_sets(GATED, cfg)
    committed = (GATED / "heldout.jsonl").read_text(encoding="utf-8")
    assert committed == design.jsonl(sets["heldout"])  # the committed set is what the generator gives
    assert not design.shares_a_step(sets["heldout"], sets["pool"])
    assert len(sets["pool"]) == 25 + 18 + 5 * 36 and len(sets["heldout"]) == 123
    assert {(i.skill, tuple(i.question.split())) for i in sets["heldout"]}.isdisjoint(
        {(i.skill, tuple(i.question.split())) for i in sets["pool"]})


def _gated_results(tmp_path, learnable, random_, *, groups=None):
    import pyarrow as pa_
    import pyarrow.parquet as pq

    def write(name, shift, gate=None):
        (tmp_path / name / "difficulty").mkdir(parents=True)
        pq.write_table(pa_.Table.from_pylist([{"problem_id": f"p{i}", "pass_rate": b + shift}
                                              for i, b in enumerate([0.2, 0.4])]),
                       tmp_path / name / "difficulty" / "part-0.parquet")
        if gate is not None:
            (tmp_path / name / "train_log.json").write_text(json.dumps({"signal_gate": gate}))

    write("base", 0.0)
    groups = groups or {}
    def skipped(arm, i, default):
        g = groups.get(arm, default)
        return int(g[i]) if isinstance(g, list) else g

    for r, s in enumerate(learnable):
        write(f"learnable-d{r}-s{r}", s, {"steps_taken": 16, "groups_skipped": skipped("learnable", r, 12)})
    for r, s in enumerate(random_, start=100):
        write(f"random-d{r}-s{r}", s, {"steps_taken": 16, "groups_skipped": skipped("random", r - 100, 20)})
    return tmp_path


def test_the_gated_analysis_decides_either_way(ga, tmp_path):
    rng = np.random.default_rng(0)
    # a planted +0.10 with the planning spreads: the primary is decided, the equivalence reading is not
    res = ga.analyse(*(lambda p: (ga.run_means(p), ga.gate_counts(p)))(
        _gated_results(tmp_path / "a", 0.10 + rng.normal(0, 0.045, 16), rng.normal(0, 0.08, 28),
                       groups={"learnable": list(rng.integers(4, 20, 16)), "random": list(rng.integers(10, 30, 28))})))
    lo, hi = res["groups_per_step"]["saved"]["ci95"]
    assert lo < res["groups_per_step"]["saved"]["groups_per_step"] < hi
    assert res["primary"]["contrast"] == "learnable > random" and res["primary"]["runs"] == [16, 28]
    assert res["primary"]["decided"] and not res["equivalence"]["decided"]
    assert res["primary"]["ci90"][1] == pytest.approx(res["equivalence"]["upper_one_sided_95"])
    # no difference, tight runs: the band adds less than +0.05 over filtering
    res = ga.analyse(*(lambda p: (ga.run_means(p), ga.gate_counts(p)))(
        _gated_results(tmp_path / "b", rng.normal(0, 0.02, 16), rng.normal(0, 0.03, 28))))
    assert not res["primary"]["decided"] and res["equivalence"]["decided"]
    # every run drew the same groups: a zero spread gives the difference itself as its interval
    assert res["groups_per_step"]["saved"]["ci95"] == [pytest.approx(0.5), pytest.approx(0.5)]
    # groups per step: learnable (16 + 12) / 16 = 1.75, random (16 + 20) / 16 = 2.25: 0.5 a step saved, 4 rollouts
    saved = res["groups_per_step"]["saved"]
    assert res["groups_per_step"]["arms"]["learnable"]["mean"] == pytest.approx(1.75)
    assert saved["groups_per_step"] == pytest.approx(0.5) and saved["rollouts_per_step"] == pytest.approx(4.0)
    assert saved["rollouts_per_run"] == pytest.approx(64.0)
    assert "learnable > random" in ga.markdown(res)
    # the achieved power is the simulation at the runs' spreads
    assert 0.9 < res["achieved_power"]["equivalence_at_zero"] <= 1.0


def test_the_gated_power_simulation_matches_its_textbook_cases(ga):
    # at a true 0, Welch's one-sided test rejects about alpha of experiments
    assert ga.simulated(0.05, 0.08, 16, 28, effect=0.0, what="primary") == pytest.approx(0.05, abs=0.006)
    # at equal sds, large n, the power approaches the normal-theory figure: z = 0.05 / se - 1.645
    se = math.sqrt(0.05 ** 2 / 40 + 0.05 ** 2 / 40)
    normal = 0.5 * (1 + math.erf((0.05 / se - 1.6449) / math.sqrt(2)))
    assert ga.simulated(0.05, 0.05, 40, 40, effect=0.05, what="primary") == pytest.approx(normal, abs=0.02)
    with pytest.raises(ValueError, match="primary, equivalence or neither"):
        ga.simulated(0.05, 0.05, 4, 4, effect=0.0, what="both")


def test_the_gated_preregistration_records_the_locked_files():
    text = (HERE / "PREREGISTRATION_GATED.md").read_text(encoding="utf-8")
    for name in ("gated_analysis.py", "gated/design.yaml", "prereg_analysis.py", "signal_gate.py"):
        digest = hashlib.sha256((HERE / name).read_bytes()).hexdigest()
        assert f"`sha256:{digest}` `{name}`" in text, f"{name} changed after the pre-registration (or is not recorded)"
