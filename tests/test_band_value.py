"""The band-value experiment's pure parts: the arms' draw, the measurement params, the report's numbers."""

from __future__ import annotations

import pytest
import yaml

from pipeline.config import ConfigError, load_params
from pipeline.train import band_value as bv
from pipeline.train.band_value_report import by_arm, contrasts, markdown, markdown_arms, markdown_contrasts, summarize

REPO = bv.Path(__file__).resolve().parent.parent
EXPERIMENT = REPO / "experiments/band_value"


def rows(prefix, n, band):
    return [{"problem_id": f"{prefix}{i:02d}", "question": f"q {prefix}{i}", "answer": str(i), "band": band}
            for i in range(n)]


def configs():
    learnable, too_hard = rows("l", 5, "learnable"), rows("h", 3, "too_hard")
    unsolved, easy = rows("u", 4, "unsolved"), rows("e", 6, "too_easy")
    return {"learnable": learnable, "too_hard": too_hard, "unsolved": unsolved,
            "default": learnable + too_hard + unsolved + easy}


ARMS = {"learnable": ["learnable"], "hard": ["too_hard", "unsolved"], "random": ["default"]}


def test_arms_are_equal_disjoint_and_from_their_bands():
    arms = bv.select_arms(configs(), arms=ARMS, size=None, seed=0)
    assert list(arms) == ["learnable", "hard", "random"]
    assert {len(a) for a in arms.values()} == {5}  # the smallest pool: learnable's 5
    ids = [r["problem_id"] for a in arms.values() for r in a]
    assert len(ids) == len(set(ids))
    assert {r["band"] for r in arms["learnable"]} == {"learnable"}
    assert {r["band"] for r in arms["hard"]} <= {"too_hard", "unsolved"}
    # the random arm draws from what the other arms left of default: everything else here
    assert {r["problem_id"] for r in arms["random"]} <= {r["problem_id"] for r in configs()["default"]} - set(ids[:10])
    again = bv.select_arms(configs(), arms=ARMS, size=None, seed=0)
    assert again == arms
    other = bv.select_arms(configs(), arms=ARMS, size=3, seed=1)
    assert {len(a) for a in other.values()} == {3}


def test_an_empty_arm_is_an_error():
    cfg = configs()
    cfg["learnable"] = []
    with pytest.raises(ConfigError, match="an arm has no items"):
        bv.select_arms(cfg, arms=ARMS, size=None, seed=0)


def test_experiment_config_loads_and_rejects_typos(tmp_path):
    cfg = bv.load_config(EXPERIMENT / "band_value.yaml")
    assert set(cfg.arms) == {"learnable", "hard", "random", "children"} and cfg.seeds
    # dvc.yaml's train matrix lists the arms by name (DVC cannot iterate a mapping's keys): the same ones
    matrix = yaml.safe_load((EXPERIMENT / "dvc.yaml").read_text())["stages"]["train"]["matrix"]
    assert matrix["arm"] == list(cfg.arms)
    raw = yaml.safe_load((EXPERIMENT / "band_value.yaml").read_text())
    raw["grpo"]["stpes"] = 3
    bad = tmp_path / "band_value.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="stpes"):
        bv.load_config(bad)
    bad.write_text("arms: [")
    with pytest.raises(ConfigError, match="cannot read the experiment config"):
        bv.load_config(bad)


def test_measure_params_name_each_checkpoint_by_its_weights(tmp_path):
    params = load_params(EXPERIMENT / "params.yaml")
    cfg = bv.load_config(EXPERIMENT / "band_value.yaml")
    for arm in cfg.arms:
        for seed in cfg.seeds:
            d = tmp_path / cfg.checkpoints_dir / bv.run_name(arm, seed)
            d.mkdir(parents=True)
            (d / "model.safetensors").write_bytes(arm.encode())
    raw = bv.measure_params(params, cfg, root=tmp_path)
    assert raw["rollout"]["sources"] == ["heldout"]
    assert raw["rollout"]["policies"][0] == "smollm2-135m-3shot"
    assert len(raw["rollout"]["policies"]) == 1 + len(cfg.arms) * len(cfg.seeds)
    ckpt = raw["policies"]["hard-s0"]
    assert ckpt["model"] == "data/checkpoints/hard-s0" and ckpt["revision"].startswith("sha256:")
    assert ckpt["revision"] != raw["policies"]["learnable-s0"]["revision"]
    assert ckpt["sampling"] == raw["policies"]["smollm2-135m-3shot"]["sampling"]
    assert raw["paths"]["difficulty"] == "data/measure/difficulty" and raw["paths"]["problems"] == "data/problems"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert load_params(path).rollout.sources == ["heldout"]


def diff_row(pid, pol, n_correct, flagged=None, band="learnable"):
    return {"problem_id": pid, "policy_id": pol, "n": 8, "pass_rate": n_correct / 8, "n_correct": n_correct,
            "ci_low": 0.0, "ci_high": 1.0, "flagged_correct_rate": flagged, "band": band}


def test_summary_pass_rate_delta_and_flags():
    diff = [diff_row(f"p{i}", "B", 2) for i in range(10)]
    diff += [diff_row(f"p{i}", "L", 4, flagged=0.5) for i in range(10)]
    diff += [diff_row("p99", "L", 8)]  # measured by L only: not compared
    rows = summarize(diff, {"base": "B", "learnable-s0": "L"}, base="base", runs={"learnable-s0": ("learnable", 0)},
                     n_boot=200)
    base, arm = rows
    assert base.items == arm.items == 10
    assert base.pass_rate == pytest.approx(0.25) and base.delta is None and base.flagged_correct_rate == 0.0
    assert arm.pass_rate == pytest.approx(0.5) and arm.delta == pytest.approx(0.25)
    assert arm.delta_low == pytest.approx(0.25) and arm.ci_low == pytest.approx(0.5)  # no spread: a point interval
    assert arm.flagged_correct_rate == pytest.approx(0.5) and arm.bands["learnable"] == 10
    table = markdown(rows)
    assert "| learnable-s0 | learnable | 0 | 10 | 0.500 [0.500, 0.500] | +0.250 [+0.250, +0.250] | 0 / 0 / 0 | 0.500 |" in table
    # with the training log: the steps whose group rewards differed (the others give GRPO a zero advantage)
    log = [{"step": 1, "frac_reward_zero_std": 1.0}, {"step": 2, "frac_reward_zero_std": 0.0},
           {"step": 3, "frac_reward_zero_std": 0.5}]
    lines = markdown(rows, {"learnable-s0": log}).splitlines()
    assert lines[0].endswith("| GRPO steps with a signal |") and lines[2].endswith("| |")  # the base trained nothing
    assert lines[3].endswith("| 0.500 | 0 | 10 | 0 | 0 | 2 / 3 |")
    # per-item drift against the base: 2/8 -> 4/8 is not credible on one item, 0/8 -> 8/8 is
    assert (base.items_rose, arm.items_rose, arm.items_fell, arm.band_changed) == (None, 0, 0, 0)
    moved = summarize([diff_row("a", "B", 0, band="unsolved"), diff_row("b", "B", 4), diff_row("c", "B", 8, band="too_easy"),
                       diff_row("a", "L", 8, band="too_easy"), diff_row("b", "L", 4), diff_row("c", "L", 0, band="unsolved")],
                      {"base": "B", "learnable-s0": "L"}, base="base", runs={"learnable-s0": ("learnable", 0)}, n_boot=50)
    assert (moved[1].items_rose, moved[1].items_fell, moved[1].band_changed) == (1, 1, 2)
    # over seeds: the arm's mean change, its range, and how many seeds' intervals exclude 0
    rows2 = summarize(diff + [diff_row(f"p{i}", "L1", 1) for i in range(10)], {"base": "B", "learnable-s0": "L",
                      "learnable-s1": "L1"}, base="base", runs={"learnable-s0": ("learnable", 0),
                                                               "learnable-s1": ("learnable", 1)}, n_boot=200)
    (s,) = by_arm(rows2)
    assert (s.arm, s.seeds, s.credibly_up, s.credibly_down) == ("learnable", 2, 1, 1)
    assert s.mean_delta == pytest.approx((0.25 - 0.125) / 2) and (s.min_delta, s.max_delta) == pytest.approx((-0.125, 0.25))
    assert "| learnable | 2 | +0.062 [-0.125, +0.250] | 1 / 1 | 0.250 |" in markdown_arms([s])
    with pytest.raises(ValueError, match="no held-out measurement"):
        summarize(diff, {"base": "B", "hard-s0": "H"}, base="base", runs={"hard-s0": ("hard", 0)})


def test_contrasts_between_arms_carry_the_seed_spread():
    """Arm A - arm B, averaged over seeds and items; the interval resamples seeds and items, so two seeds that
    disagree give an interval across 0 even when the means differ, and two that agree do not."""
    base = [diff_row(f"p{i}", "B", 4) for i in range(20)]
    agree = [diff_row(f"p{i}", pol, c) for i in range(20) for pol, c in (("L0", 6), ("L1", 6), ("H0", 2), ("H1", 2))]
    names = {"base": "B", "learnable-s0": "L0", "learnable-s1": "L1", "hard-s0": "H0", "hard-s1": "H1"}
    runs = {"learnable-s0": ("learnable", 0), "learnable-s1": ("learnable", 1), "hard-s0": ("hard", 0), "hard-s1": ("hard", 1)}
    (c,) = contrasts(base + agree, names, base="base", runs=runs, n_boot=500)
    assert (c.better, c.worse, c.seeds) == ("learnable", "hard", (2, 2))  # random and children were not trained
    assert c.diff == pytest.approx(0.5) and c.ci_low == pytest.approx(0.5) and c.p_better == 1.0
    # learnable seeds 7/8 and 1/8 (mean 0.5) against hard 2/8 in both: the mean is ahead, the seeds are not sure
    split = [diff_row(f"p{i}", pol, c) for i in range(20) for pol, c in (("L0", 7), ("L1", 1), ("H0", 2), ("H1", 2))]
    (c,) = contrasts(base + split, names, base="base", runs=runs, n_boot=500)
    assert c.diff == pytest.approx(0.25) and c.ci_low < 0 < c.ci_high and 0.5 < c.p_better < 1.0
    assert markdown_contrasts([c]).splitlines()[2].startswith("| learnable > hard | +0.250 [")


def test_experiment_stages_with_the_fake_engine(tmp_path):
    """ingest -> rollout -> verify -> annotate -> reformulate (and its set's stages) -> publish -> arms ->
    measure -> report through the CLI, the fake engine standing in for vLLM and two-byte files for the
    trained checkpoints (training is covered by tests/test_train_grpo.py's real smoke run)."""
    import json

    from click.testing import CliRunner

    from pipeline.cli import cli
    from pipeline.io import read_table

    raw = yaml.safe_load((EXPERIMENT / "params.yaml").read_text())
    raw["paths"]["models"] = "data/models"
    raw["policies"]["smollm2-135m-3shot"].update({"model": "fake-model", "revision": "r1", "engine": "fake"})
    raw["rollout"]["engine_options"] = {"fake": {"correct_rate": 0.3}}  # hard parents for the children arm
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    exp = yaml.safe_load((EXPERIMENT / "band_value.yaml").read_text())
    exp["arm_size"], exp["seeds"] = 3, [0]  # one stand-in checkpoint per arm
    (tmp_path / "band_value.yaml").write_text(yaml.safe_dump(exp))
    p = ["--params", str(tmp_path / "params.yaml")]

    def run(*args):
        res = CliRunner().invoke(cli, [*args, *p], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    for stage in (["ingest", "--no-progress"], ["rollout", "--no-progress"], ["verify", "--no-progress"],
                  ["annotate", "--no-progress"], ["reformulate", "--no-progress"],
                  ["rollout", "--set", "reformulated", "--no-progress"], ["verify", "--set", "reformulated", "--no-progress"],
                  ["annotate", "--set", "reformulated", "--no-plots", "--no-progress"], ["publish"]):
        run(*stage)
    out = run("band-value", "arms")
    assert all(f"{a} 3" in out for a in ("learnable", "hard", "random", "children")) and "Generating" not in out
    arms = {a: bv.read_arm(tmp_path / f"data/arms/{a}.jsonl") for a in ("learnable", "hard", "random", "children")}
    assert {r["band"] for r in arms["hard"]} <= {"too_hard", "unsolved"}
    # the children: re-measured learnable, each the backward rewrite of a hard parent of the pool
    children = read_table(tmp_path / "data/reformulated/problems", name="problems").to_pylist()
    parent_of = {c["problem_id"]: c["parent_id"] for c in children}
    hard = {r["problem_id"] for r in read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
            if r["band"] in ("too_hard", "unsolved")}
    assert {r["band"] for r in arms["children"]} == {"learnable"}
    assert all(parent_of[r["problem_id"]] in hard for r in arms["children"])
    trained = {r["problem_id"] for a in arms.values() for r in a}
    for arm in arms:  # stand-ins for trained checkpoints: distinct weights, a two-step log
        d = tmp_path / "data/checkpoints" / f"{arm}-s0"
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(arm.encode())
        (d / "train_log.json").write_text(json.dumps({"log": [{"step": 1, "reward": 0.25}, {"step": 2, "reward": 0.5}],
                                                      "seconds": 1.0}))
    run("band-value", "measure", "--no-progress")
    out = run("band-value", "report")
    table = (tmp_path / "data/report/band_value.md").read_text()
    assert table in out and table.count("\n") == 2 + 5  # header, rule, base + four arms
    arms_table = (tmp_path / "data/report/band_value_arms.md").read_text()
    assert arms_table in out and arms_table.count("\n") == (2 + 4) + 1 + (2 + 6)  # four arms; blank; six predictions
    report = json.loads((tmp_path / "data/report/band_value.json").read_text())
    assert [a["arm"] for a in report["arms"]] == list(bv.load_config(tmp_path / "band_value.yaml").arms)
    items = {r["items"] for r in report["policies"]}
    assert len(items) == 1 and items.pop() > 0
    assert (tmp_path / "data/report/band_value.png").read_bytes()[:4] == b"\x89PNG"
    measured = load_params(tmp_path / "data/measure/params.yaml")

    diff = read_table(tmp_path / measured.paths.difficulty, name="difficulty").to_pylist()
    assert not trained & {d["problem_id"] for d in diff}  # held-out items were never trained on
    assert len({d["policy_id"] for d in diff}) == 5
