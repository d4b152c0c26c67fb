"""The answer-key score weighs the working of the biggest wrong class (pipeline/annotate/working.py): a class reached
by true arithmetic is a true answer, one reached by a false statement a repeated slip. Rows in the embedded model's
own forms (its real completions read "8 * 4 = 24. The answer is 24." on 8 samples of 8, and "3 + 5 = 8. The answer
is 8." where a key was moved by one: benchmarks/strong_policy_run.py)."""

from __future__ import annotations

import duckdb
import pytest

from pipeline.annotate.core import annotate_tables
from pipeline.annotate.gold_suspicion import MIN_FIT, GoldModel, posterior, prepare, read_sql
from pipeline.annotate.working import KINDS, working_kind
from pipeline.config import AnnotateConfig
from pipeline.keys import problem_id
from pipeline.schema import schema


@pytest.mark.parametrize(("completion", "extracted", "kind"), [
    (" 8 * 4 = 24. The answer is 24.", "24", "false"),
    (" 3 + 5 = 8. The answer is 8.", "8", "supported"),
    (" 7. The answer is 7.", "7", "none"),  # no working
    ("Let x be the count. 3x + 5 = 20, so x = 5. The answer is 5.", "5", "supported"),  # an equation's root
    (" 3 + 5 = 8. The answer is 9.", "9", "none"),  # true arithmetic that does not give the answer
    ("<think>2 + 2 = 5? no.</think> 2 + 2 = 4. The answer is 4.", "4", "supported"),  # the graded part only
    (" The answer is \\frac{\\pi}{3}.", "\\frac{\\pi}{3}", "none"),
])
def test_a_rollouts_working_is_false_supported_or_none(completion, extracted, kind) -> None:
    assert working_kind(completion, extracted) == kind


def _run(moved: set[int], n: int = 3 * MIN_FIT):
    """``n`` sums a policy mostly solves with true working, a third of them failed the same way by a false product
    ("a * b = wrong", key right), and the keys of ``moved`` one off (the policy's true answer then looks wrong)."""
    verdicts, rollouts, problems = [], [], []
    for j in range(n):
        a, b = 10 + j, 3 + j % 5
        q = f"What is {a} + {b}?"
        key = a + b + (1 if j in moved else 0)
        if j % 3 == 2 and j not in moved:  # a repeated slip: 8 of 8 on one wrong answer, its working false
            samples = [(f" {a} + {b} = {a + b + 10}. The answer is {a + b + 10}.", str(a + b + 10))] * 8
        else:  # 7 of 8 right with true working, one slip
            samples = [(f" {a} + {b} = {a + b}. The answer is {a + b}.", str(a + b))] * 7
            samples += [(f" {a} + {b} = {a + b + 2}. The answer is {a + b + 2}.", str(a + b + 2))]
        pid = problem_id(q)
        problems.append({"problem_id": pid, "source": "t", "source_id": q, "question": q, "answer": str(key),
                         "n_duplicates": 0})
        for i, (text, x) in enumerate(samples):
            verdicts.append({"problem_id": pid, "policy_id": "A", "sample_idx": i, "verifier_id": "v",
                             "status": "correct" if x == str(key) else "incorrect", "extracted": x})
            rollouts.append({"problem_id": pid, "policy_id": "A", "sample_idx": i, "seed": i, "completion": text,
                             "n_tokens": 9, "finish_reason": "stop"})
    return (schema("verdicts").from_rows(verdicts), schema("rollouts").from_rows(rollouts),
            schema("problems").from_rows(problems))


def _scores(tables) -> dict[str, tuple[float, bool]]:
    difficulty, _ = annotate_tables(*tables, config=AnnotateConfig(), verifier_id="v")
    return {r["problem_id"]: (r["gold_suspicion"], r["gold_suspect"]) for r in difficulty.to_pylist()}


def test_the_working_tells_a_moved_key_from_a_repeated_slip() -> None:
    moved = {0, 1}
    tables = _run(moved)
    ids = [r["problem_id"] for r in tables[2].to_pylist()]
    got = _scores(tables)
    slips = [ids[j] for j in range(len(ids)) if j % 3 == 2]
    assert all(got[ids[j]][1] for j in moved)  # both moved keys flagged
    assert not any(got[p][1] for p in slips) and max(got[p][0] for p in slips) < 0.05  # no slip is
    # without the working the counts alone leave both moved keys unflagged (7 of 8 on one answer, as the slips' 8 of 8,
    # is what this policy does when it fails)
    con = duckdb.connect()
    for name, t in zip(("verdicts", "rollouts"), tables[:2], strict=True):
        con.register(name, t)
    model = prepare(con, samples="verdicts", threshold=0.5, prior=0.03)
    plain = dict(con.execute("SELECT problem_id, any_value(gold_suspicion) FROM _modal GROUP BY 1").fetchall())
    assert model.working_right == ()
    assert max(plain[ids[j]] for j in moved) < 0.5


def test_the_working_shares_are_fitted_to_the_run_and_refined_past_the_moved_keys() -> None:
    tables = _run({0, 1, 3})
    con = duckdb.connect()
    for name, t in zip(("verdicts", "rollouts"), tables[:2], strict=True):
        con.register(name, t)
    from pipeline.annotate.gold_suspicion import read_working

    model = prepare(con, samples="verdicts", threshold=0.5, prior=0.03,
                    working=read_working(con, samples="verdicts", rollouts="rollouts"))
    right, wrong = dict(zip(KINDS, model.working_right, strict=True)), dict(zip(KINDS, model.working_wrong, strict=True))
    assert right["supported"] > 0.9 and wrong["false"] > 0.8
    # the three moved keys' classes are supported: counted as wrong-answer classes they give the wrong side a
    # 'supported' share of (3 + 1) in (23 + 3); EM moves part of them to the right side, by their posteriors
    assert wrong["supported"] < (3 + 1) / (model.fitted_working[1] + len(KINDS)) - 0.01
    # the rows read: at most 3 a class, classes of two or more only
    per_class = con.execute(f"SELECT max(n) FROM (SELECT problem_id, count(*) AS n FROM ({read_sql('verdicts')}) "
                            "GROUP BY problem_id)").fetchone()[0]
    assert per_class <= 3  # one class of 2+ per problem here (the 7 right or the 8 slips); the lone slip is not read


def test_the_working_ratio_is_one_factor_and_only_where_two_rollouts_agree() -> None:
    model = GoldModel(prior=0.03, alpha=4.0, beta=1.0, working_right=(0.01, 0.98, 0.01), working_wrong=(0.9, 0.05, 0.05))
    base = posterior(model, 0, 6, 8)
    assert posterior(model, 0, 6, 8, working="supported") > base > posterior(model, 0, 6, 8, working="false")
    assert posterior(model, 0, 1, 1, working="supported") == posterior(model, 0, 1, 1)  # one rollout is no class
    assert posterior(model, 0, 6, 8, working=None) == base  # unread
    unfitted = GoldModel(prior=0.03, alpha=4.0, beta=1.0)
    assert posterior(unfitted, 0, 6, 8, working="supported") == posterior(unfitted, 0, 6, 8)
