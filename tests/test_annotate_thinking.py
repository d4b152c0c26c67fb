"""The thinking split the flags read (pipeline/thinking.py): tags, R1-style prompts, truncation."""

from __future__ import annotations

import doctest

import pytest

from pipeline import thinking
from pipeline.thinking import Thinking, final_section, split


@pytest.mark.parametrize(("text", "want"), [
    ("<think>a</think>b", Thinking("a", "b", True)),
    ("a\n</think>\n\nb", Thinking("a\n", "\n\nb", True)),  # R1-distill: the prompt holds the opening tag
    ("<think>a</think>b</think>c", Thinking("a</think>b", "c", True)),  # the last closing tag ends the thinking
    ("<think>a, then truncated", Thinking("a, then truncated", "", False)),
    ("<|begin_of_thought|>a<|end_of_thought|>b", Thinking("a", "b", True)),
    ("plain", Thinking(None, "plain", None)),
])
def test_split(text, want):
    assert split(text) == want
    assert final_section(text) == want.final


def test_module_examples():
    assert doctest.testmod(thinking).failed == 0


def test_answers_in_text_order():
    from pipeline.annotate.detectors.answer_flip import answers_in_order

    text = r"The answer is \boxed{5}. Then 3 + 4 = 7, so the answer is 7. Finally \boxed{\frac{1}{2}} #### 9" + "\nAnswer: 10"
    assert answers_in_order(text) == ["5", "7", r"\frac{1}{2}", "9", "10"]  # stated_answers: boxes first
    assert answers_in_order(r"So the final answer is $\boxed{42}$.") == ["42", r"$\boxed{42}$"]  # one answer, twice
    assert answers_in_order("no answer here") == []
