"""Differential test: the verify stage's grading against raw math-verify on >= 20,000 labelled cases.

The cases (tests/support/verify_corpus.py, seeded) restate or change golds of GSM8K, MATH and the synthetic
set in the surface forms models write. The stage (``judge_many``: extraction, policies, worker pool)
must agree with the labels on >= 99.9 %, on no form less often than raw math-verify, and every
disagreement with raw math-verify must fall under a policy of pipeline/verify/policies.py where
math-verify is the one that is wrong, with docs/verifier.md's policy table giving each count.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest
from verify_corpus import cases, raw_math_verify

from pipeline.verify import judge_many
from pipeline.verify.policies import POLICIES, policy_of

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[1] / "docs" / "verifier.md"
REQUIRED_KINDS = {"int", "decimal", "fraction", "symbolic", "tuple", "interval", "set", "matrix", "equation",
                  "inequality", "text", "choice"}
REQUIRED_FORMS = {"bold", "bold_final", "answer_is_colon", "hashes", "boxed_in_math", "boxed_bare", "money", "units",
                  "degrees", "percent", "thousands", "decimal", "mixed", "slash", "dfrac", "tfrac", "left_right",
                  "plain_text",
                  # the endings of reasoning models, and the suppositions and questions that state no answer
                  "should_be", "would_be", "must_be", "indeed", "final_result_display", "number_words", "ordinal",
                  "right_answer", "unit_expression", "conditional", "question"}


@pytest.fixture(scope="module")
def run():
    cs = cases(seed=0, n=20000)
    raw = raw_math_verify(cs, processes=2)  # both sides on the two cores of CI
    stage = judge_many([(c.gold, c.completion) for c in cs], options={"timeout_s": 5.0}, workers=2)
    # Raw math-verify's own wall-clock timeouts (SIGALRM, 5 s) fire on a loaded box and read as False: the
    # cases where the two sides differ are graded by raw math-verify once more, alone, before they count
    # (a fast suite beside a GRPO run once counted one more marked_answer disagreement than a quiet box).
    differ = [i for i, (r, j) in enumerate(zip(raw, stage, strict=True)) if r != (j.status == "correct")]
    for i, r in zip(differ, raw_math_verify([cs[i] for i in differ]), strict=True):
        raw[i] = r
    return cs, raw, stage


def doc_counts() -> dict[str, int]:
    """The policy table of docs/verifier.md: policy name -> the count in its last column."""
    rows = re.findall(r"^\| `(\w+)` \|.*\| (\d+) \|$", DOC.read_text(), flags=re.M)
    return {name: int(n) for name, n in rows}


def test_the_corpus(run):
    cs, _, _ = run
    assert len(cs) >= 20000
    assert {c.form.split("/")[0] for c in cs} >= REQUIRED_KINDS
    assert {c.form.split("/")[1] for c in cs} >= REQUIRED_FORMS
    labels = collections.Counter(c.expected for c in cs)
    assert labels["correct"] > 8000 and labels["incorrect"] > 6000  # right and wrong values in each form


def test_agreement_with_the_labels_and_never_below_raw(run):
    cs, raw, stage = run
    want = [c.expected == "correct" for c in cs]
    ok_stage = [(j.status == "correct") == w for j, w in zip(stage, want, strict=True)]
    ok_raw = [r == w for r, w in zip(raw, want, strict=True)]
    assert sum(ok_stage) / len(cs) >= 0.999, [(c, j) for c, j, ok in zip(cs, stage, ok_stage, strict=True) if not ok][:5]
    by_form = collections.defaultdict(list)
    for i, c in enumerate(cs):
        by_form[c.form].append(i)
    below = {f: (sum(ok_stage[i] for i in idx), sum(ok_raw[i] for i in idx), len(idx)) for f, idx in by_form.items()
             if sum(ok_stage[i] for i in idx) < sum(ok_raw[i] for i in idx)}
    assert not below, below


def test_every_disagreement_with_raw_is_a_documented_policy_where_math_verify_is_wrong(run):
    cs, raw, stage = run
    counts: collections.Counter[str] = collections.Counter()
    for c, r, j in zip(cs, raw, stage, strict=True):
        if r == (j.status == "correct"):
            continue
        policy = policy_of(j)
        assert policy in POLICIES, (c, j)
        assert (j.status == "correct") == (c.expected == "correct"), ("a policy overrules math-verify where it is right",
                                                                       policy, c, j)
        counts[policy] += 1
    documented = doc_counts()
    assert set(documented) == set(POLICIES), "docs/verifier.md's policy table lists every policy"
    assert {p: documented[p] for p in counts} == dict(counts), "update the counts in docs/verifier.md's policy table"
    assert all(documented[p] == 0 for p in set(POLICIES) - set(counts))


def test_the_fast_path_gives_math_verify_s_verdict_on_the_corpus(run):
    """Two plain numbers are decided in-process (``numbers_verdict``); on the corpus's answers that verdict is the
    one math-verify gives for the same normalised answer and gold."""
    import random

    from math_verify import verify

    from pipeline.config import VerifyConfig
    from pipeline.gold import parse_gold
    from pipeline.verify.answer_text import is_equation, normalize, parse_answer
    from pipeline.verify.extract import extract
    from pipeline.verify.grader import numbers_verdict

    cs, _, _ = run
    extractors = VerifyConfig().extractors
    decided = 0
    for c in random.Random(0).sample(cs, 4000):
        found = extract(c.completion, extractors=extractors)
        if found is None:
            continue
        norm = normalize(found.answer, keep_equation=is_equation(c.gold))[0]
        fast = numbers_verdict(c.gold, norm)
        if fast is None:
            continue
        decided += 1
        assert fast == bool(verify(list(parse_gold(c.gold)), parse_answer(norm), timeout_seconds=None)), (c, norm)
    assert decided > 1000  # integers, decimals and fractions are most of the corpus
