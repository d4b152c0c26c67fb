"""Reformulate: numbers, golden fobar / hint_prefix cases on real items, llm_backward's checks,
selection, the stage invariant, the shell on the fake engine, the CLI and the report view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from shared_data import shared_path

from pipeline.cli import cli
from pipeline.config import ConfigError, parse_params
from pipeline.gold import boxed_gold, gsm8k_gold
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.reformulate.core import InvariantError, ReformulateResult, check_invariant, reformulate, select_parents
from pipeline.reformulate.methods.hint_prefix import find_leak, steps
from pipeline.reformulate.methods.llm_backward import LlmBackward, load_prompt
from pipeline.reformulate.numerals import find_numbers
from pipeline.reformulate.registry import METHODS, Child, Parent, Skip, build, get_method
from pipeline.reformulate.stage import STAGE_REASONS, generations_dir, run
from pipeline.schema import schema

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

REPO = Path(__file__).resolve().parent.parent
HALF = {"fractions": [0.5], "expand_arithmetic": False}  # one rung: the golden hints are half the solution
GOLDEN = yaml.safe_load((REPO / "tests" / "data" / "reformulate_golden.yaml").read_text())


def real_item(file: str, line: int) -> Parent:
    """Line ``line`` of a shared GSM8K / MATH file as a parent problem (gold extracted as ingest does)."""
    path = shared_path(file)
    obj = json.loads(path.read_text(encoding="utf-8").splitlines()[line - 1])
    if file.startswith("gsm8k"):
        return Parent(f"{file}:{line}", "gsm8k", obj["question"], gsm8k_gold(obj["answer"]), obj["answer"])
    return Parent(f"{file}:{line}", "math", obj["problem"], boxed_gold(obj["solution"]), obj["solution"])


# --- numbers --------------------------------------------------------------------------------


def test_find_numbers_standalone_and_maskable():
    got = [(n.text, n.maskable) for n in find_numbers("Pay $80,000 for 1/2 of 150% at 3:00, 5th, x2, .5 and 3-4 days.")]
    assert got == [("80,000", True), ("1", False), ("2", False), ("150", True), ("3", False), ("00", False),
                   (".5", True), ("3", False), ("4", False)]


# --- fobar: golden cases on real GSM8K items ------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN["fobar"], ids=lambda c: f"{c['file']}:{c['line']}")
def test_fobar_golden_gsm8k(case):
    parent = real_item(case["file"], case["line"])
    out = build("fobar", {}).reformulate([parent])[0]
    if "skip" in case:
        assert isinstance(out, Skip) and out.reason == case["skip"], out
        return
    assert isinstance(out, Child), out
    assert out.answer == case["masked"]
    assert out.metadata["masked_index"] == case["index"]
    assert case["contains"] in out.question
    assert parent.answer == case["answer"]
    assert out.question.endswith(
        f"If we know the answer to the above question is {case['answer']}, what is the value of unknown variable x?")
    # the checks, on the result: masked number occurs once, differs from the answer, others remain
    masked_text = out.metadata["masked_text"]
    assert sum(n.text == masked_text for n in find_numbers(parent.question)) == 1
    assert out.answer != parent.answer
    body = out.question.split(" If we know")[0]
    assert find_numbers(body), "the question keeps another number"
    assert body.replace(" x ", f" {masked_text} ").replace("$x ", f"${masked_text} ") == parent.question or \
        body.count("x") >= 1


def test_fobar_is_deterministic_and_recorded():
    parent = real_item("gsm8k/test.jsonl", 1)
    a, b = build("fobar", {}).one(parent), build("fobar", {}).one(parent)
    assert a == b
    assert a.metadata["rule"].startswith("first candidate in reading order")
    assert a.metadata["numbers"] == ["16", "2"] and a.metadata["candidates"] == ["16", "2"]


def test_fobar_without_solution_masks_first_candidate_and_option_changes_version():
    p = Parent("p1", "s", "Tom has 5 apples and 3 dogs. He buys 2 more apples. How many apples?", "7", None)
    out = build("fobar", {}).one(p)
    assert out.answer == "5" and out.question.startswith("Tom has x apples and 3 dogs.")
    strict, loose = build("fobar", {}), build("fobar", {"require_in_solution": False})
    assert strict.method_version != loose.method_version and strict.method_version.startswith("1-")
    with_solution = Parent("p1", "s", "Tom has 3 dogs and 5 apples. He buys 2 more. How many apples?", "7", "5 + 2 = 7")
    assert strict.one(with_solution).answer == "5"  # 3 (dogs) is not used by the solution
    assert loose.one(with_solution).answer == "3"


# --- hint_prefix: golden leak checks on real MATH items -------------------------------------------


@pytest.mark.parametrize("case", GOLDEN["hint_prefix"], ids=lambda c: f"{c['file']}:{c['line']}")
def test_hint_prefix_golden(case):
    parent = real_item(case["file"], case["line"])
    out = build("hint_prefix", HALF).reformulate([parent])[0]
    if "skip" in case:
        assert isinstance(out, Skip) and out.reason == case["skip"], out
        assert case.get("detail", "") in out.detail
        return
    assert isinstance(out, Child), out
    assert out.metadata["hint"] == case["keep"]
    assert out.answer == parent.answer and out.solution == parent.solution
    assert out.question == f"{parent.question}\nHint (the beginning of a solution): {case['keep']}"
    assert find_leak(out.metadata["hint"], parent.answer, question=parent.question) is None


def test_hint_never_holds_the_final_answer_on_real_math_items():
    """Over the first 300 MATH items: the conservative reading never keeps a hint holding the answer's text; the
    exact one keeps those plus hints that only restate a number the question gives (and nothing else)."""
    path = shared_path("math/train.jsonl")
    conservative = build("hint_prefix", {**HALF, "exact_leak_check": False})
    exact = build("hint_prefix", HALF)
    kept = skipped = 0
    extra = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:300]):
        obj = json.loads(line)
        p = Parent(str(i), "math", obj["problem"], boxed_gold(obj["solution"]), obj["solution"])
        out, out_exact = conservative.one(p), exact.one(p)
        if isinstance(out, Child):
            kept += 1
            assert out_exact == out  # the exact reading never drops what the conservative one keeps
            hint = out.metadata["hint"]
            assert "\\boxed" not in hint
            for stated in (f"${p.answer}$", f"= {p.answer}$", f"={p.answer}$", f"is {p.answer}."):
                assert stated not in hint, (i, stated, hint)
            assert out.metadata["steps_in_hint"] < out.metadata["steps_total"]
        else:
            skipped += 1
            assert out.reason in conservative.reasons
            if isinstance(out_exact, Child):
                extra.append((p, out_exact.metadata["hint"]))
    assert kept > 150 and skipped > 30
    for p, hint in extra:  # e.g. 'a degree of $2$' for the coefficient 2 of the $x^2$ term (item 69)
        assert "\\boxed" not in hint
        given = {n.value for n in find_numbers(p.question)}
        assert any(n.value in given for n in find_numbers(hint)), (p.problem_id, hint)
        for stated in (f"= {p.answer}$", f"={p.answer}$", f"is {p.answer}."):
            assert stated not in hint, (p.problem_id, stated, hint)
    assert any(p.problem_id == "68" for p, _ in extra)


def test_steps_do_not_cut_inside_math():
    text = "First, $a. b$ holds. Then\n\\begin{align*} x &= 1. \\\\\n y &= 2\n\\end{align*} So we are done. End."
    pieces = [text[s:e].strip() for s, e in steps(text)]
    assert pieces == ["First, $a. b$ holds.", "Then", "\\begin{align*} x &= 1. \\\\\n y &= 2\n\\end{align*} So we are done.",
                      "End."]


@pytest.mark.parametrize(("hint", "answer", "leaks"), [
    ("So $x = 24$.", "24", True),
    ("We get 12*2=24 apples.", "24", True),
    ("Then 24 + 1 is needed.", "24", False),  # an operand
    ("The value is $-4$.", "-4", True),
    ("We have $\\frac{2}{4}$ of it.", "\\frac{1}{2}", True),  # equal by math-verify
    ("Let $y = \\frac{6}{2} + \\frac{14}{4} + 7$.", "\\frac{27}{2}", False),  # unevaluated: work left
    ("The slope is $-\\dfrac{1}{2}$ here.", "-\\frac{1}{2}", True),  # the answer's text (dfrac = frac)
    ("No numbers at all.", "7", False),
])
def test_find_leak_cases(hint, answer, leaks):
    assert (find_leak(hint, answer) is not None) == leaks


# --- llm_backward: the checks on scripted outputs -------------------------------------------------

WRITER = {"writer": "stronger_model"}  # a policy name: the engine writer (the default is the rule writer)
Q = "Tom has 12 apples. He buys 5 more apples. How many apples does Tom have now?"


def scripted(outputs: list[str]):
    calls: list[list[str]] = []

    def generate(prompts: list[str]) -> list[str]:
        calls.append(list(prompts))
        return outputs[: len(prompts)]

    generate.calls = calls  # type: ignore[attr-defined]
    return generate


@pytest.mark.parametrize(("output", "reason"), [
    (" 12\nBackward: Tom has x apples. He buys 5 more apples. How many apples does Tom have now?", None),
    (" 5\nBackward: Tom has 12 apples. He buys x more apples. How many apples does Tom have now?", None),
    (" The answer is 17.", "unparseable_output"),
    (" 7\nBackward: Tom has x apples. He buys 5 more apples. How many apples does Tom have now?", "number_not_in_question"),
    (" 12\nBackward: Tom has 12 apples. He buys 5 more apples. How many apples does Tom have now?", "unknown_count"),
    (" 12\nBackward: Tom has x apples. He buys x more apples. How many apples does Tom have now?", "unknown_count"),
    (" 12\nBackward: Tom has x apples. He buys 6 more apples. How many apples does Tom have now?", "numbers_changed"),
    (" 12\nBackward: Tom has x apples. He buys 5 more. If he eats 2, how many are left?", "numbers_changed"),
    (" 12\nBackward: Someone owns x fruits and purchases 5 extra ones; what is the total count?", "rewritten_too_much"),
])
def test_llm_backward_checks(output, reason):
    gen = scripted([output])
    method = build("llm_backward", WRITER, generate=gen, generator={"model": "scripted"})
    parent = Parent("p1", "s", Q, "17", None)
    out = method.reformulate([parent])[0]
    assert gen.calls == [[load_prompt().render(Q)]]
    if reason is None:
        assert isinstance(out, Child), out
        assert out.question.endswith("the above question is 17, what is the value of unknown variable x?")
        masked = out.answer
        assert out.question.split(" If we know")[0].replace("x", masked, 1) == Q
        assert out.metadata["output"] == output and out.metadata["generator"] == {"model": "scripted"}
    else:
        assert isinstance(out, Skip) and out.reason == reason, out


def test_llm_backward_masked_equals_answer_and_repeated():
    gen = scripted([" 17\nBackward: Tom has x apples and gets 17 more. How many?",
                    " 3\nBackward: Ann has x cats and 3 dogs and 9 fish. How many pets?"])
    method = build("llm_backward", WRITER, generate=gen, generator={})
    a = Parent("a", "s", "Tom has 17 apples and gets 3 more. How many?", "17", None)
    b = Parent("b", "s", "Ann has 3 cats and 3 dogs and 9 fish. How many pets?", "15", None)
    outs = method.reformulate([a, b])
    assert [o.reason for o in outs] == ["masked_equals_answer", "number_repeated"]


def test_llm_backward_skips_before_generating_and_needs_an_engine():
    gen = scripted([])
    method = build("llm_backward", WRITER, generate=gen, generator={})
    outs = method.reformulate([Parent("a", "s", "Solve $x + 2 = 5$ for 3 cases.", "3", None),
                               Parent("b", "s", "What is 4 squared?", "16", None)])
    assert [o.reason for o in outs] == ["x_in_question", "too_few_numbers"]
    assert gen.calls == []
    with pytest.raises(ConfigError, match="needs an engine"):
        build("llm_backward", WRITER)
    assert not build("llm_backward", {}).needs_engine  # the default writer is the rules


def test_llm_backward_version_follows_prompt_and_generator():
    a = build("llm_backward", WRITER, generate=scripted([]), generator={"model": "m", "revision": "r1"})
    b = build("llm_backward", WRITER, generate=scripted([]), generator={"model": "m", "revision": "r2"})
    c = build("llm_backward", {**WRITER, "min_similarity": 0.5}, generate=scripted([]),
              generator={"model": "m", "revision": "r1"})
    assert len({a.method_version, b.method_version, c.method_version}) == 3
    assert isinstance(a, LlmBackward) and load_prompt().version in a.identity()["prompt"]


# --- registry -------------------------------------------------------------------------------------


def test_registry_lists_methods_and_suggests():
    get_method("fobar")
    assert {"fobar", "hint_prefix", "llm_backward"} <= set(METHODS)
    with pytest.raises(ConfigError, match=r"unknown reformulation method 'fobra' \(did you mean fobar\?\)"):
        get_method("fobra")
    with pytest.raises(ConfigError, match=r"reformulate\.options\.hint_prefix"):
        build("hint_prefix", {"fractions": [1.5]})
    for cls in METHODS.values():
        assert not set(cls.reasons) & set(STAGE_REASONS)


# --- core: selection, duplicates, invariant --------------------------------------------------------


def problem_row(question: str, answer: str, *, solution: str | None = None, source: str = "synthetic", **kw) -> dict:
    return {"problem_id": problem_id(question), "source": source, "source_id": kw.pop("source_id", question[:20]),
            "split": "train", "question": question, "answer": answer, "solution": solution, "subject": None,
            "level": None, "n_duplicates": 0, "parent_id": None, "method": None, "method_version": None,
            "metadata": None, **kw}


def difficulty_row(pid: str, policy_id: str, n_correct: int, band: str, *, n: int = 8) -> dict:
    p = n_correct / n
    return {"problem_id": pid, "policy_id": policy_id, "verifier_id": "v", "n": n, "n_correct": n_correct,
            "n_no_answer": 0, "n_failed": 0, "pass_rate": p, "ci_low": 0.0, "ci_high": 1.0, "pass_at_k": {1: p},
            "learnability": p * (1 - p), "band": band, "band_confidence": 0.9, "mean_tokens_correct": None,
            "std_tokens_correct": None, "mean_tokens_incorrect": None, "std_tokens_incorrect": None, "flag_rates": {},
            "flagged_correct_rate": None, "budget": f"fixed(k={n})", "stop_reason": "fixed", "prior_policy_id": None}


QS = {
    "hard": ("Mia has 14 pens. She buys 9 more and then gives 5 to a friend. How many pens does Mia have now?", "18",
             "14 + 9 = 23. 23 - 5 = 18. The answer is \\boxed{18}."),
    "unsolved": ("What is 351 * 24?", "8424", "351 * 24 = 8424. The answer is \\boxed{8424}."),
    "rare": ("Sam has 20 cards. He buys 7 more. How many cards does Sam have now?", "27",
             "20 + 7 = 27. The answer is \\boxed{27}."),
    "easy": ("What is 3 + 5?", "8", "3 + 5 = 8. The answer is \\boxed{8}."),
}


def tables(policy_id: str = "pol_a"):
    problems = schema("problems").from_rows([problem_row(q, a, solution=s) for q, a, s in QS.values()])
    ids = {k: problem_id(q) for k, (q, _, _) in QS.items()}
    difficulty = schema("difficulty").from_rows([
        difficulty_row(ids["hard"], policy_id, 1, "too_hard"),
        difficulty_row(ids["unsolved"], policy_id, 0, "unsolved"),
        difficulty_row(ids["rare"], policy_id, 2, "too_hard"),  # 0.25 > max_pass_rate 0.125
        difficulty_row(ids["easy"], policy_id, 8, "too_easy"),
        difficulty_row(ids["rare"], "pol_other", 0, "unsolved"),
    ])
    return problems, difficulty, ids


def test_select_parents_by_band_threshold_and_policy():
    problems, difficulty, ids = tables()
    got = select_parents(difficulty, problems, bands=["too_hard", "unsolved"], max_pass_rate=0.125, policy_ids=["pol_a"])
    assert {p.problem_id for p in got} == {ids["hard"], ids["unsolved"]}
    assert [p.problem_id for p in got] == sorted(p.problem_id for p in got)
    everyone = select_parents(difficulty, problems, bands=["too_hard", "unsolved"], max_pass_rate=0.125)
    assert {p.problem_id for p in everyone} == {ids["hard"], ids["unsolved"], ids["rare"]}
    only = select_parents(difficulty, problems, bands=["unsolved"], max_pass_rate=1.0, policy_ids=["pol_a"], limit=1)
    assert [p.problem_id for p in only] == [ids["unsolved"]]


def test_reformulate_rows_invariant_and_duplicates():
    problems, difficulty, ids = tables()
    parents = select_parents(difficulty, problems, bands=["too_hard", "unsolved"], max_pass_rate=0.125)
    fobar = build("fobar", {})
    taken = problem_id(fobar.one(next(p for p in parents if p.problem_id == ids["rare"])).question)
    result = reformulate(parents, [fobar, build("hint_prefix", {})], existing_ids={taken})
    rows = result.problems.to_pylist()
    rejects = result.rejects.to_pylist()
    assert len(rows) + len(rejects) == 2 * len(parents) == 6
    by = {(r["method"], r["parent_id"]): r for r in rows}
    child = by[("fobar", ids["hard"])]
    assert child["question"].startswith("Mia has x pens.") and child["answer"] == "14"
    assert child["problem_id"] == problem_id(child["question"]) and child["source"] == "fobar"
    assert child["source_id"] == ids["hard"] and child["method_version"] == fobar.method_version
    assert json.loads(child["metadata"])["masked"] == "14"
    hint = by[("hint_prefix", ids["hard"])]
    assert hint["question"].endswith("Hint (the beginning of a solution): 14 + 9 = 23.") and hint["answer"] == "18"
    reasons = {(r["source"], r["source_id"]): r["reason"] for r in rejects}
    assert reasons[("fobar", ids["rare"])] == "duplicate_problem"
    # a one-step solution on a one-digit operand: the first step already holds the result
    assert reasons[("hint_prefix", ids["rare"])] == "hint_leaks_answer"
    # 351 * 24 expands into place-value steps: the smallest rung is the first of them (unmeasured here)
    expanded = by[("hint_prefix", ids["unsolved"])]
    assert expanded["question"].endswith("Hint (the beginning of a solution): 351 * 24 = 351 * 20 + 351 * 4.")
    meta = json.loads(expanded["metadata"])
    assert meta["rung"] == "0.25" and meta["writer"] == "rules" and meta["expanded"] is True
    assert meta["ladder"] == [{"rung": "0.25", "problem_id": expanded["problem_id"], "outcome": "kept_unmeasured"}]
    assert all(r["stage"] == "reformulate" for r in rejects)
    assert result.per_method["fobar"] == {"method_version": fobar.method_version, "parents": 3, "problems": 2,
                                          "rejects": 1, "reject_reasons": {"duplicate_problem": 1},
                                          "rungs_measured": 0, "rounds": 0, "kept_per_rung": {"1": 2}}
    broken = ReformulateResult(result.problems, result.rejects.slice(1), result.parents, result.per_method)
    with pytest.raises(InvariantError):
        check_invariant(broken)


# --- the shell on the fake engine, and the CLI ----------------------------------------------------


def write_params(root: Path, *, methods=("fobar", "hint_prefix", "llm_backward"), **reformulate) -> Path:
    params = {
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "options": {"n_per_level": 1}}]},
        "policies": {"fake": {"model": "fake-model", "revision": "r1", "engine": "fake", "prompt": "fewshot_arith",
                              "sampling": {"temperature": 0.8, "max_tokens": 48, "stop": ["\n\n"]}}},
        "rollout": {"policies": ["fake"], "k": 4},
        "reformulate": {"methods": list(methods), **reformulate},
    }
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def seed_main_set(root: Path, params) -> dict[str, str]:
    from pipeline.rollout.policy import resolve_policy

    pol = resolve_policy("fake", params.policies["fake"], models_dir=root / "data/models").policy_id
    problems, difficulty, ids = tables(pol)
    write_table(problems, root / "data/problems/part-0.parquet", name="problems")
    write_table(difficulty, root / "data/difficulty/part-0.parquet", name="difficulty")
    return {**ids, "policy_id": pol}


def test_run_writes_the_reformulated_set_and_caches_generations(tmp_path):
    from pipeline.config import load_params
    from pipeline.engines import create_engine
    from pipeline.reformulate.stage import ladder_dir

    params = load_params(write_params(tmp_path, options={"llm_backward": {"writer": "fake"}}))
    ids = seed_main_set(tmp_path, params)
    engines = []

    def factory(*args, **kwargs):
        engines.append(create_engine(*args, **kwargs))
        return engines[-1]

    result = run(params, root=tmp_path, progress=False, engine_factory=factory)
    assert result.parents == 2  # hard + unsolved for this policy
    probs = read_table(tmp_path / "data/reformulated/problems", name="problems")
    rejects = read_table(tmp_path / "data/reformulated/rejects", name="rejects")
    assert probs.num_rows + rejects.num_rows == 3 * 2
    assert set(probs.column("parent_id").to_pylist()) <= {ids["hard"], ids["unsolved"]}
    # the fake engine answers "The answer is N." to the backward prompt: unparseable, and recorded as such
    llm = [r for r in rejects.to_pylist() if r["source"] == "llm_backward"]
    assert [r["reason"] for r in llm] == ["unparseable_output"] * 2
    assert all(r["detail"].startswith("output ' ") and "The answer is" in r["detail"] for r in llm)
    metrics = json.loads((tmp_path / "data/metrics/reformulate.json").read_text())
    assert metrics["methods"]["llm_backward"]["generated"] == 2
    assert metrics["policies"] == {"fake": ids["policy_id"]}
    cache = list(generations_dir(params, tmp_path).glob("llm_backward-*.jsonl"))
    assert len(cache) == 1 and len(cache[0].read_text().splitlines()) == 2
    # two engines: the writer's (two prompts, one sample each) and the ladder's (k = 4 samples per rung)
    assert len(engines) == 2
    writer = [e for e in engines if e.calls and all(len(c) == 2 for c in e.calls)]
    assert len(writer) == 1 and len(writer[0].calls) == 1
    ladder = ladder_dir(params, tmp_path) / f"{ids['policy_id']}.jsonl"
    measured = [json.loads(line) for line in ladder.read_text().splitlines()]
    assert len(measured) == metrics["ladder"]["rungs_measured_now"] > 0
    assert all(m["n"] == 4 and len(m["completions"]) == len(m["statuses"]) == 4 for m in measured)
    assert metrics["ladder"]["samples"] == 4 * len(measured)
    for row in probs.to_pylist():  # every kept child was measured in the target band
        meta = json.loads(row["metadata"])
        assert meta["selected_on"]["band"] == "learnable" and meta["ladder"][-1]["outcome"] in ("kept", "not_tried")

    again = run(params, root=tmp_path, progress=False, engine_factory=factory)  # nothing new to generate or measure
    assert len(engines) == 2
    assert again.problems.equals(result.problems) and again.rejects.equals(result.rejects)
    assert json.loads((tmp_path / "data/metrics/reformulate.json").read_text())["ladder"]["rungs_measured_now"] == 0


def test_run_unknown_method_and_options_are_errors(tmp_path):
    from pipeline.config import load_params

    params = load_params(write_params(tmp_path, methods=("fobar", "hnt_prefix")))
    with pytest.raises(ConfigError, match="did you mean hint_prefix"):
        run(params, root=tmp_path, progress=False)
    params = load_params(write_params(tmp_path, methods=("fobar",), options={"hint_prefix": {"fraction": 0.3}}))
    with pytest.raises(ConfigError, match=r"not in reformulate\.methods"):
        run(params, root=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="limit"):
        parse_params({**yaml.safe_load(write_params(tmp_path).read_text()), "reformulate": {"limit": 0}})


def test_cli_reformulate_and_report(tmp_path):
    # every band a target: the ladder keeps each parent's first rung, whatever the fake engine's pass rate
    params_path = write_params(tmp_path, methods=("fobar", "hint_prefix"),
                               target_bands=["too_easy", "learnable", "too_hard", "unsolved"],
                               options={"hint_prefix": {"expand_arithmetic": False}})
    from pipeline.config import load_params

    ids = seed_main_set(tmp_path, load_params(params_path))
    runner = CliRunner()
    res = runner.invoke(cli, ["reformulate", "--params", str(params_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "reformulate: 2 hard parents -> 3 reformulations, 1 rejects" in res.output
    assert "hint_prefix" in res.output and "hint_leaks_answer 1" in res.output

    # re-measure the children: fobar's child learnable (parent 1/8 -> 4/8), hint's child too easy
    probs = read_table(tmp_path / "data/reformulated/problems", name="problems").to_pylist()
    child = {(r["method"], r["parent_id"]): r["problem_id"] for r in probs}
    pol = ids["policy_id"]
    write_table(schema("difficulty").from_rows([
        difficulty_row(child[("fobar", ids["hard"])], pol, 4, "learnable"),
        difficulty_row(child[("fobar", ids["unsolved"])], pol, 0, "unsolved"),
        difficulty_row(child[("hint_prefix", ids["hard"])], pol, 8, "too_easy"),
    ]), tmp_path / "data/reformulated/difficulty/part-0.parquet", name="difficulty")
    res = runner.invoke(cli, ["reformulate-report", "--params", str(params_path)])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "data/metrics/reformulation_report.json").read_text())
    assert data["fobar"]["parents_tried"] == 2 and data["fobar"]["children_kept"] == 2 and data["fobar"]["rejected"] == 0
    fob = data["fobar"]["policies"][pol]
    assert fob["parents_with_learnable_child"] == 1 and fob["children_measured"] == 2
    assert fob["share_parents_with_learnable_child"] == pytest.approx(0.5)
    assert fob["mean_parent_pass_rate"] == pytest.approx((1 / 8 + 0) / 2)
    shifts = [4 / 8 - 1 / 8, 0.0]
    mean = sum(shifts) / 2
    half = 1.96 * (sum((x - mean) ** 2 for x in shifts) / 1) ** 0.5 / 2 ** 0.5
    assert fob["mean_pass_rate_shift"] == pytest.approx(mean)
    assert (fob["shift_ci_low"], fob["shift_ci_high"]) == (pytest.approx(mean - half, abs=1e-4),
                                                           pytest.approx(mean + half, abs=1e-4))
    # groups with a success and a failure: parents 1/8 and 0/8 -> half; fobar's children 4/8 and 0/8 -> half
    assert fob["reward_density_before"] == pytest.approx(0.5) and fob["reward_density_after"] == pytest.approx(0.5)
    hint = data["hint_prefix"]
    assert hint["reject_reasons"] == {"hint_leaks_answer": 1} and hint["rejected"] == 1
    hp = hint["policies"][pol]
    assert hp["parents_with_learnable_child"] == 0 and hp["children_too_easy"] == 1
    assert hp["mean_pass_rate_shift"] == pytest.approx(1 - 1 / 8) and hp["shift_ci_low"] is None
    assert hp["reward_density_after"] == 0.0  # 8/8: no failure, no signal
    anyone = data["(any)"]
    assert anyone["parents_tried"] == 2 and anyone["children_kept"] == 3 and anyone["rejected"] == 0
    assert anyone["policies"][pol]["parents_with_learnable_child"] == 1
    assert anyone["policies"][pol]["share_parents_with_learnable_child"] == pytest.approx(0.5)
    assert "fobar: 2 parents tried, 2 children kept" in res.output and "reward density 50 % -> 50 %" in res.output
    # the goal (default 40 %): fobar's 1 of 2 reaches it, hint_prefix's 0 of 2 does not
    goals = [line.strip() for line in res.output.splitlines() if "goal" in line]
    assert goals[0] == "goal 40 % of hard parents with a learnable child: reached"  # fobar, first
    assert "goal 40 % of hard parents with a learnable child: NOT reached" in goals
    png = tmp_path / "data/plots/reformulation_shift.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_help():
    runner = CliRunner()
    for name in ("reformulate", "reformulate-report"):
        res = runner.invoke(cli, [name, "--help"])
        assert res.exit_code == 0 and "reformulat" in res.output


def test_report_counts_every_reject_not_every_reason(tmp_path):
    from pipeline.config import load_params
    from pipeline.reformulate.report import report

    params = load_params(write_params(tmp_path, methods=("fobar",)))
    rows = [{"stage": "reformulate", "source": "fobar", "source_id": f"p{i}", "reason": reason, "detail": None,
             "excerpt": None} for i, reason in enumerate(["single_number", "single_number", "no_number"])]
    rows.append({"stage": "ingest", "source": "gsm8k", "source_id": "x:1", "reason": "malformed_json", "detail": None,
                 "excerpt": None})
    write_table(schema("rejects").from_rows(rows), tmp_path / "data/reformulated/rejects/reformulate.parquet", name="rejects")
    data = report(params, root=tmp_path)
    assert data == {"fobar": {"parents_tried": 3, "children_kept": 0, "rejected": 3,
                              "reject_reasons": {"no_number": 1, "single_number": 2}, "policies": {}},
                    "(any)": {"parents_tried": 3, "children_kept": 0, "rejected": 3, "reject_reasons": {},
                              "policies": {}}}
