"""The grader's decided policies for math-verify's known pitfalls, each tested both ways."""

from __future__ import annotations

from pipeline.verify.answer_text import bracket_kind, choice_letter, normalize_answer
from pipeline.verify.grader import Grade, grade


def status(gold: str, answer: str) -> str:
    return grade(gold, answer).status


def test_plain_text_sqrt_is_not_its_leading_number():
    # math-verify's plain-expression parser reads "2*sqrt(3)" as 2: a false positive against gold 2
    from math_verify import ExprExtractionConfig, parse, verify

    raw = parse("2*sqrt(3)", extraction_config=[ExprExtractionConfig()], parsing_timeout=None)
    assert verify(parse("$2$"), raw, timeout_seconds=None)  # the pitfall, as math-verify has it
    assert status("2", "2*sqrt(3)") == "incorrect"  # our policy: LaTeX first
    assert status("2\\sqrt{3}", "2*sqrt(3)") == "correct"
    assert status("2\\sqrt{3}", "2\\sqrt{3}") == "correct"


def test_percent_is_a_unit():
    assert status("10", "10\\%") == "correct"
    assert status("10", "10%") == "correct"
    assert status("0.1", "10\\%") == "incorrect"  # not 0.1: GSM8K/MATH golds for percents are the bare number
    assert status("10\\%", "10") == "correct"


def test_choice_letters():
    assert status("\\text{(C)}", "(C)") == "correct"
    assert status("C", "(c)") == "correct"
    assert status("(C)", "C") == "correct"
    assert status("\\text{(C)}", "(D)") == "incorrect"
    assert status("\\text{(C)}", "3") == "incorrect"
    assert choice_letter("\\text{(B)}") == "B" and choice_letter("BC") is None


def test_tuple_is_not_a_set():
    from math_verify import parse, verify

    assert verify(parse("$\\{1,2\\}$"), parse("$(1,2)$"), timeout_seconds=None)  # the pitfall
    assert status("\\{1,2\\}", "(1,2)") == "incorrect"
    assert status("(1,2)", "\\{1,2\\}") == "incorrect"
    assert status("(1,2)", "(1, 2)") == "correct"
    assert status("\\{1,2\\}", "\\{2,1\\}") == "correct"
    assert bracket_kind("\\left(1,2\\right)") == "tuple" and bracket_kind("(x+1)") is None


def test_units_and_currency():
    assert status("12", "12 apples") == "correct"
    assert status("18", "\\$18") == "correct"
    assert status("18", "$18.00") == "correct"
    assert status("1000", "1,000") == "correct"
    assert normalize_answer("  $\\frac{1}{2}$. ") == "\\frac{1}{2}"


def test_equivalent_forms():
    assert status("\\frac{1}{2}", "0.5") == "correct"
    assert status("\\frac{1}{2}", "\\frac{2}{4}") == "correct"
    assert status("8", "9") == "incorrect"
    assert status("-4", "-4") == "correct"


def test_unparseable_answer_is_no_answer():
    assert grade("7", "$$") == Grade("no_answer", "the extracted answer is empty after normalisation")
    assert status("7", "\\\\") == "no_answer"  # nothing math-verify can read


def test_issue_11_classes():
    # markdown emphasis is stripped by extraction; the grader sees the value
    from pipeline.verify.extract import extract

    assert extract("So the final answer is **47**.", extractors=["answer_is"]).answer == "47"
    assert extract("**Final Answer:** $\\frac{1}{2}$", extractors=["boxed", "answer_is"]).answer == "$\\frac{1}{2}$"
    # juxtaposed symbols are math, not unit words
    assert normalize_answer("2k") == "2k" and normalize_answer("2pi") == "2pi" and normalize_answer("3i") == "3i"
    assert normalize_answer("47 cm") == "47" and normalize_answer("5cm") == "5" and normalize_answer("12 apples") == "12"
    assert status("2k", "2k") == "correct" and status("2x", "2x") == "correct" and status("3", "3i") == "incorrect"
    assert status("2", "2pi") == "incorrect"
    # the prose rule does not fire on symbols
    assert status("p - q", "p - q") == "correct"
    assert grade("7", "the number of stickers").status == "no_answer"
    # an equation gold is compared with the answer's equation
    for eq in ("y = -2x", "5x - 7y + 11z + 4 = 0", "x^2 + y^2 = 13"):
        assert status(eq, eq) == "correct", eq
    assert status("x^2 + y^2 = 13", "x^2 + y^2 = 14") == "incorrect"
    assert status("5", "x = 5") == "correct"  # a value gold still takes the last right-hand side


def test_policies_are_recorded_and_documented():
    import pytest

    from pipeline.verify.policies import POLICIES, detail_with, policies_in

    g = grade("10", "10\\%")
    assert g == Grade("correct", "policy: percent_unit") and policies_in(g.detail) == ["percent_unit"]
    assert policies_in(grade("\\{1,2\\}", "(1,2)").detail) == ["set_vs_tuple"]
    assert policies_in(grade("(C)", "C").detail) == ["choice_letter"]
    assert grade("8", "8").detail is None  # no policy, no detail
    assert set(POLICIES) >= {"marked_answer", "percent_unit", "choice_letter", "set_vs_tuple", "prose", "unit_words"}
    with pytest.raises(ValueError, match="undocumented"):
        detail_with(["made_up"])
