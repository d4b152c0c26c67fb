"""Extractor registry: each rule on real-looking completions, order, candidates, unknown names."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError
from pipeline.verify.extract import EXTRACTORS, Extraction, candidates, extract, get_extractor

DEFAULT = ["boxed", "gsm8k", "answer_is"]


@pytest.mark.parametrize(("completion", "expected"), [
    (" 3 + 5 = 8. The answer is 8.", Extraction("8", "answer_is")),  # the embedded model's few-shot style
    ("The answer is 3.5.", Extraction("3.5", "answer_is")),  # a decimal point is not a sentence end
    ("So the final answer is: 12\nQ: next", Extraction("12", "answer_is")),
    ("the answer is $\\frac{1}{2}$. Done.", Extraction("$\\frac{1}{2}$", "answer_is")),
    ("The answer is \\boxed{7}.", Extraction("7", "boxed")),
    ("so $x = \\boxed{\\frac{1}{2}}$ and finally \\boxed{3}", Extraction("3", "boxed")),  # last box wins
    ("#### 42\nExtra 7", Extraction("42", "gsm8k")),  # pitfall: never the 7 on the next line
    ("48/2 = 24\n#### 1,000", Extraction("1,000", "gsm8k")),
    ("\\boxed{5} ... The answer is 6.", Extraction("5", "boxed")),  # order of the configured list decides
])
def test_extract(completion, expected):
    assert extract(completion, extractors=DEFAULT) == expected


@pytest.mark.parametrize("completion", [
    "I think it's 12 apples",  # no marker: last_number is off by default
    "The answer is \\boxed{12",  # truncated box, and nothing after "the answer is" but the box
    "",
    "The answer is",
])
def test_no_answer(completion):
    assert extract(completion, extractors=DEFAULT) is None


def test_last_number_is_opt_in():
    assert extract("I think it's 12 apples", extractors=[*DEFAULT, "last_number"]) == Extraction("12", "last_number")


def test_choice_letter_is_extracted():  # pitfall "(C)": math-verify's own extraction misses it; ours keeps it
    assert extract("The answer is (C).", extractors=DEFAULT) == Extraction("(C)", "answer_is")


def test_candidates_lists_every_answer():
    text = "The answer is 6. Wait, \\boxed{5}. #### 5\nThe answer is \\boxed{5}."
    assert [(c.answer, c.extractor) for c in candidates(text)] == [
        ("5", "boxed"), ("5", "boxed"), ("5", "gsm8k"), ("6", "answer_is")]


def test_unknown_extractor_suggests():
    with pytest.raises(ConfigError, match=r"unknown extractor 'boxd' \(did you mean boxed\?\)"):
        get_extractor("boxd")
    assert set(DEFAULT) <= set(EXTRACTORS)


def test_is_the_answer_and_non_answers():
    rules = [*DEFAULT, "is_the_answer"]
    assert extract("So, 1708 is the answer.", extractors=rules) == Extraction("1708", "is_the_answer")
    assert extract("Let's check if the answer is correct: \n1 cookie", extractors=rules) is None
    assert extract(" 3 * 2 = 6. The answer is also 6.", extractors=rules) == Extraction("6", "answer_is", ("filler_words",))
