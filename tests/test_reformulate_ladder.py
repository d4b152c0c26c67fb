"""The ladder (smallest sufficient rung, every rung's fate), its measurement through an engine and the verifier,
the rule-based backward writer's recomputed golds, the place-value hints and the exact leak check."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from pipeline.arith import NotArithmetic, chain, expand_step, step_value
from pipeline.config import BandsConfig, SamplingConfig, VerifyConfig
from pipeline.engines import Sample
from pipeline.gold import gsm8k_gold
from pipeline.ingest.synthetic import SyntheticOptions, generate
from pipeline.keys import problem_id
from pipeline.reformulate.core import reformulate
from pipeline.reformulate.ladder import Measurement, band_of
from pipeline.reformulate.measure import DamagedCache, EngineMeasure
from pipeline.reformulate.methods.hint_prefix import find_leak
from pipeline.reformulate.registry import Child, Parent, Skip, build

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
BANDS = BandsConfig()

WORD2 = Parent("p_word2", "synthetic", "Mia has 14 pens. She buys 9 more and then gives 5 to a friend. How many pens does "
               "Mia have now?", "18", "14 + 9 = 23. 23 - 5 = 18. The answer is \\boxed{18}.")
SUB = Parent("p_sub", "synthetic", "What is 52 - 27?", "25", "52 - 27 = 25. The answer is \\boxed{25}.")


class Table:
    """A measure with known pass rates: ``rates[problem_id] = n_correct of 8``; records every batch."""

    def __init__(self, rates: dict[str, int]):
        self.rates, self.batches = rates, []

    def __call__(self, candidates):
        self.batches.append([c.rung for c in candidates])
        return [Measurement(8, self.rates[c.problem_id], band_of(self.rates[c.problem_id], 8, BANDS)) for c in candidates]


def rung_ids(parent: Parent, method) -> dict[str, str]:
    return {label: problem_id(out.question) for label, out in method.ladder([parent])[0] if isinstance(out, Child)}


# --- the ladder -----------------------------------------------------------------------------------


def test_ladder_keeps_the_smallest_sufficient_rung_and_records_every_rung():
    hint = build("hint_prefix", {})
    ids = rung_ids(SUB, hint)
    assert list(ids) == ["0.25", "0.5"]  # 0.75 would state 32 - 7 = 25
    measure = Table({ids["0.25"]: 0, ids["0.5"]: 3})
    result = reformulate([SUB], [hint], measure=measure)
    (row,) = result.problems.to_pylist()
    meta = json.loads(row["metadata"])
    assert row["problem_id"] == ids["0.5"] and meta["rung"] == "0.5" and meta["writer"] == "rules"
    assert measure.batches == [["0.25"], ["0.5"]]  # smallest first, one rung per round
    assert [(e["rung"], e["outcome"]) for e in meta["ladder"]] == [("0.25", "climbed"), ("0.5", "kept"),
                                                                   ("0.75", "hint_leaks_answer")]
    assert meta["ladder"][0]["band"] == "unsolved" and meta["selected_on"] == {"n": 8, "n_correct": 3, "band": "learnable"}
    assert result.per_method["hint_prefix"]["kept_per_rung"] == {"0.5": 1}


def test_ladder_stops_above_the_band_and_rejects_when_no_rung_lands():
    hint = build("hint_prefix", {})
    ids = rung_ids(SUB, hint)
    too_easy = Table({ids["0.25"]: 8, ids["0.5"]: 4})
    result = reformulate([SUB], [hint], measure=too_easy)
    assert result.problems.num_rows == 0 and too_easy.batches == [["0.25"]]  # a bigger hint only helps more
    (rej,) = result.rejects.to_pylist()
    assert rej["reason"] == "no_rung_in_band"
    assert rej["detail"] == "0.25: 8/8 too_easy, stopped; 0.5: not_tried; 0.75: hint_leaks_answer"
    too_hard = Table({ids["0.25"]: 0, ids["0.5"]: 1})
    (rej,) = reformulate([SUB], [hint], measure=too_hard).rejects.to_pylist()
    assert rej["detail"] == "0.25: 0/8 unsolved, climbed; 0.5: 1/8 too_hard, climbed; 0.75: hint_leaks_answer"


def test_ladder_batches_parents_per_round_and_non_monotone_methods_keep_climbing():
    backward = build("llm_backward", {})  # the rule writer: rungs are not ordered by help
    ids_w = rung_ids(WORD2, backward)
    assert list(ids_w) == ["input", "step:1"]
    hint = build("hint_prefix", {})
    ids_s = rung_ids(SUB, hint)
    measure = Table({ids_w["input"]: 8, ids_w["step:1"]: 2, ids_s["0.25"]: 0, ids_s["0.5"]: 5})
    r = reformulate([WORD2], [backward], measure=measure)
    assert json.loads(r.problems.to_pylist()[0]["metadata"])["rung"] == "step:1"  # past a too-easy rung
    both = Table({**measure.rates, rung_ids(WORD2, hint)["0.25"]: 0})
    reformulate([WORD2, SUB], [hint], measure=both)
    assert both.batches[0] == ["0.25", "0.25"]  # round one: every parent's smallest rung at once


class Replicas(Table):
    """Known n_correct of 8 per (problem_id, replica): the first measurement and the confirmation differ."""

    def __call__(self, candidates):
        self.batches.append([(c.rung, c.replica) for c in candidates])
        return [Measurement(8, n := self.rates[c.problem_id, c.replica], band_of(n, 8, BANDS)) for c in candidates]


def test_a_landing_rung_is_confirmed_on_new_samples_and_decided_pooled():
    hint = build("hint_prefix", {})
    ids = rung_ids(SUB, hint)
    confirm = lambda c, n: band_of(c, n, BANDS)  # noqa: E731
    # 0.25 lands on a lucky 2/8 but its confirmation finds 0/8: pooled 2/16 is too hard, so the ladder climbs
    measure = Replicas({(ids["0.25"], 0): 2, (ids["0.25"], 1): 0, (ids["0.5"], 0): 3, (ids["0.5"], 1): 2})
    result = reformulate([SUB], [hint], measure=measure, confirm=confirm)
    assert measure.batches == [[("0.25", 0)], [("0.25", 1)], [("0.5", 0)], [("0.5", 1)]]
    (row,) = result.problems.to_pylist()
    meta = json.loads(row["metadata"])
    assert row["problem_id"] == ids["0.5"] and meta["selected_on"] == {"n": 16, "n_correct": 5, "band": "learnable"}
    first, second = meta["ladder"][:2]
    assert first["outcome"] == "climbed" and (first["n"], first["n_correct"], first["band"]) == (16, 2, "too_hard")
    assert first["first"]["band"] == "learnable" and first["confirmation"] == {"n": 8, "n_correct": 0, "band": "unsolved"}
    assert second["outcome"] == "kept"
    # without confirmation the lucky group keeps 0.25
    assert json.loads(reformulate([SUB], [hint], measure=Replicas(measure.rates)).problems.to_pylist()[0][
        "metadata"])["rung"] == "0.25"
    # a reject's detail tells the whole story; a rung below the band is never measured twice
    low = Replicas({(ids["0.25"], 0): 2, (ids["0.25"], 1): 0, (ids["0.5"], 0): 1})
    (rej,) = reformulate([SUB], [hint], measure=low, confirm=confirm).rejects.to_pylist()
    assert rej["detail"] == ("0.25: 2/8 learnable, then 0/8: 2/16 too_hard, climbed; 0.5: 1/8 too_hard, climbed; "
                             "0.75: hint_leaks_answer")
    assert low.batches == [[("0.25", 0)], [("0.25", 1)], [("0.5", 0)]]


def test_without_a_measure_the_first_rung_made_is_kept_unmeasured():
    (row,) = reformulate([SUB], [build("hint_prefix", {})]).problems.to_pylist()
    meta = json.loads(row["metadata"])
    assert meta["rung"] == "0.25" and meta["ladder"][0]["outcome"] == "kept_unmeasured" and "selected_on" not in meta


# --- the measurement: an engine, the verifier, the bands, the cache ---------------------------------


class ScriptedEngine:
    """Answers right for the first ``right[question]`` seeds of each request (a known pass rate per rung)."""

    def __init__(self, right: dict[str, tuple[int, str]]):
        self.right, self.started, self.requests = right, 0, []

    def start(self) -> float:
        self.started += 1
        return 0.0

    def close(self) -> None:
        pass

    def generate(self, requests):
        out = []
        for req in requests:
            self.requests.append(req)
            text = req.prompt.text
            n_right, gold = next(v for q, v in sorted(self.right.items(), key=lambda kv: -len(kv[0])) if q in text)
            for i, seed in enumerate(req.seeds):
                answer = gold if i < n_right else str(int(gold) + 1)
                out.append(Sample(req.id, i, seed, f" The answer is {answer}.", 5, "stop"))
        return out


def policy():
    from pipeline.config import PolicyConfig
    from pipeline.rollout.policy import resolve_policy

    cfg = PolicyConfig(model="fake-model", revision="r1", engine="fake", prompt="fewshot_arith",
                       sampling=SamplingConfig(temperature=0.8, max_tokens=48, stop=["\n\n"]))
    return resolve_policy("fake", cfg, models_dir=Path("data/models"))


def test_engine_measure_verifies_bands_and_caches(tmp_path):
    hint = build("hint_prefix", {})
    rungs = dict(hint.ladder([SUB])[0])
    engine = ScriptedEngine({rungs["0.25"].question: (0, "25"), rungs["0.5"].question: (4, "25")})
    cache = tmp_path / "ladder" / "pol.jsonl"
    made = []

    def factory(*args, **kwargs):
        made.append(args)
        return engine

    def measure():
        return EngineMeasure(policy=policy(), k=8, verify_config=VerifyConfig(workers=1), bands=BANDS, engine_options={},
                             root=tmp_path, engine_factory=factory, cache_file=cache)

    m = measure()
    result = reformulate([SUB], [hint], measure=m)
    m.close()
    meta = json.loads(result.problems.to_pylist()[0]["metadata"])
    assert meta["rung"] == "0.5" and meta["selected_on"] == {"n": 8, "n_correct": 4, "band": "learnable"}
    assert engine.started == 1 and len(engine.requests) == 2 and m.measured == 2 and m.samples == 16
    pid = m.policy.policy_id
    from pipeline.keys import sample_seed

    cand_pid = problem_id(rungs["0.25"].question)
    assert engine.requests[0].seeds == tuple(sample_seed(cand_pid, f"{pid}/ladder", i) for i in range(8))
    rows = [json.loads(line) for line in cache.read_text().splitlines()]
    assert sorted(r["n_correct"] for r in rows) == [0, 4]
    assert all(r["statuses"].count("correct") == r["n_correct"] and len(r["completions"]) == 8 for r in rows)

    again = measure()  # a re-run: everything cached, no engine started
    assert reformulate([SUB], [hint], measure=again).problems.equals(result.problems)
    assert again.measured == 0 and len(made) == 1

    # confirmation: the landing rung measured again on k new seeds, a cache entry of its own
    confirmed = measure()
    r2 = reformulate([SUB], [hint], measure=confirmed, confirm=lambda c, n: band_of(c, n, BANDS))
    assert json.loads(r2.problems.to_pylist()[0]["metadata"])["selected_on"] == {"n": 16, "n_correct": 8,
                                                                                 "band": "learnable"}
    assert confirmed.measured == 1 and len(made) == 2
    seeds = engine.requests[-1].seeds
    assert seeds == tuple(sample_seed(problem_id(rungs["0.5"].question), f"{pid}/ladder/1", i) for i in range(8))
    assert not set(seeds) & set(engine.requests[1].seeds)
    assert len(cache.read_text().splitlines()) == 3

    cache.write_text(cache.read_text() + "{not json\n")
    with pytest.raises(DamagedCache, match=r"pol\.jsonl: line 4 is damaged; delete the file"):
        reformulate([SUB], [hint], measure=measure())


# --- the rule-based backward writer: every gold recomputes ------------------------------------------


def check_child(parent: Parent, label: str, child: Child) -> None:
    """Recompute the child's gold independently of the writer."""
    meta = child.metadata
    if label == "input":
        body = child.question.split(" If we know the answer")[0]
        assert body.replace("x", meta["masked_text"], 1) == parent.question or meta["masked_text"] in parent.question
        assert child.question.endswith(f"is {parent.answer}, what is the value of unknown variable x?")
        assert Fraction(child.answer) == Fraction(meta["masked"])
        assert Fraction(meta["recomputed"]) == Fraction(parent.answer)
        assert Fraction(meta["recomputed_with_x_plus_1"]) != Fraction(parent.answer)
    else:
        step = meta["step_text"]
        shown = re.search(r"([\d.,+\-*/()\s]+)=\s*x\b", step.replace("$", ""))  # the computation the sentence shows
        assert shown, step
        assert step_value(shown.group(1).strip()) == Fraction(child.answer), (step, child.answer)
        assert f'"{step}"' in child.question and f"The answer to this question is {parent.answer}." in child.question
        assert Fraction(child.answer) != Fraction(parent.answer)


def test_rule_backward_golds_recompute_on_the_synthetic_set():
    writer = build("llm_backward", {})
    kinds = {"input": 0, "step": 0, "expanded": 0}
    one_step_expandable = 0
    for item in generate(SyntheticOptions(n_per_level=12, seed=0)):
        parent = Parent(item.question, "synthetic", item.question, item.answer, item.solution)
        labels = []
        for label, out in writer.ladder([parent])[0]:
            if isinstance(out, Child):
                check_child(parent, label, out)
                kinds["expanded" if "." in label else label.split(":")[0]] += 1
                labels.append(label)
            else:
                assert out.reason in writer.reasons
        bare = re.fullmatch(r"What is (\d+) [-+*] (\d+)\?", item.question)
        if bare and sum(d != "0" for d in bare.group(2)) >= 2:  # 48 - 29: its place-value steps are rungs
            one_step_expandable += 1
            assert "step:1.1" in labels, (item.question, labels)
    assert one_step_expandable >= 24
    # the two- and three-step word problems (L7, L8) give 12 + 2 * 12 intermediates, less the few equal to a given;
    # an input rung needs a number that occurs once (3 * 3, 7 + 7 have none)
    assert 12 + 2 * 12 - 3 <= kinds["step"] <= 12 + 2 * 12 and kinds["input"] >= 90


def test_rule_backward_golds_recompute_on_gsm8k():
    path = SHARED / "gsm8k" / "train.jsonl"
    if not path.is_file():
        pytest.skip("GSM8K not present")
    writer = build("llm_backward", {})
    made = skipped = 0
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:300]):
        obj = json.loads(line)
        parent = Parent(str(i), "gsm8k", obj["question"], gsm8k_gold(obj["answer"]), obj["answer"])
        for label, out in writer.ladder([parent])[0]:
            if isinstance(out, Child):
                check_child(parent, label, out)
                made += 1
            else:
                skipped += 1
                assert out.reason in writer.reasons
    assert made > 400 and skipped > 10


def test_chain_rejects_a_step_that_does_not_recompute():
    assert [(s.expr, s.value) for s in chain("Natalia sold 48/2 = <<48/2=24>>24 clips. 48+24 = <<48+24=72>>72")] == [
        ("48/2", 24), ("48+24", 72)]
    with pytest.raises(NotArithmetic):
        chain("14 + 9 = 24. 24 - 5 = 19.")
    parent = Parent("p", "s", "Tom has 14 pens and buys 9. How many?", "24", "14 + 9 = 24.")
    (_, out), *_ = build("llm_backward", {}).ladder([parent])[0]
    assert isinstance(out, Skip) and out.reason == "no_chain"


def test_input_rung_needs_the_answer_to_pin_x_down():
    # 0 * 7: the answer does not change when the masked number does, so it is no rung
    parent = Parent("p", "s", "Tom has 7 bags with 0 pens and 3 more boxes. How many pens?", "0", "7 * 0 = 0.")
    rungs = dict(build("llm_backward", {}).ladder([parent])[0])
    assert isinstance(rungs["input"], Skip) and rungs["input"].reason == "no_input"


# --- hints: place-value steps and the leak check, both ways -----------------------------------------


@pytest.mark.parametrize(("step", "expanded"), [
    ("52 - 27 = 25.", ["52 - 27 = 52 - 20 - 7.", "52 - 20 = 32.", "32 - 7 = 25."]),
    ("47 + 38 = 85.", ["47 + 38 = 47 + 30 + 8.", "47 + 30 = 77.", "77 + 8 = 85."]),
    ("351 * 24 = 8424.", ["351 * 24 = 351 * 20 + 351 * 4.", "351 * 20 = 7020.", "351 * 4 = 1404.",
                          "7020 + 1404 = 8424."]),
    ("3 + 5 = 8.", None),  # nothing to split
    ("40 + 30 = 70.", None),  # one non-zero digit
    ("14 + 9 = 24.", None),  # wrong: never expanded
])
def test_expand_step(step, expanded):
    assert expand_step(step) == expanded


@pytest.mark.parametrize(("hint", "answer", "question", "exact", "conservative"), [
    # a restated given is not the answer (exact keeps it), the conservative reading rejects it
    ("She starts with 24 clips.", "24", "Ann has 24 clips and sells half twice as ...?", False, True),
    ("We need the degree of $2$ terms.", "2", "Find the coefficient of the $x^2$ term.", False, True),
    # results are leaks under both readings
    ("So 48/2 = 24.", "24", "Ann has 24 clips and 48 pins ...?", True, True),
    ("The total is 24.", "24", "Ann has 24 clips ...?", True, True),
    ("So 48/2 = 24.", "24", "Ann has 48 pins ...?", True, True),
    ("Half of it is 24 pins.", "24", "Ann has 48 pins ...?", True, True),
    ("Then $x = \\boxed{7}$.", "7", "Solve 7x = 49", True, True),
])
def test_leak_check_exact_and_conservative(hint, answer, question, exact, conservative):
    assert (find_leak(hint, answer, question=question, exact=True) is not None) == exact
    assert (find_leak(hint, answer, question=question, exact=False) is not None) == conservative


def test_hint_rungs_that_round_to_the_same_hint_are_recorded_once():
    rungs = build("hint_prefix", {}).ladder([WORD2])[0]
    assert [(label, type(out).__name__, getattr(out, "reason", None)) for label, out in rungs] == [
        ("0.25", "Child", None), ("0.5", "Skip", "same_hint"), ("0.75", "Skip", "hint_leaks_answer")]

