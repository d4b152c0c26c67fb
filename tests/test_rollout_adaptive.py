"""Adaptive sampling budget: the stopping rule (pure), and the rollout stage's rounds on the fake engine.

The stage tests check the issue's promises: adaptive samples are the prefix 0..n-1 of a fixed run's
keys with the same seeds; replaying the rule over a fixed max_k run's verdicts gives exactly the
adaptive run's n; raising max_k or switching to fixed generates only missing keys; SIGKILL mid-run
then resume equals an uninterrupted run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from pipeline.bands import assign_band
from pipeline.config import AdaptiveBudget, BandsConfig, ConfigError, load_params, parse_params
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.rollout import run
from pipeline.rollout.adaptive import add_outcomes, prefix
from pipeline.rollout.budget import StoppingRule, checkpoints, prior_counts, select
from pipeline.schema import schema
from pipeline.verify.core import verify

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

REPO = Path(__file__).resolve().parent.parent
SORT = [("problem_id", "ascending"), ("policy_id", "ascending"), ("sample_idx", "ascending")]
BANDS = BandsConfig()


# --- the rule -------------------------------------------------------------------------------------

def _rule(min_k=4, step=4, confidence=0.95, k=32, rule="posterior"):
    return StoppingRule(AdaptiveBudget(rule=rule, min_k=min_k, step=step, confidence=confidence), k, BANDS)


def test_checkpoints_end_at_max_k():
    assert checkpoints(4, 4, 16) == [4, 8, 12, 16]
    assert checkpoints(8, 6, 24) == [8, 14, 20, 24]
    assert checkpoints(8, 4, 8) == [8]


def test_defaults_are_the_measured_setting():
    b = AdaptiveBudget()
    assert (b.rule, b.min_k, b.step, b.confidence) == ("predictive", 4, 2, 0.95)


def test_decide_reasons():  # the posterior rule
    r = _rule()
    assert r.decide(2, 4) is None                      # 2/4: nothing is settled yet
    assert r.decide(0, 4) is None                      # P(theta < 0.2 | 0/4) = 0.89 < 0.95
    assert r.decide(0, 12) == "confident"              # 0.99 on the below side
    assert r.decide(12, 12) == "confident"             # above
    assert r.decide(6, 12) == "confident"              # learnable
    assert r.decide(8, 16) == "curtailed"              # any 8..24 of 32 is learnable
    assert r.decide(6, 28) is None                     # 0.21: on the edge of learnable
    assert r.decide(6, 32) == "max_k"
    # curtailment: 30 of 31 correct, one sample left -> too_easy whatever it is
    assert _rule(confidence=0.999).decide(30, 31) == "curtailed"
    # the side, not the band, is certified: 0/12 stops although unsolved vs too_hard is open
    lo, hi = _rule().side_range("below")
    assert (lo, hi) == (0.0, BANDS.learnable_min)


def _predictive_same_side(c, n, k=32):
    """P(the k-sample side equals the side of c/n) by brute force: the posterior Beta(c+1, n-c+1) on a grid,
    the k-n samples left binomial under each grid point (independent of the rule's Beta-binomial code)."""
    from math import comb

    from pipeline.bands import SIDES

    def side(cc, nn):
        return SIDES[assign_band(cc, nn, BANDS)]

    grid = [(i + 0.5) / 4000 for i in range(4000)]
    dens = [t ** c * (1 - t) ** (n - c) for t in grid]
    m, want = k - n, side(c, n)
    same = sum(d * sum(comb(m, x) * t ** x * (1 - t) ** (m - x) for x in range(m + 1) if side(c + x, k) == want)
               for t, d in zip(grid, dens, strict=True))
    return same / sum(dens)


def test_predictive_rule_decides_on_the_max_k_side():
    r = _rule(rule="predictive", step=2)
    for c, n in [(0, 8), (0, 10), (3, 6), (1, 8), (10, 10), (2, 10)]:
        p = _predictive_same_side(c, n)
        assert (r.decide(c, n) == "confident") == (p >= 0.95), (c, n, p)
    assert r.decide(0, 8) is None and r.decide(0, 10) == "confident"   # 0/10: a 32-sample run says below
    assert r.decide(3, 6) == "confident" and r.decide(4, 4) is None
    assert r.decide(8, 16) == "curtailed" and r.decide(6, 32) == "max_k"
    # it stops no later than the posterior rule on an all-fail item, and certifies the same side
    post = _rule()
    assert r.replay([False] * 32)[0] <= post.replay([False] * 32)[0]
    # a strong prior (the last checkpoint's 0 of 32) stops at min_k; one that disagrees does not
    strong = prior_counts(0, 32, 0.5)
    assert r.replay([False] * 4, strong) == (4, "confident")
    assert r.replay([True] * 4, strong) == (4, "incomplete")


def test_replay_is_the_prefix_and_reports_incomplete():
    r = _rule()
    assert r.replay([False] * 12) == (12, "confident")
    assert r.replay([False] * 32) == (12, "confident")    # later samples are never looked at
    assert r.replay([False] * 6) == (4, "incomplete")     # reached 4, the next checkpoint (8) is missing
    assert r.replay([]) == (0, "incomplete")
    half = [True, False] * 16
    assert r.replay(half)[1] in {"confident", "max_k"} and r.replay(half) == r.replay(half + [True] * 8)


def test_prior_stops_settled_items_at_min_k():
    r = _rule()
    assert r.replay([False] * 4) == (4, "incomplete")
    strong = prior_counts(0, 32, 0.5)  # the previous checkpoint: 0 of 32, weighted 0.5
    assert r.replay([False] * 4, strong) == (4, "confident")
    # a prior that disagrees with the new samples does not force a wrong stop at min_k
    assert r.replay([True] * 4, strong) == (4, "incomplete")


def test_select_fixed_and_adaptive():
    raw = {"ingest": {"sources": [{"name": "s", "kind": "synthetic"}]}, "policies": {"p": {}},
           "rollout": {"policies": ["p"], "k": 8}}
    fixed = parse_params(raw).rollout
    assert select(fixed, BANDS, [True] * 10) == (8, "fixed")
    assert select(fixed, BANDS, [True] * 5) == (5, "incomplete")
    raw["rollout"]["budget"] = {"kind": "adaptive", "min_k": 4, "step": 4}
    assert select(parse_params(raw).rollout, BANDS, [True] * 8) == (8, "max_k")


def test_budget_config_errors():
    base = {"ingest": {"sources": [{"name": "s", "kind": "synthetic"}]}, "policies": {"p": {}, "q": {}},
            "rollout": {"policies": ["p", "q"], "k": 8}}
    bad = [
        ({"budget": {"kind": "adaptiv"}}, "budget"),
        ({"budget": {"kind": "adaptive", "min_k": 16}}, "min_k"),
        ({"budget": {"kind": "adaptive", "mink": 4}}, "unknown key"),
        ({"budget": {"kind": "adaptive", "confidence": 1.2}}, "confidence"),
        ({"budget": {"kind": "adaptive", "rule": "bayes"}}, "rule"),
    ]
    for extra, match in bad:
        with pytest.raises(ConfigError, match=match):
            parse_params({**base, "rollout": {**base["rollout"], **extra}})
    with pytest.raises(ConfigError, match=r"needs rollout\.budget\.kind adaptive"):
        parse_params({**base, "policies": {"p": {}, "q": {"prior": {"policy": "p"}}}})
    adaptive = {**base["rollout"], "budget": {"kind": "adaptive", "min_k": 4}}
    with pytest.raises(ConfigError, match=r"must be another policy in rollout\.policies"):
        parse_params({**base, "rollout": adaptive, "policies": {"p": {}, "q": {"prior": {"policy": "zz"}}}})
    ok = parse_params({**base, "rollout": adaptive, "policies": {"p": {}, "q": {"prior": {"policy": "p", "weight": 0.25}}}})
    assert ok.policies["q"].prior.weight == 0.25


# --- the stage on the fake engine -------------------------------------------------------------------

def _problems(n: int) -> pa.Table:
    """Even items have the right gold (the fake engine is right about half the time); odd items an answer it never gives."""
    rows = []
    for i in range(n):
        a, b = i + 2, i % 7 + 1
        q = f"What is {a} + {b}?"
        rows.append({"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
                     "answer": str(a + b) if i % 2 == 0 else "0", "n_duplicates": 0})
    return schema("problems").from_rows(rows)


POLICY = {"model": "test/m", "revision": "r1", "engine": "fake", "sampling": {"temperature": 0.8, "max_tokens": 16}}


def _repo(root: Path, *, n=10, k=16, budget=None, fake=None, policies=None, shard_size=4) -> Path:
    write_table(_problems(n), root / "data/problems/part-0.parquet", name="problems")
    policies = policies or {"small": POLICY}
    rollout = {"policies": list(policies), "k": k, "shard_size": shard_size, "engine_options": {"fake": fake or {}}}
    if budget:
        rollout["budget"] = budget
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]}, "policies": policies,
              "rollout": rollout, "verify": {"workers": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


ADAPTIVE = {"kind": "adaptive", "min_k": 4, "step": 4, "confidence": 0.9}


def _rollouts(root: Path) -> pa.Table:
    return read_table(root / "data/rollouts", name="rollouts").sort_by(SORT)


def _n_per_problem(t: pa.Table) -> dict[str, int]:
    out: dict[str, int] = {}
    for pid in t.column("problem_id").to_pylist():
        out[pid] = out.get(pid, 0) + 1
    return out


def test_adaptive_run_is_a_prefix_of_the_fixed_run_and_equals_its_replay(tmp_path):
    fixed_root, ad_root = tmp_path / "fixed", tmp_path / "adaptive"
    fixed_root.mkdir(), ad_root.mkdir()
    run(load_params(_repo(fixed_root)), root=fixed_root, progress=False)
    fixed = _rollouts(fixed_root)
    params = load_params(_repo(ad_root, budget=ADAPTIVE))
    res = run(params, root=ad_root, progress=False)
    ad = _rollouts(ad_root)
    # same keys, same seeds, same text: every adaptive row is a fixed row
    fixed_rows = {(r["problem_id"], r["sample_idx"]): r for r in fixed.to_pylist()}
    for r in ad.to_pylist():
        assert fixed_rows[(r["problem_id"], r["sample_idx"])] == r
    n_of = _n_per_problem(ad)
    for pid, n in n_of.items():  # a prefix 0..n-1
        assert sorted(r["sample_idx"] for r in ad.to_pylist() if r["problem_id"] == pid) == list(range(n))
    # replay the rule over the fixed run's verdicts: exactly the adaptive run's n per problem
    verdicts = verify(fixed, read_table(fixed_root / "data/problems", name="problems"), config=params.verify).verdicts
    outcomes: dict = {}
    add_outcomes(outcomes, verdicts)
    replayed = {pid: select(params.rollout, params.annotate.bands, prefix(o)) for pid, o in outcomes.items()}
    assert {pid: n for pid, (n, _) in replayed.items()} == n_of
    assert ad.num_rows < fixed.num_rows  # it saved something: the never-right odd items stop early
    stats = res.per_policy["small"]
    assert stats["selected"] == ad.num_rows == res.samples and stats["rounds"] >= 2
    assert sum(stats["stop_reasons"].values()) == 10 and "incomplete" not in stats["stop_reasons"]
    odd = {p["problem_id"] for p in _problems(10).to_pylist() if p["answer"] == "0"}
    assert all(n_of[pid] <= 12 for pid in odd)


def test_rerun_raise_max_k_and_switch_to_fixed_generate_only_missing_keys(tmp_path):
    p = _repo(tmp_path, budget=ADAPTIVE, k=8)
    run(load_params(p), root=tmp_path, progress=False)
    first = _rollouts(tmp_path)
    again = run(load_params(p), root=tmp_path, progress=False)
    assert again.samples == 0 and again.startup_s == 0  # every problem has stopped: no engine
    raw = yaml.safe_load(p.read_text())
    raw["rollout"]["k"] = 16
    p.write_text(yaml.safe_dump(raw))
    run(load_params(p), root=tmp_path, progress=False)
    second = _rollouts(tmp_path)
    old = {(r["problem_id"], r["sample_idx"]): r for r in first.to_pylist()}
    assert all(old[key] == r for r in second.to_pylist() if (key := (r["problem_id"], r["sample_idx"])) in old)
    del raw["rollout"]["budget"]
    p.write_text(yaml.safe_dump(raw))
    res = run(load_params(p), root=tmp_path, progress=False)
    assert res.samples == 10 * 16 - second.num_rows and _rollouts(tmp_path).num_rows == 160


def test_prior_policy_is_measured_first_and_saves_samples(tmp_path):
    hot = {**POLICY, "sampling": {"temperature": 0.9, "max_tokens": 16}}
    without, with_prior = tmp_path / "a", tmp_path / "b"
    without.mkdir(), with_prior.mkdir()
    pol = {"new": hot, "old": POLICY}
    r1 = run(load_params(_repo(without, budget=ADAPTIVE, policies=pol, n=12)), root=without, progress=False)
    pol_prior = {"new": {**hot, "prior": {"policy": "old", "weight": 1.0}}, "old": POLICY}
    r2 = run(load_params(_repo(with_prior, budget=ADAPTIVE, policies=pol_prior, n=12)), root=with_prior, progress=False)
    assert r2.per_policy["new"]["prior"] == r2.per_policy["old"]["policy_id"]
    assert r2.per_policy["new"]["policy_id"] == r1.per_policy["new"]["policy_id"]  # the prior is not in policy_id
    assert r2.per_policy["old"]["samples"] == r1.per_policy["old"]["samples"]
    assert r2.per_policy["new"]["samples"] < r1.per_policy["new"]["samples"]


def _log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [5, 30])
def test_sigkill_mid_adaptive_run_then_resume_equals_an_uninterrupted_run(tmp_path, kill_after):
    ref_root, crash_root = tmp_path / "ref", tmp_path / "crash"
    ref_root.mkdir(), crash_root.mkdir()
    run(load_params(_repo(ref_root, budget=ADAPTIVE, shard_size=2)), root=ref_root, progress=False)
    reference = _rollouts(ref_root)
    params = _repo(crash_root, budget=ADAPTIVE, shard_size=2, fake={"delay_s": 0.03, "log_path": "gen.log"})
    cmd = [sys.executable, "-m", "pipeline.cli", "rollout", "--params", str(params), "--no-progress"]
    log = crash_root / "gen.log"
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while len(_log_lines(log)) < kill_after:
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    on_disk = _rollouts(crash_root).num_rows
    log.unlink()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(_log_lines(log)) == reference.num_rows - on_disk  # only the missing keys
    assert _rollouts(crash_root).equals(reference)


# --- annotate counts exactly the samples the budget selects ------------------------------------------

def _difficulty(root: Path, params) -> dict[str, dict]:
    from pipeline.annotate import run as annotate
    from pipeline.verify import run as verify_stage

    verify_stage(params, root=root, progress=False)
    annotate(params, root=root, progress=False, plots=False)
    return {r["problem_id"]: r for r in read_table(root / "data/difficulty", name="difficulty").to_pylist()}


def test_annotate_counts_the_adaptive_selection_and_replays_it_over_a_fixed_run(tmp_path):
    fixed_root, ad_root = tmp_path / "fixed", tmp_path / "adaptive"
    fixed_root.mkdir(), ad_root.mkdir()
    ad_params = load_params(_repo(ad_root, budget=ADAPTIVE))
    run(ad_params, root=ad_root, progress=False)
    n_of = _n_per_problem(_rollouts(ad_root))
    ad = _difficulty(ad_root, ad_params)
    assert {pid: r["n"] for pid, r in ad.items()} == n_of
    assert {r["budget"] for r in ad.values()} == {"adaptive(rule=predictive,min_k=4,max_k=16,step=4,confidence=0.9)"}
    assert {r["stop_reason"] for r in ad.values()} <= {"curtailed", "confident", "max_k"}
    assert all(r["prior_policy_id"] is None for r in ad.values())
    # a fixed k=16 run annotated under the adaptive budget: the same n, counts and bands as the adaptive run
    fixed_params = load_params(_repo(fixed_root))
    run(fixed_params, root=fixed_root, progress=False)
    assert {r["n"] for r in _difficulty(fixed_root, fixed_params).values()} == {16}
    replayed = _difficulty(fixed_root, load_params(_repo(fixed_root, budget=ADAPTIVE)))
    cols = ("n", "n_correct", "band", "stop_reason", "pass_rate", "ci_low", "ci_high")
    assert {p: tuple(r[c] for c in cols) for p, r in replayed.items()} == {p: tuple(r[c] for c in cols) for p, r in ad.items()}


def test_annotate_after_lowering_k_and_narrowing_sources(tmp_path):
    params = load_params(_repo(tmp_path, k=8))
    run(params, root=tmp_path, progress=False)
    assert {r["n"] for r in _difficulty(tmp_path, params).values()} == {8}
    raw = yaml.safe_load((tmp_path / "params.yaml").read_text())
    raw["rollout"].update(k=5, limit=4)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    rows = _difficulty(tmp_path, load_params(tmp_path / "params.yaml"))
    assert len(rows) == 4 and {(r["n"], r["stop_reason"], r["budget"]) for r in rows.values()} == {(5, "fixed", "fixed(k=5)")}


# --- drift --------------------------------------------------------------------------------------------

def test_p_rose_and_transitions():
    from pipeline.annotate.drift import change, p_rose

    assert abs(p_rose(4, 8, 4, 8) - 0.5) < 0.01                  # same counts: no direction
    assert p_rose(1, 32, 20, 32) > 0.999 and change(p_rose(1, 32, 20, 32)) == "rose"
    assert p_rose(20, 32, 1, 32) < 0.001 and change(p_rose(20, 32, 1, 32)) == "fell"
    assert change(p_rose(2, 8, 4, 8)) == "none"                  # eight samples each: not credible
    assert abs(p_rose(1, 8, 3, 8) + p_rose(3, 8, 1, 8) - 1) < 0.01


def test_drift_command_view_png_and_metrics(tmp_path):
    import json

    from click.testing import CliRunner

    from pipeline.catalog import connect
    from pipeline.cli import cli

    hot = {**POLICY, "sampling": {"temperature": 0.9, "max_tokens": 16}}
    p = _repo(tmp_path, policies={"old": POLICY, "new": hot}, k=8)
    params = load_params(p)
    run(params, root=tmp_path, progress=False)
    diff = _difficulty(tmp_path, params)
    assert diff
    res = CliRunner().invoke(cli, ["drift", "--params", str(p), "--from", "old", "--to", "new"])
    assert res.exit_code == 0, res.output
    assert "drift old->new: 10 problems" in res.output and "unsolved" in res.output
    assert (tmp_path / "data/plots/drift-old-new.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    m = json.loads((tmp_path / "data/metrics/drift.json").read_text())["pairs"]["old->new"]
    assert m["problems"] == 10 and sum(sum(r.values()) for r in m["transitions"].values()) == 10
    # the odd items are never right under either policy: unsolved -> unsolved
    assert m["transitions"]["unsolved"]["unsolved"] >= 5
    con = connect(params, root=tmp_path)
    try:
        n, changed = con.execute("SELECT count(*), count(*) FILTER (WHERE band_changed) FROM drift").fetchone()
    finally:
        con.close()
    assert n == 20 and changed == 2 * m["band_changed"]  # both orders
    bad = CliRunner().invoke(cli, ["drift", "--params", str(p), "--from", "old", "--to", "nwe"])
    assert bad.exit_code == 1 and "unknown policy 'nwe'" in bad.output


# --- the real engine ----------------------------------------------------------------------------------

@pytest.mark.engine
def test_adaptive_stage_on_the_real_engine_is_a_prefix_of_fixed(shared_engine_factory, embedded_model_dir, tmp_path):
    """SmolLM2-135M on graded arithmetic: adaptive rounds, then fixed k generates only the rest; replay agrees."""
    from pipeline.annotate import run as annotate
    from pipeline.verify import run as verify_stage

    qs = [("What is 3 + 5?", "8"), ("What is 6 * 7?", "42"), ("What is 52 - 27?", "25"),
          ("What is 417 * 38?", "15846"), ("Mia has 14 pens. She buys 9 more. How many pens does Mia have now?", "23")]
    write_table(schema("problems").from_rows([
        {"problem_id": problem_id(q), "source": "t", "source_id": str(i), "question": q, "answer": a, "n_duplicates": 0}
        for i, (q, a) in enumerate(qs)]), tmp_path / "data/problems/p.parquet", name="problems")
    sampling = {"temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 24, "stop": ["\nQ:", "\n\n"]}
    raw = {"paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]},
           "ingest": {"sources": [{"name": "t", "kind": "synthetic"}]},
           "policies": {"smollm2": {"model": "embedded", "sampling": sampling}},
           "rollout": {"policies": ["smollm2"], "k": 16, "shard_size": 2, "budget": ADAPTIVE},
           "verify": {"workers": 1}}
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw))
    params = load_params(p)
    res = run(params, root=tmp_path, progress=False, engine_factory=shared_engine_factory)
    ad = _rollouts(tmp_path)
    n_of = _n_per_problem(ad)
    assert res.samples == ad.num_rows < 5 * 16 and res.per_policy["smollm2"]["rounds"] >= 1
    assert all(sorted(r["sample_idx"] for r in ad.to_pylist() if r["problem_id"] == pid) == list(range(n))
               for pid, n in n_of.items())
    verify_stage(params, root=tmp_path, progress=False)
    annotate(params, root=tmp_path, progress=False, plots=False)
    diff = {r["problem_id"]: r for r in read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()}
    assert {pid: r["n"] for pid, r in diff.items()} == n_of
    # switch to fixed k=16: only the missing keys, and the earlier rows unchanged
    del raw["rollout"]["budget"]
    p.write_text(yaml.safe_dump(raw))
    fixed = run(load_params(p), root=tmp_path, progress=False, engine_factory=shared_engine_factory)
    assert fixed.samples == 5 * 16 - ad.num_rows
    full = _rollouts(tmp_path)
    old = {(r["problem_id"], r["sample_idx"]): r for r in ad.to_pylist()}
    assert all(old[k] == r for r in full.to_pylist() if (k := (r["problem_id"], r["sample_idx"])) in old)
    verdicts = verify(full, read_table(tmp_path / "data/problems", name="problems"), config=params.verify).verdicts
    outcomes: dict = {}
    add_outcomes(outcomes, verdicts)
    assert {pid: select(params.rollout, params.annotate.bands, prefix(o))[0] for pid, o in outcomes.items()} == n_of
