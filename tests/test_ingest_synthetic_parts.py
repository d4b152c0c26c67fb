"""The synthetic generator's parts (train / test / ood): disjoint phrasings and operand halves, distinct items, and
``part: null`` the original generator."""

from __future__ import annotations

import hashlib

import pytest

from pipeline.ingest.synthetic import (
    FORMS,
    LEVELS,
    SyntheticOptions,
    generate,
    operand_half,
    operands_of,
    template_of,
)


def test_no_part_is_the_original_generator():
    """Pinned to the generator before parts existed (its output at commit e19eb30): a change would re-key every
    problem of the main pipeline's default source."""
    items = list(generate(SyntheticOptions(n_per_level=3, seed=0)))
    assert {i.form for i in items} == {0} and len(items) == 3 * len(LEVELS)
    text = "\n".join(i.question + "|" + i.answer + "|" + i.solution for i in items)
    assert hashlib.sha256(text.encode()).hexdigest() == "b3b506fd62e1cd17059a87932c358393176ca1afe043d7372cbd76ffb7796970"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parts_share_no_phrasing_or_numbers(seed):
    parts = {p: list(generate(SyntheticOptions(n_per_level=10, seed=seed + i, part=p)))
             for i, p in enumerate(("train", "test", "ood"))}
    for p, items in parts.items():
        assert len(items) == 10 * len(LEVELS)
        assert len({(i.skill, tuple(sorted(operands_of(i)))) for i in items}) == len(items), p  # distinct in a part
        assert {i.form for i in items} == {("train", "test", "ood").index(p)}
    train_numbers = {(i.skill, tuple(sorted(operands_of(i)))) for i in parts["train"]}
    for p in ("test", "ood"):
        assert not train_numbers & {(i.skill, tuple(sorted(operands_of(i)))) for i in parts[p]}
        assert not {template_of(i) for i in parts["train"]} & {template_of(i) for i in parts[p]}
        assert all(operand_half(i.skill, operands_of(i)) == "test" for i in parts[p])
    assert operand_half("add1", (2, 8)) == operand_half("add1", (8, 2))  # 2 + 8 and 8 + 2: one half


def test_word_problems_keep_their_answers_in_every_phrasing():
    for part in ("train", "test", "ood"):
        for item in generate(SyntheticOptions(n_per_level=5, seed=3, part=part, levels=["L6", "L7", "L8"])):
            assert "{" not in item.question and item.solution.endswith(f"\\boxed{{{item.answer}}}.")
    assert all(len(forms) == 3 for forms in FORMS.values())


def test_a_part_too_small_for_n_per_level_is_an_error():
    with pytest.raises(ValueError, match="lower n_per_level"):
        list(generate(SyntheticOptions(n_per_level=60, seed=0, part="test", levels=["L1"])))
