"""The band-value experiment's pure parts: the arms' draw, the measurement params, the report's numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.config import ConfigError, load_params

REPO = Path(__file__).resolve().parent.parent
EXPERIMENT = REPO / "experiments/band_value"
if str(EXPERIMENT) not in sys.path:  # the experiment's own package, bandvalue (its stages: python -m bandvalue there)
    sys.path.append(str(EXPERIMENT))

from bandvalue import experiment as bv  # noqa: E402
from bandvalue import report as rep  # noqa: E402


def rows(prefix, n, band):
    return [{"problem_id": f"{prefix}{i:02d}", "question": f"q {prefix}{i}", "answer": str(i), "band": band}
            for i in range(n)]


def configs():
    learnable, too_hard = rows("l", 5, "learnable"), rows("h", 3, "too_hard")
    unsolved, easy = rows("u", 4, "unsolved"), rows("e", 6, "too_easy")
    return {"learnable": learnable, "too_hard": too_hard, "unsolved": unsolved,
            "default": learnable + too_hard + unsolved + easy}


ARMS = {"learnable": ["learnable"], "hard": ["too_hard", "unsolved"], "random": ["default"], "online": ["default"]}


def test_arms_band_arms_disjoint_random_from_the_whole_pool_online_every_row():
    arms = bv.select_arms(configs(), arms=ARMS, size=None, seed=0, online=["online"])
    assert list(arms) == ["learnable", "hard", "random", "online"]
    assert [len(a) for a in arms.values()] == [5, 5, 5, 18]  # drawn arms: the smallest pool (learnable's 5)
    band_ids = [r["problem_id"] for a in ("learnable", "hard") for r in arms[a]]
    assert len(band_ids) == len(set(band_ids))
    assert {r["band"] for r in arms["learnable"]} == {"learnable"}
    assert {r["band"] for r in arms["hard"]} <= {"too_hard", "unsolved"}
    assert sorted(r["problem_id"] for r in arms["online"]) == sorted(r["problem_id"] for r in configs()["default"])
    # random is drawn from the whole pool whatever the other arms took: the same rows with or without them
    alone = bv.select_arms(configs(), arms={"learnable": ["learnable"], "random": ["default"]}, size=5, seed=0)
    assert alone["random"] == arms["random"]
    assert bv.select_arms(configs(), arms=ARMS, size=None, seed=0, online=["online"]) == arms
    other = bv.select_arms(configs(), arms=ARMS, size=3, seed=1, online=["online"])
    assert [len(a) for a in other.values()] == [3, 3, 3, 18] and other["random"] != arms["random"][:3]


def test_the_random_arm_holds_the_pools_bands_in_proportion():
    """Over many draws the random arm's band mix is the pool's (the old draw, from what the band arms left, was
    mostly hard)."""
    pool = configs()
    counts = {"learnable": 0, "too_hard": 0, "unsolved": 0, "too_easy": 0}
    for seed in range(400):
        for r in bv.select_arms(pool, arms=ARMS, size=None, seed=seed, online=["online"])["random"]:
            counts[r["band"]] += 1
    share = {b: c / (400 * 5) for b, c in counts.items()}
    expect = {"learnable": 5 / 18, "too_hard": 3 / 18, "unsolved": 4 / 18, "too_easy": 6 / 18}
    assert all(abs(share[b] - expect[b]) < 0.03 for b in expect), share


def test_an_empty_arm_is_an_error():
    cfg = configs()
    cfg["learnable"] = []
    with pytest.raises(ConfigError, match="an arm has no items"):
        bv.select_arms(cfg, arms=ARMS, size=None, seed=0, online=["online"])
    with pytest.raises(ConfigError, match="every arm is online"):
        bv.select_arms(configs(), arms={"online": ["default"]}, size=None, seed=0, online=["online"])


def test_experiment_config_loads_and_rejects_typos(tmp_path):
    cfg = bv.load_config(EXPERIMENT / "band_value.yaml")
    assert set(cfg.arms) == {"learnable", "hard", "random", "children", "online"} and cfg.online_arms == ["online"]
    assert len(cfg.seeds) >= 5 and len(cfg.draws) >= 2 and cfg.ood_source
    # dvc.yaml's train matrix lists the arms by name (DVC cannot iterate a mapping's keys): the same ones
    matrix = yaml.safe_load((EXPERIMENT / "dvc.yaml").read_text())["stages"]["train"]["matrix"]
    assert matrix == {"arm": list(cfg.arms), "draw": "${draws}", "seed": "${seeds}"}
    raw = yaml.safe_load((EXPERIMENT / "band_value.yaml").read_text())
    raw["grpo"]["stpes"] = 3
    bad = tmp_path / "band_value.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="stpes"):
        bv.load_config(bad)
    del raw["grpo"]["stpes"]
    raw["online_arms"] = ["onlien"]
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="onlien"):
        bv.load_config(bad)
    bad.write_text("arms: [")
    with pytest.raises(ConfigError, match="cannot read the experiment config"):
        bv.load_config(bad)


def test_train_and_measure_generate_alike():
    """The measured policy's sampling is the trainer's: same length cap and temperature, and it stops at the
    newline where training's generation ends."""
    params = load_params(EXPERIMENT / "params.yaml")
    cfg = bv.load_config(EXPERIMENT / "band_value.yaml")
    sampling = params.policies[params.rollout.policies[0]].sampling
    assert sampling.stop == ["\n"]
    assert (sampling.max_tokens, sampling.temperature) == (cfg.grpo.max_completion_tokens, cfg.grpo.temperature)


def test_train_refuses_a_grpo_block_that_generates_unlike_the_policy(tmp_path):
    make_project(tmp_path, max_tokens=16)  # the policy caps at 16 tokens, grpo at 48: nothing is trained
    params, cfg = load_params(tmp_path / "params.yaml"), bv.load_config(tmp_path / "band_value.yaml")
    with pytest.raises(ConfigError, match=r"max_completion_tokens=48.*make them equal"):
        bv.train(params, cfg, root=tmp_path, arm="learnable", draw=0, seed=0)
    with pytest.raises(ConfigError, match="unknown draw 7"):
        bv.train(params, cfg, root=tmp_path, arm="learnable", draw=7, seed=0)
    assert not (tmp_path / "data").exists()


def test_measure_params_measure_one_policy_named_by_its_weights(tmp_path):
    params = load_params(EXPERIMENT / "params.yaml")
    cfg = bv.load_config(EXPERIMENT / "band_value.yaml")
    names = bv.measured_names(cfg)
    assert names[0] == "base" and len(names) == 1 + len(cfg.arms) * len(cfg.draws) * len(cfg.seeds) == 51
    for name in bv.runs(cfg):
        d = tmp_path / cfg.checkpoints_dir / name
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(name.encode())
    base = bv.measure_params(params, cfg, root=tmp_path, name="base")
    raw = bv.measure_params(params, cfg, root=tmp_path, name="hard-d0-s0")
    assert raw["rollout"]["sources"] == base["rollout"]["sources"] == ["heldout", "ood"]
    assert base["rollout"]["policies"] == ["smollm2-135m-3shot"] and raw["rollout"]["policies"] == ["hard-d0-s0"]
    ckpt = raw["policies"]["hard-d0-s0"]
    assert list(raw["policies"]) == ["hard-d0-s0"]
    assert ckpt["model"] == "data/checkpoints/hard-d0-s0" and ckpt["revision"].startswith("sha256:")
    other = bv.measure_params(params, cfg, root=tmp_path, name="learnable-d0-s0")
    assert ckpt["revision"] != other["policies"]["learnable-d0-s0"]["revision"]
    assert ckpt["sampling"] == base["policies"]["smollm2-135m-3shot"]["sampling"]
    # samples in the cache's measure/<name>, the tables the report reads in git's results/<name>
    assert raw["paths"]["rollouts"] == "data/measure/hard-d0-s0/rollouts"
    assert raw["paths"]["difficulty"] == "results/hard-d0-s0/difficulty" and raw["paths"]["problems"] == "data/problems"
    assert base["paths"]["policies"] == "results/base/policies"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert load_params(path).rollout.sources == ["heldout", "ood"]
    with pytest.raises(ConfigError, match="unknown policy 'hard-d9-s0'"):
        bv.measure_params(params, cfg, root=tmp_path, name="hard-d9-s0")
    (tmp_path / cfg.checkpoints_dir / "online-d1-s4" / "model.safetensors").unlink()
    (tmp_path / cfg.checkpoints_dir / "online-d1-s4").rmdir()
    with pytest.raises(ConfigError, match="no checkpoint of online-d1-s4; train it first"):
        bv.measure_params(params, cfg, root=tmp_path, name="online-d1-s4")


def diff_row(pid, pol, n_correct, flagged=None, band="learnable"):
    return {"problem_id": pid, "policy_id": pol, "n": 8, "pass_rate": n_correct / 8, "n_correct": n_correct,
            "ci_low": 0.0, "ci_high": 1.0, "flagged_correct_rate": flagged, "band": band}


def test_summary_pass_rate_delta_and_flags():
    diff = [diff_row(f"p{i}", "B", 2) for i in range(10)]
    diff += [diff_row(f"p{i}", "L", 4, flagged=0.5) for i in range(10)]
    diff += [diff_row("p99", "L", 8)]  # measured by L only: not compared
    rows = rep.summarize(diff, {"base": "B", "learnable-s0": "L"}, base="base", runs={"learnable-s0": ("learnable", 0, 0)},
                     n_boot=200, signal={"learnable-s0": (16, 13)})
    base, arm = rows
    assert base.items == arm.items == 10
    assert base.pass_rate == pytest.approx(0.25) and base.delta is None and base.flagged_correct_rate == 0.0
    assert arm.pass_rate == pytest.approx(0.5) and arm.delta == pytest.approx(0.25)
    assert arm.delta_low == pytest.approx(0.25) and arm.ci_low == pytest.approx(0.5)  # no spread: a point interval
    assert arm.flagged_correct_rate == pytest.approx(0.5) and arm.bands["learnable"] == 10
    table = rep.markdown(rows)
    assert ("| learnable-s0 | learnable | 0 | 0 | 10 | 0.500 [0.500, 0.500] | +0.250 [+0.250, +0.250] | 0 / 0 / 0 "
            "| 0.500 |") in table
    assert "pass rate [95 % CI, items resampled]" in table.splitlines()[0]
    # with the training log: the steps whose group rewards differed (the others give GRPO a zero advantage)
    log = [{"step": 1, "frac_reward_zero_std": 1.0}, {"step": 2, "frac_reward_zero_std": 0.0},
           {"step": 3, "frac_reward_zero_std": 0.5}]
    lines = rep.markdown(rows, {"learnable-s0": log}).splitlines()
    assert lines[0].endswith("| GRPO steps with a signal | groups with a signal |") and lines[2].endswith("| | |")
    assert lines[3].endswith("| 0.500 | 0 | 10 | 0 | 0 | 2 / 3 | 13 / 16 |")  # the base trained nothing
    # per-item drift against the base: 2/8 -> 4/8 is not credible on one item, 0/8 -> 8/8 is
    assert (base.items_rose, arm.items_rose, arm.items_fell, arm.band_changed) == (None, 0, 0, 0)
    moved = rep.summarize([diff_row("a", "B", 0, band="unsolved"), diff_row("b", "B", 4), diff_row("c", "B", 8, band="too_easy"),
                       diff_row("a", "L", 8, band="too_easy"), diff_row("b", "L", 4), diff_row("c", "L", 0, band="unsolved")],
                      {"base": "B", "learnable-s0": "L"}, base="base", runs={"learnable-s0": ("learnable", 0, 0)}, n_boot=50)
    assert (moved[1].items_rose, moved[1].items_fell, moved[1].band_changed) == (1, 1, 2)
    # over seeds: the arm's mean change, its range, and how many seeds' intervals exclude 0
    rows2 = rep.summarize(diff + [diff_row(f"p{i}", "L1", 1) for i in range(10)], {"base": "B", "learnable-s0": "L",
                      "learnable-s1": "L1"}, base="base", runs={"learnable-s0": ("learnable", 0, 0),
                                                               "learnable-s1": ("learnable", 0, 1)}, n_boot=200,
                      signal={"learnable-s0": (16, 13), "learnable-s1": (16, 3)})
    (s,) = rep.by_arm(rows2)
    assert (s.arm, s.runs, s.credibly_up, s.credibly_down, s.signal_share) == ("learnable", 2, 1, 1, 0.5)
    assert s.mean_delta == pytest.approx((0.25 - 0.125) / 2) and (s.min_delta, s.max_delta) == pytest.approx((-0.125, 0.25))
    arms_table = rep.markdown_arms([s])
    assert "| learnable | 2 | +0.062 [-0.125, +0.250] | 1 / 1 | 0.250 | 0.50 |" in arms_table
    assert "mean over runs [min, max over runs]" in arms_table.splitlines()[0]
    with pytest.raises(ValueError, match="no held-out measurement"):
        rep.summarize(diff, {"base": "B", "hard-s0": "H"}, base="base", runs={"hard-s0": ("hard", 0, 0)})


def test_contrasts_between_arms_carry_the_run_spread():
    """Arm A - arm B, averaged over runs and items; the interval resamples runs and items and the p-value permutes
    the runs' labels, so two runs that disagree give an interval across 0 even when the means differ."""
    base = [diff_row(f"p{i}", "B", 4) for i in range(20)]
    agree = [diff_row(f"p{i}", pol, c) for i in range(20) for pol, c in (("L0", 6), ("L1", 6), ("H0", 2), ("H1", 2))]
    names = {"base": "B", "learnable-s0": "L0", "learnable-s1": "L1", "hard-s0": "H0", "hard-s1": "H1"}
    runs = {"learnable-s0": ("learnable", 0, 0), "learnable-s1": ("learnable", 0, 1), "hard-s0": ("hard", 0, 0),
            "hard-s1": ("hard", 0, 1)}
    (c,) = rep.contrasts(base + agree, names, base="base", runs=runs, n_boot=500)
    assert (c.better, c.worse, c.runs) == ("learnable", "hard", (2, 2))  # the other arms were not trained
    assert c.diff == pytest.approx(0.5) and c.ci_low == pytest.approx(0.5)
    # 2 + 2 runs: 6 splits, the observed one and its mirror as extreme: p = 2/6, however large the gap
    assert c.p_value == pytest.approx(1 / 3) and c.p_holm == pytest.approx(1 / 3)
    split = [diff_row(f"p{i}", pol, c) for i in range(20) for pol, c in (("L0", 7), ("L1", 1), ("H0", 2), ("H1", 2))]
    (c,) = rep.contrasts(base + split, names, base="base", runs=runs, n_boot=500)
    assert c.diff == pytest.approx(0.25) and c.ci_low < 0 < c.ci_high
    assert c.simultaneous_low <= c.ci_low and c.simultaneous_high >= c.ci_high
    line = rep.markdown_contrasts([c]).splitlines()
    assert "p (permutation over runs, two-sided)" in line[0] and "Holm" in line[0] and "Bonferroni over 1" in line[0]
    assert line[2].startswith("| learnable > hard | 2 / 2 | +0.250 [")


def test_simultaneous_intervals_widen_with_the_number_of_contrasts():
    """Three trained arms give three predictions; their simultaneous intervals (Bonferroni, 1 - 0.05/3) contain the
    95 % ones and are wider whenever the runs disagree."""
    base = [diff_row(f"p{i}", "B", 4) for i in range(20)]
    noise = np.random.default_rng(0).integers(-2, 3, size=(6, 20))  # per policy and item: resampling items matters
    rows = [diff_row(f"p{i}", pol, c + noise[j, i]) for i in range(20)
            for j, (pol, c) in enumerate((("L0", 6), ("L1", 3), ("H0", 3), ("H1", 2), ("R0", 5), ("R1", 2)))]
    names = {"base": "B", "learnable-s0": "L0", "learnable-s1": "L1", "hard-s0": "H0", "hard-s1": "H1",
             "random-s0": "R0", "random-s1": "R1"}
    runs = {n: (n.split("-")[0], 0, int(n[-1])) for n in names if n != "base"}
    cs = rep.contrasts(base + rows, names, base="base", runs=runs, n_boot=4000)
    assert [(c.better, c.worse) for c in cs] == [("learnable", "hard"), ("learnable", "random"), ("random", "hard")]
    for c in cs:
        assert c.simultaneous_low <= c.ci_low and c.simultaneous_high >= c.ci_high
        assert c.simultaneous_high - c.simultaneous_low > c.ci_high - c.ci_low
    assert "Bonferroni over 3" in rep.markdown_contrasts(cs).splitlines()[0]


def test_holm_adjusts_known_p_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert rep.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert rep.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert rep.holm([0.02]) == [0.02] and rep.holm([]) == []


def test_permutation_test_over_runs():
    # 3 vs 3 runs, fully separated: 20 splits, only the observed one and its mirror reach |diff| = 3
    assert rep.permutation_test([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert rep.permutation_test([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    # 10 vs 10 runs (the experiment's 2 draws x 5 seeds): exact over 184,756 splits; fully separated, only the
    # observed split and its mirror are as extreme
    a, b = [0.5 + 0.01 * i for i in range(10)], [0.4 + 0.01 * i for i in range(10)]
    assert rep.permutation_test(a, b) == pytest.approx(2 / 184_756)
    # overlapping runs; more splits than n_resamples: the seeded Monte Carlo estimate, close to the exact value
    a, b = [0.42 + 0.01 * i for i in range(10)], [0.4 + 0.01 * i for i in range(10)]
    exact = rep.permutation_test(a, b)
    assert 0.05 < exact < 0.5
    assert rep.permutation_test(a, b, n_resamples=5000) == pytest.approx(exact, abs=0.02)
    with pytest.raises(ValueError, match="both arms"):
        rep.permutation_test([1.0], [])


def test_heldout_and_ood_share_no_template_or_numbers_with_the_pool():
    """The experiment's sources as its params generate them: the pool's templates (skill, phrasing) and operand
    tuples never occur in the held-out or OOD items; held-out has >= 120 items."""
    from pipeline.ingest.synthetic import SyntheticOptions, generate, operands_of, template_of

    params = load_params(EXPERIMENT / "params.yaml")
    items = {s.name: list(generate(SyntheticOptions(**s.options))) for s in params.ingest.sources}
    pool = items["pool"]
    pool_templates = {template_of(i) for i in pool}
    pool_numbers = {(i.skill, tuple(sorted(operands_of(i)))) for i in pool}
    assert len(items["heldout"]) >= 120 and len(items["ood"]) >= 40
    for name in ("heldout", "ood"):
        assert not pool_templates & {template_of(i) for i in items[name]}, name
        assert not pool_numbers & {(i.skill, tuple(sorted(operands_of(i)))) for i in items[name]}, name
        assert not {i.question for i in pool} & {i.question for i in items[name]}
    assert not {template_of(i) for i in items["heldout"]} & {template_of(i) for i in items["ood"]}
    assert {i.skill for i in items["heldout"]} == {i.skill for i in items["ood"]} == {i.skill for i in pool
                                                                                      if i.level <= "L7"}


def test_the_same_completion_text_gets_the_same_verdict_in_training_and_measurement():
    """Training's reward (completions cut at the policy's stop strings) and the measurement (vLLM returns the text
    before its first stop string; the verify stage grades it) see the same text, so give the same verdict. Without
    the cut a completion running past its line is graded on its last answer."""
    from pipeline.rewards import SCORES, trl_reward
    from pipeline.train.grpo import cut_at_stop, stop_reward
    from pipeline.verify import judge

    params = load_params(EXPERIMENT / "params.yaml")
    stop = params.policies[params.rollout.policies[0]].sampling.stop
    cases = [(" 3 + 5 = 8. The answer is 8.\n", "8"), (" 3 + 5 = 8. The answer is 8.\nQ: What is 2 + 7?\nA: 9", "8"),
             (" 52 - 27 = 35. The answer is 35.\nWait: 52 - 27 = 25. The answer is 25.", "25"),
             (" The answer is 12.\n\nQ: What is 12 + 1?\nA: 13. The answer is 13.", "13"), (" The answer is 85.", "85"),
             (" 38 + 47 = 85.", "85")]  # no stated answer: the verifier's no_answer, in both paths
    reward = stop_reward(trl_reward(options=params.verify, workers=1), stop)
    trained = reward(completions=[c for c, _ in cases], answer=[g for _, g in cases])
    measured = [SCORES[judge(g, cut_at_stop(c, stop), options=params.verify).status] for c, g in cases]
    assert trained == measured == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    uncut = trl_reward(options=params.verify, workers=1)(completions=[c for c, _ in cases], answer=[g for _, g in cases])
    assert uncut != trained  # the old path graded text the measurement never sees
    # conversational completions are cut message by message
    conv = reward(completions=[[{"role": "assistant", "content": cases[1][0]}]], answer=["8"])
    assert conv == [1.0]
    assert cut_at_stop("a\nb\n\nc", ["\n\n", "\n"]) == "a" and cut_at_stop("abc", ["\n"]) == "abc"


def make_project(tmp_path, *, model: str = "fake-model", max_tokens: int = 48, **exp) -> dict:
    """The experiment's params and band_value.yaml in tmp_path, the fake engine standing in for vLLM; ``exp``
    overrides band_value.yaml's keys. Returns the band_value.yaml written."""
    raw = yaml.safe_load((EXPERIMENT / "params.yaml").read_text())
    raw["paths"]["models"] = "data/models"
    policy = raw["policies"]["smollm2-135m-3shot"]
    policy.update({"model": model, "revision": "r1", "engine": "fake"})
    policy["sampling"]["max_tokens"] = max_tokens
    raw["rollout"]["engine_options"] = {"fake": {"correct_rate": 0.3}}  # hard parents for the children arm
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    cfg = yaml.safe_load((EXPERIMENT / "band_value.yaml").read_text())
    cfg.update(exp)
    (tmp_path / "band_value.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


def cli_runner(tmp_path):
    from click.testing import CliRunner

    from bandvalue.cli import band_value
    from pipeline.cli import cli

    def run(*args):  # "band-value ...": the experiment's own command line (python -m bandvalue), else passband's
        command, args = (band_value, args[1:]) if args[0] == "band-value" else (cli, args)
        res = CliRunner().invoke(command, [*args, "--params", str(tmp_path / "params.yaml")], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    return run


def publish_project(run) -> None:
    for stage in (["ingest", "--no-progress"], ["rollout", "--no-progress"], ["verify", "--no-progress"],
                  ["annotate", "--no-progress"], ["reformulate", "--no-progress"],
                  ["rollout", "--set", "reformulated", "--no-progress"], ["verify", "--set", "reformulated", "--no-progress"],
                  ["annotate", "--set", "reformulated", "--no-plots", "--no-progress"], ["publish"]):
        run(*stage)


def test_experiment_stages_with_the_fake_engine(tmp_path):
    """ingest -> rollout -> verify -> annotate -> reformulate (and its set's stages) -> publish -> arms ->
    measure -> report through the CLI, the fake engine standing in for vLLM and two-byte files for the
    trained checkpoints (training: test_experiment_smoke_trains_and_reports below, marked engine)."""
    import json

    from pipeline.io import read_table

    make_project(tmp_path, arm_size=3, draws=[0, 1], seeds=[0])  # one stand-in checkpoint per arm and draw
    run = cli_runner(tmp_path)
    publish_project(run)
    out = run("band-value", "arms")
    assert all(f"{a} 3" in out for a in ("learnable", "hard", "random", "children")) and "Generating" not in out
    assert "draw 0" in out and "draw 1" in out
    arms = {a: bv.read_arm(tmp_path / f"data/arms/d0/{a}.jsonl") for a in ("learnable", "hard", "random", "children",
                                                                           "online")}
    assert {r["band"] for r in arms["hard"]} <= {"too_hard", "unsolved"}
    assert bv.read_arm(tmp_path / "data/arms/d1/learnable.jsonl") != arms["learnable"]  # another draw
    # the online arm is the whole published pool (every item the pool's arms drew), with its prior's counts
    pool = read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
    online = {r["problem_id"] for r in arms["online"]}
    assert online <= {r["problem_id"] for r in pool} and all(r["n"] == 8 for r in arms["online"])
    assert all({r["problem_id"] for r in bv.read_arm(tmp_path / f"data/arms/d{d}/{a}.jsonl")} <= online
               for d in (0, 1) for a in ("learnable", "hard", "random"))
    # the children: re-measured learnable, each the backward rewrite of a hard parent of the pool
    children = read_table(tmp_path / "data/reformulated/problems", name="problems").to_pylist()
    parent_of = {c["problem_id"]: c["parent_id"] for c in children}
    hard = {r["problem_id"] for r in pool if r["band"] in ("too_hard", "unsolved")}
    assert {r["band"] for r in arms["children"]} == {"learnable"}
    assert all(parent_of[r["problem_id"]] in hard for r in arms["children"])
    trained = {r["problem_id"] for a in arms.values() for r in a}
    cfg = bv.load_config(tmp_path / "band_value.yaml")
    for i, name in enumerate(bv.runs(cfg)):  # stand-ins for trained checkpoints: distinct weights, a two-step log
        d = tmp_path / "data/checkpoints" / name
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(name.encode())
        (d / "train_log.json").write_text(json.dumps({"log": [{"step": 1, "reward": 0.25}, {"step": 2, "reward": 0.5}],
                                                      "seconds": 1.0, "groups": 2, "groups_with_signal": i % 3}))
    *first, last = bv.measured_names(cfg)
    assert last == "random-d1-s0"  # arms in band_value.yaml's order (sorted by yaml.safe_dump here)
    for name in first:
        run("band-value", "measure", "--policy", name, "--no-progress")
    with pytest.raises(ConfigError, match=r"no measurement of random-d1-s0; run its measure stage .*measure@random-1-0"):
        bv.report(load_params(tmp_path / "params.yaml"), cfg, root=tmp_path)
    run("band-value", "measure", "--policy", last, "--no-progress")
    # what the report reads is results/ alone (with the problems): the samples and checkpoints may be gone
    import shutil
    shutil.rmtree(tmp_path / "data/measure")
    shutil.rmtree(tmp_path / "data/checkpoints")
    out = run("band-value", "report")
    table = (tmp_path / "data/report/band_value.md").read_text()
    assert table in out and table.count("\n## ") == 1  # the held-out section, then the OOD one
    held, ood = table.split("\n## ")
    assert held.startswith("## heldout") and ood.startswith("ood")
    assert held.count("\n| ") == 1 + 1 + 10  # header, base, five arms x two draws
    arms_table = (tmp_path / "data/report/band_value_arms.md").read_text()
    assert arms_table in out and "| online > learnable | 2 / 2 |" in arms_table and "| learnable > hard | 2 / 2 |" in arms_table
    report = json.loads((tmp_path / "data/report/band_value.json").read_text())
    assert set(report["sets"]) == {"heldout", "ood"}
    held = report["sets"]["heldout"]
    assert [a["arm"] for a in held["arms"]] == list(cfg.arms)
    assert {a["runs"] for a in held["arms"]} == {2} and all(0 <= a["signal_share"] <= 1 for a in held["arms"])
    assert {c["p_holm"] >= c["p_value"] for c in held["contrasts"]} == {True}
    items = {r["items"] for r in held["policies"]}
    assert len(items) == 1 and items.pop() >= 120
    assert (tmp_path / "data/report/band_value.png").read_bytes()[:4] == b"\x89PNG"
    diff = [d for name in bv.measured_names(cfg)
            for d in read_table(tmp_path / "results" / name / "difficulty", name="difficulty").to_pylist()]
    assert not trained & {d["problem_id"] for d in diff}  # held-out and OOD items were never trained on
    assert len({d["policy_id"] for d in diff}) == 1 + 10
    assert json.loads((tmp_path / "results/hard-d1-s0/train_log.json").read_text())["seconds"] == 1.0


@pytest.mark.engine
@pytest.mark.slow
def test_experiment_smoke_trains_and_reports(embedded_model_dir, tmp_path):
    """The new design end to end, tiny: the stages up to publish on the fake engine, then `band-value train` with
    TRL on the real embedded model for 2 arms (learnable, online) x 1 draw x 1 seed x 2 steps (arms of 4 items),
    the checkpoints measured (fake engine) and reported."""
    import json

    from pipeline.io import read_table

    make_project(tmp_path, model=str(embedded_model_dir), max_tokens=16,
                 arms={"learnable": ["learnable"], "online": ["default"]}, online_arms=["online"], arm_size=4,
                 draws=[0], seeds=[0], record_window=1,
                 grpo={"steps": 2, "num_generations": 4, "prompts_per_step": 1, "max_completion_tokens": 16,
                       "temperature": 0.8, "learning_rate": 2.0e-5, "beta": 0.0})
    run = cli_runner(tmp_path)
    publish_project(run)
    run("band-value", "arms")
    for arm in ("learnable", "online"):
        out = run("band-value", "train", "--arm", arm, "--draw", "0", "--seed", "0")
        assert f"train[{arm}, draw 0, seed 0]: 2 steps" in out and "groups with a signal" in out
        ckpt = tmp_path / "data/checkpoints" / f"{arm}-d0-s0"
        log = json.loads((ckpt / "train_log.json").read_text())
        assert log["groups"] == 2 and 0 <= log["groups_with_signal"] <= 2
        rolls = read_table(ckpt / "records/rollouts", name="rollouts")
        assert rolls.num_rows == 2 * 4 and not any("\n" in c for c in rolls.column("completion").to_pylist())
        pols = read_table(ckpt / "records/policies", name="policies").to_pylist()
        assert [p["name"].split("@")[1] for p in pols] == [f"{arm}-d0-s0[0,1)", f"{arm}-d0-s0[1,2)"]
        assert pols[0]["stop"] == ["\n"] and pols[0]["max_tokens"] == 16
        if arm == "online":
            assert log["sampler"]["updates"] == 2 and log["sampler"]["selections"] >= 2
            arm_ids = {r["problem_id"] for r in bv.read_arm(tmp_path / "data/arms/d0/online.jsonl")}
            assert set(rolls.column("problem_id").to_pylist()) <= arm_ids
    for name in ("base", "learnable-d0-s0", "online-d0-s0"):
        run("band-value", "measure", "--policy", name, "--no-progress")
    out = run("band-value", "report")
    report = json.loads((tmp_path / "data/report/band_value.json").read_text())
    held = report["sets"]["heldout"]
    assert [a["arm"] for a in held["arms"]] == ["learnable", "online"]
    assert [(c["better"], c["worse"]) for c in held["contrasts"]] == [("online", "learnable")]
    assert "| online > learnable | 1 / 1 |" in out
