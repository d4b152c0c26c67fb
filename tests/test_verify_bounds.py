"""Every bound holds on hostile model text: extraction in the caller's process (linear, last 32 KB), the
in-process fast path, gold checks and grading in the pool (timeout / error / no_answer within the bound).

The CPU limits (cpu_clock.BOUNDED_S) prove "bounded", not speed: before, ``","*40000`` took 20 s in is_the_answer and
``"1,"*500000`` more than 60 s. Every limit is CPU time (this process's, or with the pool's workers, the
process tree's: tests/support/cpu_clock.py), so other work on the machine does not count against it.
"""

from __future__ import annotations

import random
import re

import pytest
from cpu_clock import BOUNDED_S, own_cpu, tree_cpu_s

from pipeline.gold import MAX_GOLD_CHARS, boxed_gold, gsm8k_gold
from pipeline.verify import judge, judge_many
from pipeline.verify.extract import SEARCH_CHARS, candidates, extract, get_extractor
from pipeline.verify.extractors.is_the_answer import IsTheAnswer
from pipeline.verify.gold_check import gold_parses, golds_equivalent
from pipeline.verify.grader import fast_grade

MB = 1_000_000
HOSTILE = {
    "commas": "," * 40000,
    "one-comma": "1," * (MB // 2),
    "open boxes": "\\boxed{" * 100000,
    "nested braces": "\\boxed{" + "{" * (MB // 2) + "}" * (MB // 2 - 1),
    "answer is": "The answer is " * 100000,
    "is the answer": " is the answer" * 70000,
    "answer colon dollars": "answer: $" * 120000,
    "spaces": "x" + " " * MB + "is the answer",
    "digits": "1" * MB,
    "dollars": "$" * MB,
    "backslashes": "\\" * MB,
    "one-dot": "1." * (MB // 2),
    "fbox": "\\fbox " * 150000,
    "the": "the " * 250000,
    "sign dollar": "-$" * (MB // 2),
}
EXTRACTORS = ["boxed", "gsm8k", "answer_is", "is_the_answer", "last_number"]


@pytest.mark.timing
@pytest.mark.parametrize("name", list(HOSTILE))
def test_every_extractor_is_bounded_on_hostile_text(name):
    text = HOSTILE[name]
    for rule in EXTRACTORS:  # each rule on the whole megabyte, not only the searched tail
        with own_cpu() as spent:
            get_extractor(rule)(text)
        assert spent() < BOUNDED_S, rule
    with own_cpu() as spent:
        extract(text, extractors=EXTRACTORS)
        candidates(text)
    assert spent() < BOUNDED_S


def test_only_the_tail_is_searched():
    assert extract("The answer is 7." + " pad" * SEARCH_CHARS, extractors=["answer_is"]) is None
    assert extract(" pad" * SEARCH_CHARS + "The answer is 7.", extractors=["answer_is"]).answer == "7"


# the is_the_answer rule as one regex, as it was: quadratic, but the reference for what the walk back must find
_REFERENCE = re.compile(r"(?i)(?:^|[\s,;:])(-?\$?[\w.,/^{}\\]+?)\$?\s+is\s+the\s+(?:final\s+|correct\s+)?answer\b")


def _reference(text: str) -> str | None:
    from pipeline.verify.extract import clean_answer

    matches = list(_REFERENCE.finditer(text))
    return clean_answer(matches[-1].group(1)) if matches else None


def test_is_the_answer_finds_what_the_old_regex_found():
    rng = random.Random(0)
    atoms = ["is the answer", " is the answer", " is  the final answer", " ", ",", ";", ":", "$", "-", "a", "12", ".",
             "x,y", "\\frac{1}{2}", "(", ")", "\n", "answer", "is", "the", "*", "B", "$5$", "-$3"]
    texts = ["So, 1708 is the answer.", "x,1708 is the answer", "A is the answer,B is the answer", "-$5$ is the answer"]
    texts += ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 12))) for _ in range(20000)]
    for text in texts:
        assert IsTheAnswer()(text) == _reference(text), text


@pytest.mark.parametrize(("gold", "answer", "status"), [
    ("42", "42", "correct"), ("42", "41", "incorrect"), ("-3", "-3", "correct"),
    ("0.5", "\\frac{1}{2}", "correct"), ("\\frac{1}{2}", "0.5", "correct"), ("3", "3.0", "correct"),
    ("3", "6/2", "correct"), ("\\frac{2}{3}", "\\dfrac{4}{6}", "correct"), ("1.25", "1.3", "incorrect"),
    ("42", "42 apples", "correct"), ("10", "10\\%", "correct"), ("8", "\\$8.00", "correct"),
    ("1234567", "1,234,567", "correct"), ("2125", "2,125.0", "correct"), ("75", "2,125", "incorrect"),
])
def test_the_fast_path_decides_plain_numbers(gold, answer, status):
    g = fast_grade(gold, answer)
    assert g is not None and g.status == status
    assert judge(gold, f"The answer is {answer}.").status == status


@pytest.mark.parametrize(("gold", "answer"), [
    ("\\sqrt{2}", "1.414"), ("1/3", "0.333333"), ("0.3333333", "0.3333334"), ("x+1", "1+x"), ("12", "1,2"),
    ("2", "\\sqrt{4}"), ("1" * 40, "1" * 40), ("1/0", "1/0"),
])
def test_the_fast_path_leaves_the_rest_to_math_verify(gold, answer):
    assert fast_grade(gold, answer) is None


def test_the_fast_path_agrees_with_math_verify_on_generated_numbers():
    from math_verify import verify

    from pipeline.gold import parse_gold
    from pipeline.verify.answer_text import parse_answer
    from pipeline.verify.grader import exact_number, numbers_verdict

    rng = random.Random(1)

    def number() -> str:
        n, sign, k = rng.choice([0, 1, 2, 3, 7, 10, 12, 100, 12345]), rng.choice(["", "-"]), rng.random()
        if k < 0.2:
            return f"{sign}{n}"
        if k < 0.3:
            return f"{sign}{rng.randint(1000, 10**8):,}"
        if k < 0.6:
            return f"{sign}{n}.{rng.choice(['5', '25', '333333', '3333333', '0', '125', '142857', '0000001'])}"
        if k < 0.8:
            return f"{sign}{n}/{rng.choice([1, 2, 3, 4, 7, 8])}"
        return f"{sign}\\frac{{{n}}}{{{rng.choice([1, 2, 3, 4, 7, 8])}}}"

    decided = 0
    for _ in range(400):
        gold, answer = number(), number()
        if rng.random() < 0.4 and (v := exact_number(gold)):  # near values: the rounding band
            answer = rng.choice([f"{float(v[0]):.{d}f}" for d in (4, 5, 6, 7, 9)])
        fast = numbers_verdict(gold, answer)
        if fast is None:
            continue
        decided += 1
        assert fast == bool(verify(list(parse_gold(gold)), parse_answer(answer), timeout_seconds=None)), (gold, answer)
    assert decided > 300


HOSTILE_CHECKS = [
    ("1", "The answer is $10^{10^{10}}$.", {"timeout"}),
    ("2", "\\boxed{\\sqrt{4^{10^{10}}}}", {"timeout", "error"}),
    ("1", "\\boxed{\\binom{10^{7}}{5000}}", {"incorrect", "timeout", "error"}),
    ("8", "The answer is " + "9" * MB + ".", {"no_answer"}),  # past the searched tail, and past the answer cap
    ("8", "The answer is " + "9" * 1000 + ".", {"no_answer"}),
    ("1", "," * 40000, {"no_answer"}),
    ("1", "1," * (MB // 2), {"no_answer"}),
    ("1", "\\boxed{" * 100000, {"no_answer"}),
    ("10^{10^{10}}", "The answer is 3.", {"timeout"}),
    ("\\binom{10^{7}}{5000}", "The answer is 3.", {"incorrect", "timeout", "error"}),
]


@pytest.mark.timing
@pytest.mark.slow
def test_hostile_checks_end_in_a_status_within_the_bound():
    timeout = 1.0
    pairs = [(g, c) for g, c, _ in HOSTILE_CHECKS] + [("42", "The answer is 42."), ("2", "$\\sqrt{4}$ is the answer")]
    t = tree_cpu_s()
    got = judge_many(pairs, options={"timeout_s": timeout}, workers=2)
    cpu = tree_cpu_s() - t
    for (gold, completion, allowed), j in zip(HOSTILE_CHECKS, got, strict=False):
        assert j.status in allowed, (gold[:40], completion[:40], j)
    assert [j.status for j in got[-2:]] == ["correct", "correct"]
    # each poisoned check costs at most its CPU bound plus a worker restart (and the pool's first start, a few seconds)
    assert cpu < len(HOSTILE_CHECKS) * (timeout + 2)


@pytest.mark.timing
@pytest.mark.slow
def test_gold_checks_are_bounded_in_the_pool():
    t = tree_cpu_s()
    assert gold_parses("\\frac{1}{2}") and gold_parses("x^2+1") and not gold_parses("\\\\")
    assert not gold_parses("(" * 3000 + "1" + ")" * 3000)  # seconds of parsing: past the bound, does not parse
    assert not gold_parses("1+" * MAX_GOLD_CHARS + "1")  # over the cap: not parsed at all
    assert golds_equivalent("0.5", "\\frac{1}{2}") and not golds_equivalent("10^{10^{10}}", "2")
    assert tree_cpu_s() - t < 40  # two checks past a 5 s CPU bound, the pool's start, the rest milliseconds


@pytest.mark.timing
def test_gold_extraction_is_linear():
    with own_cpu() as spent:
        with pytest.raises(ValueError):
            boxed_gold("\\boxed{" * 100000)
        assert gsm8k_gold("1," * (MB // 2) + "#### 1,000") == "1000"
        assert boxed_gold("{" * MB + "\\boxed{7}") == "7"
    assert spent() < BOUNDED_S


@pytest.mark.parametrize("answer", [
    "5" + " " * 100000 + "x", "$" * 100000 + "x", "5" + " " * 100000 + "which", " " * 100000 + "x%x",
    "1" + " " * 100000 + "=" + " " * 100000, "\\$" * 50000 + " " * 100000,
])
@pytest.mark.timing
def test_answer_normalisation_is_bounded(answer):
    # annotate normalises every candidate answer in its own process; these runs of spaces and dollars were quadratic
    from pipeline.verify.answer_text import is_equation, normalize

    with own_cpu() as spent:
        normalize.__wrapped__(answer)
        normalize.__wrapped__(answer, keep_equation=True)
        is_equation(answer)
    assert spent() < BOUNDED_S
