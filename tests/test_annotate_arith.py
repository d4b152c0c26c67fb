"""The arithmetic reader behind unsupported_answer (pipeline/arith/) and its SQL shortcut."""

from __future__ import annotations

import random
from fractions import Fraction

import duckdb
import pytest

from pipeline.annotate.detectors import DETECTORS
from pipeline.annotate.unsupported import check_working
from pipeline.arith import answer_value, computes, evaluate, solutions, statements


@pytest.mark.parametrize(("text", "want"), [
    (" Ana has 21 - 15 = 3 marbles.", [("21 - 15 = 3", False)]),
    (" 4 bags * 10 eggs = 40 eggs. $40 + $19 = $59. 59 - 20 = 39.", [("4 * 10 = 40", True), ("40 +  19 = 59", True),
                                                                   ("59 - 20 = 39", True)]),
    (" 2 + 3 = 5 + 4 = 9", [("2 + 3 = 5 + 4", False), ("5 + 4 = 9", True)]),
    (" 943 * 13 = 10,229.", [("943 * 13 = 10229", False)]),
    (" 12 x 3 = 36", [("12 * 3 = 36", True)]),
    (" Calculate 58 + 67 and you get 125.", [("58 + 67 = 125", True)]),
    (" 10 / 3 = 3.33", [("10 / 3 = 3.33", True)]),
    (" 10 / 3 = 3.2", [("10 / 3 = 3.2", False)]),
    (r" $\frac{3}{4} \times 8 = 6$", [("((3)/(4)) * 8 = 6", True)]),
    (r" $\sqrt{16} + 2 = 6$", [(r"\sqrt{16} + 2 = 6", True)]),
    (" Ben * 4 = 16.", [("Ben * 4 = 16", None)]),
    (" Total = 40. x = 5", []),
    (" 20% of 50 = 10", [("20% * 50 = 10", True)]),
    (" 3 dozen = 36 eggs. 2 hours = 120 minutes", [("3 = 36", None), ("2 = 120", None)]),  # conversions, not claims
])
def test_statements(text, want):
    got = [(s.text, s.ok) for s in statements(text) if s.lhs != "…"]
    assert got == want


def test_evaluate_is_exact_and_bounded():
    assert evaluate("1/3 + 1/6") == Fraction(1, 2)
    assert evaluate("2^10") == 1024
    assert evaluate("7^7^11") is None  # no giant powers
    assert evaluate("5 / 0") is None and evaluate("Ben") is None and evaluate("") is None
    assert answer_value("$1,200.") == 1200 and answer_value("12 apples") == 12 and answer_value(None) is None
    assert computes(" 5 * 1 = 5.", 5) and not computes(" 5 * 1 = 6.", 6)


@pytest.mark.parametrize("setup", [True, False])
def test_the_sql_shortcut_decides_only_rows_the_python_check_passes(setup):
    """unsupported_answer's SQL predicate leaves out the simple true shape; Python must agree on every such row."""
    rng = random.Random(0)
    rows = []
    for _ in range(400):
        a, b, op = rng.randint(0, 999), rng.randint(0, 999), rng.choice("+-*")
        a, b = (max(a, b), min(a, b)) if op == "-" else (a, b)  # (a negative result is left to Python)
        true = {"+": a + b, "-": a - b, "*": a * b}[op]
        c = true if rng.random() < 0.6 else true + rng.choice([-1, 1, 10])
        d = c if rng.random() < 0.9 else c + 1
        question = rng.choice([f"What is {a} {op} {b}?", f"Tom has {a} pens and {rng.randint(1, 99)} cards. What is it?",
                               "What is it?"])
        rows.append(("correct", str(d), f" {a} {op} {b} = {c}. The answer is {d}.", question))
    con = duckdb.connect()
    con.execute("CREATE TABLE t (status VARCHAR, extracted VARCHAR, completion VARCHAR, question VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    where = DETECTORS["unsupported_answer"]({"setup": setup}).where_sql()
    decided = con.execute(f"SELECT completion, extracted, question, NOT ({where}) FROM t").fetchall()
    assert sum(d for *_, d in decided) > 100  # the shortcut is used
    for completion, extracted, question, in_sql in decided:
        if in_sql:
            assert check_working(completion, extracted, question, setup=setup) is None, (completion, question)


# -- one module for the flags and the reformulators: the same number, evaluator and agreement rule -------------------

def test_number_reads_a_written_number_exactly_or_says_none():
    from pipeline.arith import MAX_DIGITS, number

    assert number("1,200") == 1200 and number("$3.50") == Fraction(7, 2) and number("24.") == 24
    assert number("-5") == -5 and number("3/4") == Fraction(3, 4) and number("0.1") == Fraction(1, 10)
    assert number("twelve") is None and number("1/0") is None and number("") is None
    assert number("9" * (MAX_DIGITS + 1)) is None


def test_a_solution_step_is_read_by_the_flags_evaluator_in_pythons_grammar():
    """step_value is evaluate() on + - * / and brackets; what model text reads more loosely (a percent, a power,
    braces, an integer with a leading zero) is no step, as Python's parser had it for the reformulators."""
    from pipeline.arith import NotArithmetic, chain, step_value

    assert step_value("48/2") == 24 and step_value("$1,200 × 2") == 2400 and step_value("3 x (4 + 1)") == 15
    assert step_value("10/3") == evaluate("10/3") == Fraction(10, 3) and step_value("007.5") == Fraction(15, 2)
    for expr in ("50%*10", "2^3", "2**3", "{2}+1", "0900-0130", "45 * 02", "1/0", "two + 2"):
        assert evaluate(expr.replace("x", "*"), latex=False) is not None or expr in ("1/0", "two + 2")
        with pytest.raises(NotArithmetic):
            step_value(expr)
    steps = chain("She paid 10/3 = <<10/3=3.33>>3.33 each, 3.33*3 = <<3.33*3=9.99>>9.99 in all.")
    assert [(s.expr, s.value) for s in steps] == [("10/3", Fraction(10, 3)), ("3.33*3", Fraction(999, 100))]
    with pytest.raises(NotArithmetic, match="recomputes to"):
        chain("14 + 9 = 24.")


def test_answer_in_question_compares_numbers_exactly():
    """A decimal answer that a true statement of the working computes was copied from nowhere: read as floats,
    1.2 was not the exact 6/5 the statement computes, and the flag fired."""
    row = {"status": "correct", "extracted": "1.2", "question": "A pen costs 1.2 dollars, a pad 0.6. The pen?",
           "completion": " 0.6 * 2 = 1.2. The answer is 1.2."}
    assert DETECTORS["answer_in_question"]().detect(row) is None
    copied = {**row, "completion": " The answer is 1.2."}
    hit = DETECTORS["answer_in_question"]().detect(copied)
    assert hit is not None and hit.evidence == "answer 1.2 is one of the question's numbers [0.6, 1.2]"


def test_the_word_operators_in_one_pass_are_the_five_passes_they_replaced():
    """``_WORD_OPS`` rewrites "3 plus 4 is 7" in one pass; applying each operator's pattern in turn (what it replaced)
    gives the same text on word arithmetic of every shape, case and spacing."""
    import re

    from pipeline.arith import text as arith

    passes = [(re.compile(rf"(?<=[\d)%])[ \t]+(?:{words})[ \t]+(?=[-$\d(])", re.I), sym) for words, sym in arith._WORD_OP_WORDS]

    def five_passes(text: str) -> str:
        for pattern, sym in passes:
            text = pattern.sub(sym, text)
        return text

    words = [w for group, _ in arith._WORD_OP_WORDS for w in group.split("|")] + ["IS", "Plus", "of the", "apples"]
    r = random.Random(0)
    texts = [" ".join(r.choice([str(r.randint(0, 99)), r.choice(words), "(", ")", "%", "-", "$5", "x", "=", ".", ","])
                      for _ in range(r.randint(3, 24))).replace(" ", r.choice([" ", "  ", "\n", " \t"]), r.randint(0, 3))
             for _ in range(20_000)]
    rewritten = [t for t in texts if five_passes(t) != t]
    assert len(rewritten) > 1_000  # the texts do hold word arithmetic (2,251 of them)
    assert [arith._WORD_OPS.sub(lambda m: arith._WORD_SYMS[m.lastindex - 1], t) for t in texts] == [five_passes(t) for t in texts]


# made-up forms of how four reasoning models (R1-distilled, QwQ-32B) format their GSM8K working
# (thaotnguyen/thinking-llms-interp): each was a false unsupported_answer before it was read as arithmetic
FORMATTED = [  # (working, value it computes)
    ("- 20 + 6 = 26", 26),  # a list bullet, not a minus sign
    ("**Number of Girls:** \\(160 - 60 = 100\\)", 100),  # markdown bold around a label
    ("\\[ \\text{Jane's age} = \\text{Quinn's age} - 3 = 30 - 3 = 27 \\]", 27),  # \text{} names
    ("\\[ \\text{Total cost} = 48 \\, \\text{car washes} \\times \\$15/\\text{car wash} = \\$720 \\]", 720),  # units
    ("\\$220 \\, (\\text{Monthly}) \\times 12 \\, (\\text{Months}) = \\$2,640", 2640),
    ("40\\% \\text{ of } \\$220 = 0.40 \\times 220 = 88", 88),
    ("\\left( \\frac{12}{20} \\right) \\times 100\\% = 60\\%", 60),  # a percent as the unit of x 100
    ("13.333 * 3 = 40", 40),  # a third, rounded
    ("\\[ x = 20 - 6 \\]\n\\[ x = 14 \\]", 14),  # a name set to a computation
    # second reading (the 42 false alarms of 47 flags on the same rollouts, docs/flags.md)
    ("\\[ 3R + 5(R + 2) = 42 \\]\n\\[ 8R + 10 = 42 \\]\n\\[ 8R = 32 \\]\n\\[ R = 4 \\]", 4),  # an equation solved
    ("\\[ \\frac{1}{3}(F - 30) = 6 \\]\n\\[ F = 48 \\]", 48),
    ("\\[ 200 = 20x \\]\n2. Divide both sides by 20:\n\\[ x = 10 \\]", 10),  # 20x is no "20 times" the next line's 2
    ("\\[ 33 + x \\geq 42 \\]\n\\[ x \\geq 9 \\]", 9),  # a bound
    ("\\[ 0.3333 \\times 100 \\approx 33.33\\% \\]", 33),  # a rounding
    ("\\( \\frac{32}{96} \\times 100\\% = 33.\\overline{3}\\% \\)", 33),  # a repeating decimal
    ("\\[ \\$2.00 / 8 = \\$0.25 \\]\n\\[ \\$0.25 = 25 \\text{ cents} \\]", 25),  # a conversion
    ("60 miles (total) - 20 miles (first stop) = **40 miles**", 40),  # notes in brackets
    ("15 packs × $5.00/pack = **$75.00**", 75),  # a unit per pack
    ("\\[ \\frac{3}{4} \\text{ gallons} \\times 8 \\text{ pints/gallon} = 6 \\text{ pints} \\]", 6),  # a unit after a fraction
    ("\\(1 + 5 = 6\\)\\textsuperscript{th} place", 6),
]


@pytest.mark.parametrize(("working", "value"), FORMATTED, ids=[w[:24] for w, _ in FORMATTED])
def test_formatted_working_is_read_as_its_arithmetic(working, value):
    assert not [s.text for s in statements(working) if s.ok is False]
    assert computes(working, value)


@pytest.mark.parametrize("working", [
    "45 + 5 = 2S \\implies 50 = 2S",  # a coefficient: algebra
    "x - 10 = 70 - 10 = 60",  # a variable, then a minus
    "90 \\text{ minutes} = \\frac{90}{60} \\text{ hours} = 1.5 \\text{ hours}",  # a conversion
    "1.25 \\text{ hours} = 1 \\text{ hour} + 0.25 \\text{ hours} = 60 \\text{ minutes} + 15 \\text{ minutes}",  # of time
    "\\text{Angela's current age} = \\text{Angela's age in 4 years} - 4 = 42 - 4 = 38",  # a number inside a name
    "4 \\times (\\text{Number of mask refusers}) - 5 = 4 \\times 3 - 5 = 7",  # a name in brackets
    "\\[ 6 \\text{ mph} \\times 2 = 12 \\text{ miles} \\]\n- Distance walking = \\(1.5 \\times 4 = 6\\)",  # two lines
    "\\[ A + 4 = 3 \\times 14 \\]\n\\[ A + 4 = 42 \\]",  # two display blocks
    "\\[ 1.2 \\text{ hours} \\]\n\nOver 5 days, the total is",  # "over" across a paragraph is no division
    "\\[ \\frac{4499}{2250} \\approx 1.98 \\]",  # a rounding that is off is unread, not false
    # MATH-500 working of nine 7B checkpoints and THIP's (docs/flags.md): each was a false statement before
    "\\[ f(5) - 1 = 7 - 1 = 6 \\]",  # a function's value
    "\\sqrt{3(3) - 5} = \\sqrt{9 - 5} = \\sqrt{4} = 2",  # 3(3) is a product (latex2sympy read it as 1)
    "\\frac{\\frac{5}{12}}{2} \\text{ or } \\frac{\\frac{3}{12}}{2} = \\frac{5}{24} \\text{ or } \\frac{1}{8}",  # alternatives
    "\\(6 \\div 4 = 1\\) remainder 2",  # integer division
    "Therefore, the units digit of \\(18^6\\) is 4.",  # a digit, not 18^6
    "Test x = 0:\n\\[9^0 + 19 = 10^0\\]\n\\[1 + 19 = 1\\]\n\\[20 \\neq 1\\]\nSo, x = 0 is not a solution.",  # rejected
    "we get \\( r^2 = 0 \\) or \\( r - 3 = 0 \\)",  # "or r" is no unit
    "So the simplified value of $\\frac{7}{30} @ \\frac{10}{21}$ is $49$.",  # a fraction is a value, named
    "6 = \\frac{1}{2} \\left| \\text{det} \\right|.",  # the side goes on past what is read
    "\\[ 1 \\text{ bap} = \\frac{5}{3} \\text{ yaps} \\]",  # a conversion of made-up units
    "\\[ v = \\frac{1 \\text{ km}}{2.5 \\text{ hours}} = \\frac{1000 \\text{ m}}{2.5 \\times 3600 \\text{ s}} \\]",  # speed
    "\\cos(3\\pi) + i\\sin(3\\pi) = -1",  # the imaginary unit
    "\\sqrt[3]{8^2} = \\sqrt[3]{2^6} = 2^{6/3} = 2^2 = 4",  # a root's index
    "\\text{Area} = \\frac{1}{2} \\times 10 \\times 3 = 15 \\text{ cm}^2",  # a unit's power
    "then $a = \\frac{2009}{1681} = 1.2 \\ldots$, which is not an integer",  # a decimal cut with an ellipsis
    "18 \\times \\frac{4}{9} = 18 \\times 0.4444 \\approx 8",  # a rounded operand on the right
])
def test_algebra_labels_and_conversions_are_no_false_statements(working):
    assert not [s.text for s in statements(working) if s.ok is False]


def test_real_slips_are_still_false():
    for working in ("21 - 15 = 3", "9 + 9 = 10", "1.25 * 4 = 5.04", "2 + 48 + 3150 + 1300 = 3400 \\text{ pounds}",
                    "**Total:** 65 + 94 = 150", "\\[ 50 - 40 = 20 \\text{ minutes} \\]", "40\\% \\times 3 = 120",
                    "0.4 * 30 = 1.2", "3 * 40 = 1200",  # decimal slips (x 100, x 10) are no conversions
                    "\\[ 9999 = 1331 \\cdot 7 + 882 \\]", "- Third row: \\( 2 + 7 + 6 = 17 \\)",  # real slips in MATH work
                    "So, \\( 6432 = 132 \\times 48 + 48 \\).", "there are \\( 2 \\times 2 = 8 \\) favorable arrangements"):
        assert [s.ok for s in statements(working)] == [False], working


def test_an_equation_that_only_names_a_value_computes_nothing():
    q = "Ben has 4 pens. He buys 12 more. How many pens does he have?"
    for working in ("x = 16. The answer is 16.", "16 = x", "Ben * 4 = 16. The answer is 16.", "x^2 = 256, so x = 16"):
        assert check_working(working, "16", q) is not None, working
    assert sorted(solutions("\\[ 2x + 10 = 110 \\]\n\\[ D_b + 16 = D_w - 1 \\]\n\\[ x + y = 5 \\]")) == [Fraction(50)]


def test_no_computation_is_decided_on_a_short_working_only():
    """A short working that never computes its answer is a skipped computation; a long one that reaches it in words,
    code or LaTeX this reader cannot check is undecided, and never a flag (precision first)."""
    q = "How many integers are in the solution set of $|x-2| \\leq 5.6$?"
    assert "no true computation gives 11" in check_working("The answer is 11.", "11", q).evidence
    long = ("The inequality can be rewritten as -5.6 <= x - 2 <= 5.6, so -3.6 <= x <= 7.6. The integers in this "
            "range are -3, -2, -1, 0, 1, 2, 3, 4, 5, 6 and 7. Counting them one by one gives eleven numbers, from the "
            "smallest, -3, to the largest, 7, with every integer between them included and none left out of the "
            "count. Therefore, there are \\boxed{11} integers in the solution set.")
    assert len(long) > 300 and check_working(long, "11", q) is None
    code = "Let's add them with Python.\n```python\nresult = 313.9 + 12.6\nprint(result)\n```\n```output\n326.5\n```"
    assert check_working(code, "326.5", "What is 313.9 + 12.6?", setup=True) is None  # the code computes with both


def test_a_wrong_rounding_or_a_far_value_gives_nothing():
    assert not computes("\\[ 32 / 96 \\times 100 = 33.33\\% \\]", 34)
    assert not computes("\\[ 4499 / 2250 = 1.9996 \\]", 3)


def test_an_answer_of_zero_is_read_without_dividing_by_it():
    # "5 = 0" is no true statement and no conversion of 0 (a real THIP MATH-500 working, 5 = 0 read from "f(5) = 0",
    # raised ZeroDivisionError in the conversion check)
    assert computes("The roots: x = 5 = 0 at the end.", 0) is False
    assert check_working("So 3 = 0 here. The answer is 0.", "0", "What is 2 - 2?") is not None


def test_a_reasoning_models_thinking_is_not_its_working():
    q = "Ana has 21 marbles. She buys 15 more and then gives 33 to a friend. How many does she have?"
    tried = "<think>21 - 15 = 3? No: 21 + 15 = 36, and 36 - 33 = 3.</think>\n21 + 15 - 33 = 3. The answer is 3."
    assert check_working(tried, "3", q) is None
    slip = "<think>21 + 15 = 36, 36 - 33 = 3.</think>\n21 - 15 = 3. The answer is 3."
    assert "21 - 15 = 3 is false" in check_working(slip, "3", q).evidence


def test_the_setup_rule_reads_a_short_working_only():
    q = "Ben buys 4 bags with 10 eggs in each bag. He already had 19 eggs and then gives away 20. How many eggs?"
    assert "never computes with 4, 10" in check_working("19 + 20 = 39. The answer is 39.", "39", q, setup=True).evidence
    worked = "19 + 1 = 20. 20 + 20 = 40. 40 - 1 = 39. The answer is 39."  # three steps: a decomposition, not read
    assert check_working(worked, "39", q, setup=True) is None
