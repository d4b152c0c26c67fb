"""The verifier's decided policies: where passband's verdict may differ from raw math-verify's, and why.

Raw math-verify means ``verify(parse(f"${gold}$"), parse(completion))`` with its defaults. Each
verdict's ``detail`` names the policies that shaped it (``policy: percent_unit``), so every
disagreement with raw math-verify can be traced to one row of this table; the differential test
(tests/test_verify_differential.py) checks that it can, and that the stage matches the label
there. docs/verifier.md shows the table with the number of generated cases each policy decides
(``benchmarks/verify_agreement.py``).
"""

from __future__ import annotations

from typing import Protocol

# name -> (what the rule does, why math-verify's own reading is wrong there)
POLICIES: dict[str, tuple[str, str]] = {
    "marked_answer": (
        "the answer is the one the completion marks as final (last \\boxed{}, the #### line, "
        "'the answer is', 'final answer:', '... is the answer'), markdown emphasis removed, read as LaTeX "
        "first and as a plain expression only as a fallback",
        "raw math-verify takes the last box or else the last number or formula anywhere: a marked answer "
        "followed by a stray number is judged on that number, and its plain parser reads `2*sqrt(3)` as 2"),
    "percent_unit": (
        "a trailing percent sign is a unit: `10\\%` equals 10",
        "math-verify reads `10\\%` as 0.1, but GSM8K and MATH golds of 'what percent' questions are the bare number"),
    "currency": (
        "a leading or trailing dollar sign is a currency unit: `\\$18.00` equals 18",
        "an escaped dollar can end math-verify's LaTeX region early"),
    "unit_words": (
        "a number followed by space-separated words (`12 apples`, `47 cm`) or a glued unit (`5cm`) is the number; "
        "against a gold with no words, an expression followed by up to four unit words (`12\\pi inches per "
        "second`) is the expression (no word of an operation or a comparison: `3 times the radius` stays)",
        "math-verify reads `12 apples` as a product of symbols (12*a*p*p*l*e*s); juxtaposed symbols "
        "(`2x`, `2k`, `3i`, `2\\pi`) are math and stay"),
    "choice_letter": (
        "a lone choice letter (`C`, `(C)`, `\\text{(C)}`), or one in parentheses before its option's words (`(B) "
        "Circle`), is compared as a letter, only with a choice-letter gold",
        "math-verify reads `(C)` as the symbol c, equal to any expression that simplifies to c, and "
        "compares a letter with a number gold"),
    "set_vs_tuple": (
        "an answer whose outer brackets are a tuple or interval is incorrect against a set gold, and the other way round",
        "math-verify calls `(1,2)` equal to `\\{1,2\\}`"),
    "prose": (
        "an extracted 'answer' of three or more plain words (two of them 3+ letters) with no digit or math is `no_answer`",
        "math-verify reads prose as a product of single-letter symbols"),
    "last_rhs": (
        "an answer that is an equation (`4 + 2 + 10 = 24`, `x = 5`) is graded by its last right-hand side, "
        "unless the gold is an equation too; '..., which is 12' by what follows 'which is'",
        "math-verify compares the whole equation with a value gold"),
    "subject_value": (
        "an answer that names its subject and then its value (`The number of ways is 12`, `the correct value of $k$ "
        "is $2$`: 'the', up to 12 words, 'is' or 'equals') is graded by the value, unless the value opens with a "
        "word that qualifies it (`not 12`, `less than 12`, `an integer`) or holds another clause",
        "math-verify reads the whole sentence as a product of symbols and compares it with the gold"),
    "stated_value": (
        "against a gold with no words, an answer sentence of plain words that states one number after its subject "
        "(`Jenny eats 9 cookies`, `It will take the child 4 days to save enough money`, `Jean paid $27,000`) is "
        "graded by that number; not when it holds a second number or any math, a negation, a hedge or a condition, "
        "or a word that qualifies the number or computes with it (`3 more hours than James`, `at least 3`, `about 3`)",
        "math-verify reads the whole sentence as a product of symbols and compares it with the gold"),
    "modal_answer": (
        "'the answer should be', 'would be', 'must be' mark a final answer as 'the answer is' does",
        "math-verify takes the last number or formula, which is the marked answer only when nothing follows it"),
    "filler_words": (
        "up to three filler words before the value are dropped (indeed, definitely, clearly, simply, exactly, just, "
        "also, so, ...): 'the answer is indeed 6' is 6",
        "none: math-verify never sees the words; before, passband graded `indeed 6` as the answer"),
    "right_answer": (
        "'X is the right answer' / 'X is the correct answer' marks X as 'X is the answer' does",
        "math-verify takes the last number or formula anywhere"),
    "final_result": (
        "'the final result is' (never a bare 'the result is', which is working) marks a final answer",
        "math-verify takes the last number or formula anywhere"),
    "display_block": (
        "an answer phrase followed by a display block (`\\[ ... \\]`, `$$ ... $$`, also on the next lines) is "
        "answered by the block's content; a block that never closes is no answer",
        "math-verify reads a display block, but the last one anywhere, not the one the phrase marks"),
    "hedged_phrase": (
        "an answer phrase in a question ('so the answer is 4?'), a condition ('if the answer is 4, then ...', "
        "'20 if we count twice'), a plan ('the answer should be an integer') or the opening of a worked solution "
        "('Answer: We start by solving ...', 'Answer: Let's denote ...') states no answer; an earlier phrase "
        "that does counts, else the verdict is no_answer",
        "math-verify takes the last number, which there is a supposition"),
    "doubted_answer": (
        "an answer phrase (not 'final answer') that the model then doubts or retracts ('wait', 'let me verify', "
        "'I'm not sure', 'that can't be right', 'hmm') and never reaffirms (no later sentence names the value and "
        "says it holds) states no answer, and no earlier phrase counts: the verdict is no_answer",
        "math-verify takes the last number: a reward that pays a doubted guess teaches guessing"),
    "repeated_box": (
        "a last \\boxed{ that never closes (the token limit cut it) is no answer, unless the two closed boxes before "
        "it state the same answer: a completion looping on its final box until it was cut answers with it",
        "math-verify reads no box there and falls back to the last number, a fragment of the loop"),
    "box_before_tail": (
        "when nothing in the last 32,768 characters answers and the completion is longer, its last closed box "
        "anywhere answers: a model that boxed its answer, then repeated tags or phrases until the token limit",
        "math-verify reads the whole text and takes its last box too; passband searches a bounded tail first"),
    "e_notation": (
        "a number in e-notation (`4e33`, `1e-5`), in the gold or the answer, is that number: compared exactly with "
        "the other side's value (`4 \\times 10^{33}`, `0.00001`; a LaTeX unit such as `\\, \\text{erg/s}` after it "
        "dropped)",
        "math-verify reads `4e33` as 4 * e * 33 and `1e-5` as e - 5 (Euler's number)"),
    "same_text": (
        "an answer written as the gold is, up to spacing and braces around a one-character sub- or superscript "
        "(`E_1` and `E_{1}`), is correct",
        "math-verify cannot parse some such expressions (`\\frac{1}{3} E_{1}+\\frac{2}{3} E_{2}`) and then "
        "compares the raw strings"),
    "gold_seam": (
        "a gold with a stray `$ $` inside (`x_{0} \\cos (\\omega t)+$ $\\dot{x}_{0} ...`, a formula its source split "
        "in two) is read as the one formula it is",
        "math-verify reads the two halves as two math regions and compares the answer with one of them"),
    "and_list": (
        "an answer listing its items with 'and' (`E_1 \\text{ and } E_2`, `3, 4 and 5`) against a gold that is a comma "
        "list of as many items is read as that comma list",
        "math-verify reads 'and' as symbols (a*n*d) inside one expression"),
    "gold_rhs": (
        "a gold equation whose left side math-verify cannot read (`m_{\\max}=n^{2}-n-1`) is graded on its right-hand "
        "side, and so is the answer (`n^2 - n - 1` and `m_{\\max} = n^2-n-1` are both correct)",
        "math-verify returns no expression for such a gold, and every answer would be an error"),
    "cut_unmarked": (
        "a completion cut at the token limit (finish_reason `length`) answers only from an explicit final marker: "
        "a \\boxed{}, a `####` line or a 'final answer' phrase; an answer phrase or a number stated along the way "
        "is no_answer",
        "math-verify takes the last number of whatever text there is: a run cut inside a loop of checking is paid "
        "for a value it had not settled on"),
    "number_words": (
        "against a number gold, number words (one ... nineteen, twenty ... ninety, hundred, thousand, million) "
        "with up to four unit words after them are the number: 'three boxes' is 3; so are number words before a "
        "clause of plain words about the count, as digits before words are (`four boxes hold neither pens nor "
        "pencils` is 4; not when a word computes with it: `four more than ...`)",
        "math-verify reads words as a product of symbols"),
    "ordinal": (
        "against a number gold, an ordinal (`12th`, `3rd grade`, `2^{nd}`) is its number",
        "math-verify reads `12th` as 12*t*h"),
    "clock_time": (
        "a clock time is compared as a time: `7:15 \\text{ a.m.}` equals `\\text{7:15 a.m.}`, `7:15 p.m.` equals `19:15`; "
        "against a clock-time gold any other answer is incorrect",
        "math-verify reads `7:15` as a ratio or fails on the text around it"),
    "back_reference": (
        "'that's the answer' / 'this is the answer' takes the value the sentence before states (its last number), "
        "never a number further back",
        "math-verify takes the last number anywhere"),
    "unicode_math": (
        "unicode `π`, `∞` and the minus sign `−` are read as `\\pi`, `\\infty` and `-`",
        "math-verify's LaTeX parser does not read them: `12π` is not 12*pi there"),
}


class _HasDetail(Protocol):
    detail: str | None
    extractor: str | None


PREFIX = "policy: "


def detail_with(policies: list[str] | tuple[str, ...], detail: str | None = None) -> str | None:
    """``detail`` prefixed with the policies that shaped the verdict (None when neither)."""
    if not policies:
        return detail
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"undocumented verifier policies {unknown}; add them to POLICIES")
    head = PREFIX + ", ".join(policies)
    return f"{head}; {detail}" if detail else head


def with_policies(policies: tuple[str, ...], detail: str | None) -> str | None:
    """``detail`` (perhaps already naming policies) with ``policies`` named first, each once."""
    if not policies:
        return detail
    named = policies_in(detail)
    rest = detail[len(PREFIX):].split(";", 1)[1].lstrip() if named and ";" in detail else (None if named else detail)
    return detail_with(tuple(dict.fromkeys((*policies, *named))), rest)


def policies_in(detail: str | None) -> list[str]:
    """The policy names a verdict's detail records."""
    if not detail or not detail.startswith(PREFIX):
        return []
    return detail[len(PREFIX):].split(";", 1)[0].split(", ")


def policy_of(judgement: _HasDetail) -> str:
    """The policy a disagreement with raw math-verify falls under: the first one recorded on the verdict; with
    none recorded, the answer the stage graded is another text than raw math-verify's pick (``marked_answer``)."""
    named = policies_in(judgement.detail)
    return named[0] if named else "marked_answer"
