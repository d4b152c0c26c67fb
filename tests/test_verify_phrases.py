"""Answer phrases a reasoning model writes without a box: each ending is read as a reader reads it, names the
policy that read it, and a question, a condition or a plan is no answer (pipeline/verify/extract.py, grader.py)."""

from __future__ import annotations

import pytest

from pipeline.numbers import words_value
from pipeline.verify import judge_many
from pipeline.verify.answer_text import has_words, number_words
from pipeline.verify.extract import Extraction, candidates, extract
from pipeline.verify.policies import policies_in

RULES = ["boxed", "gsm8k", "answer_is", "is_the_answer"]

# (gold, completion, status, extracted, policies named in the detail)
ENDINGS = [
    ("4", "So the answer should be 4.", "correct", "4", ["modal_answer"]),
    ("284", "Adding them, the final answer would be 284", "correct", "284", ["modal_answer"]),
    ("7", "Therefore the answer must be 7.", "correct", "7", ["modal_answer"]),
    ("5", "So the answer should be 4.", "incorrect", "4", ["modal_answer"]),
    ("6", "The answer is indeed 6.", "correct", "6", ["filler_words"]),
    ("8000", "I think the answer is definitely 8000.", "correct", "8000", ["filler_words"]),
    ("9", "The answer is clearly just 9.", "correct", "9", ["filler_words"]),
    ("1250", "I think $1250 is the right answer.", "correct", "$1250", ["right_answer", "currency"]),
    ("1250", "So 1251 is the correct answer.", "incorrect", "1251", ["right_answer"]),
    ("\\frac{1}{8}", "Therefore, the final result is: \\[ \\frac{1}{8} \\]", "correct", "\\frac{1}{8}",
     ["final_result", "display_block"]),
    ("\\frac{1}{8}", "Therefore, the final result is:\n\\[\n\\frac{1}{8}\n\\]\nDone.", "correct", "\\frac{1}{8}",
     ["final_result", "display_block"]),
    ("\\frac{1}{8}", "So the answer is:\n$$\n\\frac{1}{7}\n$$", "incorrect", "\\frac{1}{7}", ["display_block"]),
    ("3", "The answer is three boxes.", "correct", "three boxes", ["number_words"]),
    ("325", "The answer is three hundred and twenty-five.", "correct", "three hundred and twenty-five",
     ["number_words"]),
    ("4", "The answer is three boxes.", "incorrect", "three boxes", ["number_words"]),
    # a count, then a clause about what it counts: read as digits before words are
    ("4", "So the answer is four boxes hold neither pens nor pencils.", "correct",
     "four boxes hold neither pens nor pencils", ["number_words"]),
    ("5", "So the answer is four boxes hold neither pens nor pencils.", "incorrect",
     "four boxes hold neither pens nor pencils", ["number_words"]),
    ("12\\pi", "The answer is 12π inches per second.", "correct", "12π inches per second",
     ["unicode_math", "unit_words"]),
    ("12\\pi", "The answer is $12\\pi$ inches per second.", "correct", "$12\\pi$ inches per second", ["unit_words"]),
    ("8", "So the answer should be 8 meals.", "correct", "8 meals", ["modal_answer", "unit_words"]),
    ("12", "The answer is 12th grade.", "correct", "12th grade", ["unit_words", "ordinal"]),
    ("3", "The answer is 2nd place.", "incorrect", "2nd place", ["unit_words", "ordinal"]),
    ("3", "The answer is 3rd.", "correct", "3rd", ["ordinal"]),
    # the endings real long chains of thought wrote (issue forms, made up)
    ("9", "Counting again, the set has 9 elements. I think that's the answer.", "correct", "9", ["back_reference"]),
    ("9", "We had 12 pairs. So the set has 9 elements. That is the answer.", "correct", "9", ["back_reference"]),
    ("11", "The answer is \\boxed{11^{\\text{th}}\\text{ grade}}.", "correct", "11^{\\text{th}}\\text{ grade}",
     ["ordinal"]),
    ("\\text{(B)}", "The answer is (B) Circle.", "correct", "(B) Circle", ["choice_letter"]),
    ("\\text{(B)}", "The answer is (C) Square.", "incorrect", "(C) Square", ["choice_letter"]),
    # a multiple-choice ending in real text (a 14B base model on MATH-500: "Therefore, the correct option is (E)
    # Hyperbola."), and the issue's form of it
    ("\\text{(E)}", "Therefore, the correct option is (E) Hyperbola.", "correct", "(E) Hyperbola", ["choice_letter"]),
    ("\\text{(B)}", "Checking each, the only correct option is (B) Circle.", "correct", "(B) Circle", ["choice_letter"]),
    ("\\text{(B)}", "So the right choice is C.", "incorrect", "C", ["choice_letter"]),
    ("\\text{(B)}", "Correct option: (B)", "correct", "(B)", ["choice_letter"]),
    ("\\text{7:15 a.m.}", "The answer is \\boxed{7:15 \\text{ a.m.}}", "correct", "7:15 \\text{ a.m.}", ["clock_time"]),
    ("\\text{7:15 p.m.}", "The answer is \\boxed{19:15}.", "correct", "19:15", ["clock_time"]),
    ("\\text{7:15 a.m.}", "The answer is \\boxed{7:15 \\text{ p.m.}}.", "incorrect", "7:15 \\text{ p.m.}", ["clock_time"]),
    ("\\text{7:15 a.m.}", "The answer is \\boxed{7:15}.", "incorrect", "7:15", ["clock_time"]),  # the half left open
]


@pytest.mark.parametrize(("gold", "completion", "status", "extracted", "policies"), ENDINGS,
                         ids=[e[1][:40] for e in ENDINGS])
def test_each_ending_is_read_and_names_its_policy(gold, completion, status, extracted, policies):
    [j] = judge_many([(gold, completion)], RULES)
    assert (j.status, j.extracted) == (status, extracted), j
    assert policies_in(j.detail) == policies, j


@pytest.mark.parametrize("completion", [
    "The first option is (B) Circle.",  # names an option, not the answer
    "The correct option is not (A). Let me check (B) next",
    "So the correct option is (B).\n\nWait, let me double-check (B). Hmm, maybe (C) fits the equation better",
    "If the correct option is (B), the curve would be closed",
])
def test_a_choice_phrase_that_states_no_answer_is_no_answer(completion):
    [j] = judge_many([("\\text{(B)}", completion)], RULES)
    assert (j.status, j.extracted) == ("no_answer", None), j


def test_a_back_reference_reads_only_the_sentence_before():
    # the sentence before states no value: the 12 further back is never taken
    [j] = judge_many([("12", "The total is 12. Hmm. That is the answer.")], RULES)
    assert (j.status, j.extracted) == ("no_answer", None), j


# An answer the model then doubts and never reaffirms is a guess: no_answer, and no earlier phrase answers instead.
DOUBTED = [
    ("24", "So the correct answer should be 24. Wait, but let's verify the count again: the first row has 6 and"),
    ("24", "The answer is 24. Hmm, I'm not sure the second row counts."),
    ("12", "The answer is 10. Then the answer is 12. Wait, that can't be right: the carry was 2"),
    ("9", "So the answer is 9. But let me double-check the corners, which I may have counted twice"),
    ("7", "Thus the answer must be 7. Actually, no: the last term is negative"),
]
# ... and one it doubts and then takes back up, or an explicit final answer, still answers.
REAFFIRMED = [
    ("24", "So the answer is 24. Wait, let me verify: 3 * 8 = 24. Yes, 24 is correct."),
    ("24", "The answer is 24. Let me double-check: 4 * 6 = 24, so 24 holds."),
    ("12", "Final answer: 12. Hmm, the carry looked odd, but the sum stands."),  # "final answer" is explicit
    ("8", "The answer is 8. The next question is about apples."),  # no doubt at all
    ("5", "The answer is \\boxed{5}. Wait, I should also say why."),  # a box is an explicit marker
]


@pytest.mark.parametrize(("gold", "completion"), DOUBTED, ids=[d[1][:40] for d in DOUBTED])
def test_a_doubted_answer_is_no_answer(gold, completion):
    [j] = judge_many([(gold, completion)], RULES)
    assert (j.status, j.extracted) == ("no_answer", None), j
    assert policies_in(j.detail) == ["doubted_answer"], j
    assert gold in {c.answer for c in candidates(completion)} or gold == "12"  # still seen by multiple_answers


@pytest.mark.parametrize(("gold", "completion"), REAFFIRMED, ids=[d[1][:40] for d in REAFFIRMED])
def test_a_reaffirmed_or_final_answer_still_answers(gold, completion):
    [j] = judge_many([(gold, completion)], RULES)
    assert (j.status, j.extracted) == ("correct", gold), j


NOT_ANSWERS = [
    "If the answer is 4, then the total would be 8.",  # a condition
    "Let me check whether the answer is 4 by substituting.",
    "Suppose the answer is 4: the total is 8.",
    "So the answer is 4?",  # a question
    "The answer would be 4 if we counted the first day twice.",  # a value under a condition
    "The answer should be an integer, so let me recompute.",  # a property, not a value
    "The answer must be in dollars.",  # a plan
    "So 4 is the answer?",
    "If 4 is the answer, then the total is 8.",
    # the opening of a worked solution after an echoed "Question: ... Answer:" label (real 7B tool-use dumps); the
    # sentence's last right-hand side (4) is no answer
    "Question: Solve $x^2 - 12 = 4$ for $x > 0$.\nAnswer: We start by solving the equation $x^2 - 12 = 4$. "
    "We will use Python to",
    "Answer: Let's denote the width by $w$, so that $w + 4 = 2w - 4 = 4$. Then",
    "The answer is: to find $x$, we set $x - 4 = 4$ and",
]


@pytest.mark.parametrize("completion", NOT_ANSWERS)
def test_a_question_a_condition_or_a_plan_is_no_answer(completion):
    [j] = judge_many([("4", completion)], RULES)
    assert (j.status, j.extracted) == ("no_answer", None), j
    assert policies_in(j.detail) == ["hedged_phrase"], j


def test_an_earlier_phrase_counts_when_the_last_is_a_supposition():
    text = "The answer is 12. To double-check: if the answer is 13, then the sum would be odd, and it is not."
    assert extract(text, extractors=RULES) == Extraction("12", "answer_is", ("hedged_phrase",))
    # a condition then a statement in the main clause: the statement counts
    assert extract("If we add them all, the answer is 12.", extractors=RULES) == Extraction("12", "answer_is")
    assert extract("Adding them, then the answer is 12.", extractors=RULES) == Extraction("12", "answer_is")


def test_a_bare_result_is_working_not_an_answer():
    assert extract("The result is 12, which we double.", extractors=RULES) is None
    assert extract("Final result: 24", extractors=RULES) == Extraction("24", "answer_is", ("final_result",))


def test_an_unclosed_display_block_is_no_answer():
    assert extract("The final answer is:\n\\[\n\\frac{1}{", extractors=RULES) is None


def test_candidates_skip_suppositions():
    text = "If the answer is 4, then no. The answer is 5."
    assert [c.answer for c in candidates(text)] == ["5"]


def test_words_and_ordinals_only_against_a_number_gold():
    [j] = judge_many([("\\text{three}", "The answer is three.")], RULES)
    assert "number_words" not in policies_in(j.detail)
    [j] = judge_many([("x", "The answer is 2nd.")], RULES)
    assert j.status == "incorrect" and "ordinal" not in policies_in(j.detail)


@pytest.mark.parametrize(("words", "value"), [
    ("zero", 0), ("seven", 7), ("nineteen", 19), ("twenty five", 25), ("ninety nine", 99), ("one hundred", 100),
    ("three hundred and twenty five", 325), ("two thousand", 2000), ("one thousand and one", 1001),
    ("twelve thousand three hundred forty five", 12345), ("three million two hundred thousand", 3_200_000),
    ("twenty twenty", None), ("hundred", None), ("and five", None), ("five thousand thousand", None),
    ("fifteen hundred", None), ("twenty ten", None), ("three four", None),
])
def test_words_value(words, value):
    assert words_value(words.split()) == value


@pytest.mark.parametrize(("answer", "number"), [
    ("three boxes", "3"), ("Twenty-one", "21"), ("one hundred and five dollars", "105"), ("three times x", None),
    ("one of them", None), ("three more than x", None), ("four 4", None), ("apples", None),
    ("nine students did not go on the trip", "9"), ("four more than the pens in the box", None),
    ("three of the boxes are empty now", None), ("four boxes hold 5 pens each and more", None),
    ("two boxes are twice as heavy as the rest", None),
])
def test_number_words(answer, number):
    assert number_words(answer) == number


def test_unit_words_after_an_expression_only_when_the_gold_has_none():
    assert not has_words("12\\pi") and not has_words("\\frac{1}{8}")
    assert has_words("5 \\text{ cm}") and has_words("\\text{Monday}")
    [j] = judge_many([("2\\sqrt{3}", "The answer is 2\\sqrt{3} units.")], RULES)
    assert j.status == "correct" and "unit_words" in policies_in(j.detail)
    [j] = judge_many([("6\\pi", "The answer is 3\\pi times the radius.")], RULES)  # an operation, not a unit
    assert j.status != "correct"


@pytest.mark.parametrize(("completion", "value"), [
    ("Therefore, the total comes to 18 dollars.", "18"),
    ("She makes 9 * 2 = $18 every day at the farmer's market.", "$18"),
    ("So altogether that makes $\\frac{1}{8}$.", "$\\frac{1}{8}$"),
    ("If thirty fairies flew away, there were 75 - 30 = 45 fairies that remained.", "45"),  # a statement after a comma
    ("Together, Pierson and Nikita scored 428 points.", "428"),
    ("If the answer is 5, then the total would be 10.", None),  # a supposition about the answer
    ("Next, I will multiply 5 by 2 and add the 10 remaining items.", None),  # a plan
    ("So is the answer 5? I am not sure.", None),  # the last sentence states nothing
    ("Could it be 5?", None),
    ("The total is 5 more than the 12 apples.", None),  # a relation, not the value
    ("So she has 3 bags of 12 apples.", None),
    ("He ran 3 miles", None),  # neither concludes nor states
    ("I hope this helps!", None),
])
def test_prose_final(completion, value):
    from pipeline.verify.extractors.prose_final import ProseFinal

    assert ProseFinal()(completion) == value


def test_prose_final_is_off_by_default():
    from pipeline.config import VerifyConfig

    assert "prose_final" not in VerifyConfig().extractors
    assert extract("Therefore, the total comes to 18 dollars.", extractors=RULES) is None
    assert extract("Therefore, the total comes to 18 dollars.", extractors=[*RULES, "prose_final"]) == Extraction(
        "18", "prose_final")


CUT = [  # (completion, cut at the token limit, status): a cut completion answers only from a final marker
    ("the answer is 24. Next, we compute 3 + 5 = 8 and then the", True, "no_answer"),
    ("the answer is 24. Next, we compute 3 + 5 = 8 and then the", False, "correct"),
    ("So 24 is the answer. Let me check 3 +", True, "no_answer"),
    ("Final answer: 24. Let me double check the", True, "correct"),
    ("So 24 is the final answer. And then", True, "correct"),
    ("so \\boxed{24}. Next we look at", True, "correct"),
    ("\\boxed{24} is the final answer. \\boxed{24} is the final answer. \\boxed{", True, "correct"),
    ("#### 24\nQ: next", True, "correct"),
]


@pytest.mark.parametrize(("completion", "cut", "status"), CUT)
def test_a_cut_completion_answers_only_from_a_final_marker(completion, cut, status):
    from pipeline.config import VerifyConfig
    from pipeline.verify.judge import judge_batch

    (j,) = judge_batch([("24", completion)], config=VerifyConfig(), cut=[cut]).judgements
    assert j.status == status, j
    if status == "no_answer":
        assert policies_in(j.detail) == ["cut_unmarked"] and j.extracted == "24"  # what it read, kept to show


def test_the_stage_reads_the_finish_reason():
    import pyarrow as pa

    from pipeline.config import VerifyConfig
    from pipeline.verify.core import verify

    text = "the answer is 24. Next, we compute 3 + 5 = 8 and then the"
    rollouts = pa.table({"problem_id": ["p1", "p1"], "policy_id": ["a", "a"], "sample_idx": [0, 1],
                         "completion": [text, text], "finish_reason": ["length", "stop"]})
    problems = pa.table({"problem_id": ["p1"], "answer": ["24"]})
    statuses = verify(rollouts, problems, config=VerifyConfig()).verdicts.column("status").to_pylist()
    assert statuses == ["no_answer", "correct"]
    # without the column (a hand-built table), no completion counts as cut
    assert verify(rollouts.drop(["finish_reason"]), problems, config=VerifyConfig()).verdicts.column(
        "status").to_pylist() == ["correct", "correct"]


def test_a_box_loop_cut_at_the_limit_answers_with_its_repeated_box():
    from pipeline.verify.extract import SEARCH_CHARS, extract

    loop = "The area is \\boxed{\\frac{20000}{\\pi}} square meters. " * 40 + "\\boxed{\\frac{"
    assert extract(loop, extractors=RULES) == Extraction("\\frac{20000}{\\pi}", "boxed", ("repeated_box",))
    empties = "so " + "\\boxed{1000} \\boxed{} " * 30 + "\\boxed"
    assert extract(empties, extractors=RULES).answer == "1000"
    # an unclosed last box after one different closed box: no loop, no answer from the boxes
    assert extract("\\boxed{5}. Wait, recompute: \\boxed{6}. Hmm \\boxed{", extractors=["boxed"]) is None
    # a box before a tail of repeated tags longer than the search window
    tail = "Thus the answer is \\(\\boxed{2}\\). <\\/think> " + "<\\/think> " * (SEARCH_CHARS // 9)
    assert extract(tail, extractors=RULES) == Extraction("2", "boxed", ("box_before_tail",))


@pytest.mark.parametrize(("gold", "answer", "status", "policy"), [
    ("4e33", "4 \\times 10^{33} \\, \\text{erg/s}", "correct", "e_notation"),
    ("1e-5", "0.00001", "correct", "e_notation"),
    ("0.00001", "1e-5", "correct", "e_notation"),
    ("7.353e14", "7.36 \\times 10^{14}", "incorrect", "e_notation"),
    ("\\frac{1}{3} E_{1}+\\frac{2}{3} E_{2}", "\\frac{1}{3} E_1 + \\frac{2}{3} E_2", "correct", "same_text"),
    ("x_{0} \\cos (\\omega t)+$ $\\dot{x}_{0} \\sin (\\omega t) / \\omega",
     "x_0 \\cos(\\omega t) + \\frac{\\dot{x}_0}{\\omega} \\sin(\\omega t)", "correct", "gold_seam"),
    ("E_{1},E_{2}", "E_1 \\text{ and } E_2", "correct", "and_list"),
    ("3,4,5", "3, 4 and 5", "correct", "and_list"),
])
def test_real_minerva_and_math500_forms(gold, answer, status, policy):
    from pipeline.verify.grader import grade

    g = grade(gold, answer)
    assert g.status == status and policy in policies_in(g.detail), g


def test_and_lists_only_against_a_list_of_as_many():
    from pipeline.verify.grader import and_list

    assert and_list("3,4,5", "3 and 4") is None and and_list("12", "3 and 4") is None
    assert and_list("(1,2),(3,4)", "(1,2) and (3,4)") == "(1,2), (3,4)"


SUBJECT_VALUES = [
    # (gold, completion, extracted); made-up forms of a real ending (rl-sft 7B, MATH-500: "**Final answer**: The
    # correct value of $k$ is $2$", graded incorrect before)
    ("2", "6. **Final answer**: The correct value of $k$ is $2$. This can be verified by substituting.",
     "The correct value of $k$ is $2$"),
    ("12", "Final answer: The number of ways is 12.", "The number of ways is 12"),
    ("\\frac{1}{2}", "The answer is: the probability is $\\frac{1}{2}$.", "the probability is $\\frac{1}{2}$"),
]


@pytest.mark.parametrize(("gold", "completion", "extracted"), SUBJECT_VALUES, ids=[c[1][:30] for c in SUBJECT_VALUES])
def test_a_subject_then_its_value_is_graded_by_the_value(gold, completion, extracted):
    [j] = judge_many([(gold, completion)], RULES)
    assert (j.status, j.extracted) == ("correct", extracted), j
    assert "subject_value" in policies_in(j.detail), j


@pytest.mark.parametrize("completion", [
    "Final answer: the number of ways is not 12.",  # a qualified value states no value
    "Final answer: the number of ways is less than 12.",
    "Final answer: the number of ways is 12 if we count the first day twice.",  # under a condition
    "Final answer: the number of ways is 13, which is 12 more than 1.",  # "which is": last_rhs's, and 12 is not it
])
def test_a_qualified_subject_value_is_not_paid(completion):
    [j] = judge_many([("12", completion)], RULES)
    assert j.status != "correct", j


STATED_VALUES = [
    # (gold, completion, extracted); made-up forms of real endings (QwQ-32B and Qwen2.5-32B on GSM8K,
    # thinking-llms-interp: "**Answer:** Jenny eats **9 cookies**.", graded incorrect before)
    ("9", "</think>\n\n36 - 27 = **9 cookies**\n\n**Answer:** Jenny eats **9 cookies**.", "Jenny eats 9 cookies"),
    ("4", "Answer: It will take the child 4 days to save enough money.",
     "It will take the child 4 days to save enough money"),
    ("27000", "**Answer:** Jean paid **$27,000**.", "Jean paid $27,000"),
    ("360", "**Answer:** John paid \\$360 in total.", "John paid \\$360 in total"),
    ("3", "The answer is Peter can go to the movies 3 times this week.", "Peter can go to the movies 3 times this week"),
    ("2", "Answer: Each child will get 2 chocolate bars.", "Each child will get 2 chocolate bars"),
]


@pytest.mark.parametrize(("gold", "completion", "extracted"), STATED_VALUES, ids=[c[1][-30:] for c in STATED_VALUES])
def test_a_sentence_that_states_one_number_is_graded_by_it(gold, completion, extracted):
    [j] = judge_many([(gold, completion)], RULES, thinking="auto")
    assert (j.status, j.extracted) == ("correct", extracted), j
    assert "stated_value" in policies_in(j.detail), j


@pytest.mark.parametrize("completion", [
    "Answer: The zookeeper needs to order 3 crates to last for 2 months.",  # two numbers: which one is unsaid
    "Answer: Harry slept 3 more hours than James.",  # a comparison, not the value itself
    "Answer: She needs at least 3 boxes.",  # a bound
    "Answer: It takes about 3 hours.",  # an estimate
    "Answer: Peter cannot go 3 times this week.",  # a negation
    "Answer: Maybe Peter goes 3 times.",  # a hedge
    "Answer: If she saves more, it takes 3 days.",  # a condition
    "Answer: Step 3: divide the total by the price.",  # the opening of working
    "Answer: Peter has 3 times as many apples.",  # a multiplier
])
def test_a_sentence_with_a_qualified_or_second_number_is_not_paid(completion):
    [j] = judge_many([("3", completion)], RULES)
    assert j.status != "correct", j
    assert "stated_value" not in policies_in(j.detail or ""), j


def test_a_stated_value_needs_a_gold_without_words():
    [j] = judge_many([("\\text{Evelyn}", "Answer: Evelyn ran 3 laps.")], RULES)  # a word gold: the sentence whole
    assert "stated_value" not in policies_in(j.detail or "") and j.status != "correct", j
