"""The reformulation loop end to end on the real vLLM engine and the embedded SmolLM2-135M.

Hard items in (synthetic problems measured for real: rollout, verify, annotate on the main set),
reformulations made (fobar, hint_prefix, and llm_backward written by the same engine), rolled
out, verified and annotated for the same policy as the reformulated set, report produced; then
a re-run generates nothing. Only the first PARENTS hard items are reformulated (``reformulate.limit``):
each parent costs three ladders (8 + 4 samples each) and one written rewrite. Every hard item of the
ten took 341 s on the quiet 2-core box and ran past the 1,200 s kill switch on a loaded one; three
take 0.65 of its CPU time (741 s against 1,141 s of CPU, both measured at a load average of 15-20).
The main set is five items, one per level L5-L9 (ten before: the stages only need some hard ones): its
rollout took 134 s of CPU instead of 249 s (load averages 10-14 and 2-4); the whole test 583 s of CPU (rollouts 270 s, reformulate
309 s), 895 s of wall at a load average of 10-14 (28 Nov 2026, the phases timed by wrapping each stage).
Marked `engine`; on a shared machine:

    flock /tmp/passband-engine.lock .venv/bin/pytest -m engine tests/test_reformulate_engine.py
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from pipeline.config import load_params
from pipeline.io import read_table

pytestmark = pytest.mark.engine
PARENTS = 3  # every method's plumbing on a few parents; more parents repeat the same paths


class Shared:
    """The session's started engine, lent to a stage: the stage's start/close do not stop it."""

    def __init__(self, engine):
        self.engine = engine

    def start(self) -> float:
        return 0.0

    def close(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self.engine, name)


@pytest.mark.timeout(2400)  # a kill switch: about 220 s quiet; 1,616 s at a load average of 15-20 (a tenth of the CPU),
# 895 s at 10-14 with the five-item main set
def test_reformulation_loop_on_the_real_engine(tmp_path, vllm_engine, embedded_model_dir):
    from pipeline.annotate import run as annotate
    from pipeline.ingest import run as ingest
    from pipeline.reformulate.report import write_report
    from pipeline.reformulate.stage import generations_dir
    from pipeline.reformulate.stage import run as reformulate
    from pipeline.rollout import run as rollout
    from pipeline.verify import run as verify

    (tmp_path / "data" / "models").mkdir(parents=True)
    os.symlink(embedded_model_dir, tmp_path / "data" / "models" / embedded_model_dir.name)
    raw = {
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "split": "train",
                                "options": {"n_per_level": 1, "seed": 0, "levels": ["L5", "L6", "L7", "L8", "L9"]}}]},
        "policies": {"smollm2": {"model": "embedded", "engine": "vllm", "dtype": "float32", "prompt": "fewshot_arith",
                                 "sampling": {"temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 48,
                                              "stop": ["\nQ:", "\n\n"]}}},
        "rollout": {"policies": ["smollm2"], "k": 4, "shard_size": 8},
        "verify": {"workers": 1},
        # every band a target: the ladder keeps each parent's first rung, so every method's plumbing is exercised
        "reformulate": {"methods": ["fobar", "hint_prefix", "llm_backward"], "max_pass_rate": 0.25, "limit": PARENTS,
                        "target_bands": ["too_easy", "learnable", "too_hard", "unsolved"],
                        "options": {"llm_backward": {"writer": "smollm2"}}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    params = load_params(tmp_path / "params.yaml")
    shared = Shared(vllm_engine)

    def factory(*args, **kwargs):
        return shared

    # the main set, measured for real
    ingest(params, root=tmp_path, progress=False)
    rollout(params, root=tmp_path, set_name="main", progress=False, engine_factory=factory)
    verify(params, root=tmp_path, set_name="main", progress=False)
    annotate(params, root=tmp_path, set_name="main", progress=False, plots=False)
    main_diff = read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
    assert len(main_diff) == 5
    hard = {r["problem_id"] for r in main_diff if r["band"] in ("too_hard", "unsolved") and r["pass_rate"] <= 0.25}
    assert hard, [(r["band"], r["pass_rate"]) for r in main_diff]
    hard = set(sorted(hard)[:PARENTS])  # the parents: the first hard ones in problem_id order (reformulate.limit)

    # reformulate the hard ones (llm_backward on the same engine)
    result = reformulate(params, root=tmp_path, progress=False, engine_factory=factory)
    assert result.parents == len(hard)
    children = read_table(tmp_path / "data/reformulated/problems", name="problems").to_pylist()
    rejects = read_table(tmp_path / "data/reformulated/rejects", name="rejects").to_pylist()
    assert len(children) + len(rejects) == 3 * len(hard)
    assert {c["parent_id"] for c in children} <= hard and {r["source_id"] for r in rejects} <= hard
    assert any(c["method"] == "fobar" for c in children)
    for c in children:
        assert c["method_version"] and c["problem_id"].startswith("p_")
        if c["method"] == "fobar":
            meta = json.loads(c["metadata"])
            assert c["answer"] == meta["masked"] and " x" in c["question"]
    llm = [c for c in children if c["method"] == "llm_backward"] + [r for r in rejects if r["source"] == "llm_backward"]
    assert len(llm) == len(hard)  # every parent has an outcome, kept or rejected with a reason
    cache = list(generations_dir(params, tmp_path).glob("llm_backward-*.jsonl"))
    assert len(cache) == 1
    metrics = json.loads((tmp_path / "data/metrics/reformulate.json").read_text())
    generated = metrics["methods"]["llm_backward"]["generated"]
    assert generated == len(cache[0].read_text().splitlines()) > 0

    # the reformulated set through the same stages, same policy
    r1 = rollout(params, root=tmp_path, set_name="reformulated", progress=False, engine_factory=factory)
    assert r1.samples == 4 * len(children)
    verify(params, root=tmp_path, set_name="reformulated", progress=False)
    annotate(params, root=tmp_path, set_name="reformulated", progress=False, plots=False)
    child_diff = read_table(tmp_path / "data/reformulated/difficulty", name="difficulty").to_pylist()
    assert {d["problem_id"] for d in child_diff} == {c["problem_id"] for c in children}
    assert {d["policy_id"] for d in child_diff} == {d["policy_id"] for d in main_diff}

    path, report = write_report(params, root=tmp_path)
    assert path.is_file() and json.loads(path.read_text()) == report
    (pol,) = {d["policy_id"] for d in main_diff}
    parent_rate = {d["problem_id"]: d["pass_rate"] for d in main_diff}
    child_rate = {d["problem_id"]: d["pass_rate"] for d in child_diff}
    for method in {c["method"] for c in children}:
        mine = [c for c in children if c["method"] == method]
        m = report[method]
        assert m["children_kept"] == len(mine) and m["parents_tried"] == len(hard)
        assert m["rejected"] == sum(r["source"] == method for r in rejects) == sum(m["reject_reasons"].values())
        stats = m["policies"][pol]
        assert stats["children_measured"] == len(mine)
        shift = sum(child_rate[c["problem_id"]] - parent_rate[c["parent_id"]] for c in mine) / len(mine)
        assert stats["mean_pass_rate_shift"] == pytest.approx(shift, abs=1e-4)
        learnable = {c["parent_id"] for c in mine
                     if next(d for d in child_diff if d["problem_id"] == c["problem_id"])["band"] == "learnable"}
        assert stats["parents_with_learnable_child"] == len(learnable)

    # every kept child was measured by the ladder (its own seeds), then confirmed on 4 more (reformulate.confirm's
    # default), in the target bands
    for c in children:
        meta = json.loads(c["metadata"])
        assert meta["selected_on"]["n"] == 8 and meta["ladder"][0]["outcome"] in ("kept", "same_hint", "hint_leaks_answer")
        kept = next(e for e in meta["ladder"] if e["outcome"] == "kept")
        assert kept["first"]["n"] == kept["confirmation"]["n"] == 4

    # nothing already done is regenerated or re-measured
    again = reformulate(params, root=tmp_path, progress=False, engine_factory=factory)
    again_metrics = json.loads((tmp_path / "data/metrics/reformulate.json").read_text())
    assert again_metrics["methods"]["llm_backward"]["generated"] == 0 and again_metrics["ladder"]["rungs_measured_now"] == 0
    assert again.problems.equals(result.problems)
    r2 = rollout(params, root=tmp_path, set_name="reformulated", progress=False, engine_factory=factory)
    assert r2.samples == 0 and r2.samples_existing == 4 * len(children)
    print("report:", json.dumps(report, indent=1))


def test_one_hint_ladder_measured_on_the_real_engine(tmp_path, vllm_engine, embedded_model_dir):
    """A two-digit subtraction the 135M model rarely solves, its hint rungs measured for real, smallest first."""
    from pipeline.config import BandsConfig, PolicyConfig, SamplingConfig, VerifyConfig
    from pipeline.reformulate.core import reformulate
    from pipeline.reformulate.measure import EngineMeasure
    from pipeline.reformulate.registry import Parent, build
    from pipeline.rollout.policy import resolve_policy

    (tmp_path / "models").mkdir()
    os.symlink(embedded_model_dir, tmp_path / "models" / embedded_model_dir.name)
    policy = resolve_policy("smollm2", PolicyConfig(
        model="embedded", engine="vllm", dtype="float32", prompt="fewshot_arith",
        sampling=SamplingConfig(temperature=0.8, top_p=1.0, top_k=-1, max_tokens=48, stop=["\nQ:", "\n\n"])),
        models_dir=tmp_path / "models")
    shared = Shared(vllm_engine)
    cache = tmp_path / "ladder.jsonl"

    def measure():
        return EngineMeasure(policy=policy, k=8, verify_config=VerifyConfig(workers=1), bands=BandsConfig(),
                             engine_options={}, root=tmp_path, engine_factory=lambda *a, **k: shared, cache_file=cache)

    parent = Parent("p_sub", "synthetic", "What is 83 - 47?", "36", "83 - 47 = 36. The answer is \\boxed{36}.")
    hint = build("hint_prefix", {})
    m = measure()
    result = reformulate([parent], [hint], measure=m)
    assert m.measured >= 1 and m.samples == 8 * m.measured
    rows = [json.loads(line) for line in cache.read_text().splitlines()]
    assert all(r["n"] == 8 and len(r["completions"]) == 8 and r["statuses"].count("correct") == r["n_correct"]
               for r in rows)
    out = result.problems.to_pylist() or result.rejects.to_pylist()
    record = json.loads(out[0]["metadata"])["ladder"] if result.problems.num_rows else None
    measured = [r for r in rows]
    print("rungs:", [(r["rung"], r["n_correct"]) for r in measured])
    print("a completion:", rows[0]["completions"][0][:200])
    # smallest first: every rung before the deciding one was measured below the band
    by_rung = {r["rung"]: r["n_correct"] for r in measured}
    if record is not None:  # a rung landed: it is the first with 2..6 of 8
        kept = next(e for e in record if e["outcome"] == "kept")
        assert 2 <= by_rung[kept["rung"]] <= 6
        assert all(by_rung[e["rung"]] < 2 for e in record[:record.index(kept)] if "band" in e)
    else:
        assert result.rejects.to_pylist()[0]["reason"] == "no_rung_in_band"
        assert all(n < 2 or n > 6 for n in by_rung.values())
    again = measure()
    assert reformulate([parent], [hint], measure=again).problems.equals(result.problems) and again.measured == 0
