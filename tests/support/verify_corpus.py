"""A seeded generator of labelled (gold, completion, expected) cases for differential testing of the verifier.

Golds come from ../shared/data (GSM8K train, MATH train; the golds ingest would accept) and the
synthetic set; constructed golds add the shapes those sets have few of (juxtaposed symbols,
choice letters, text answers, equations, intervals). Each case restates the gold (``correct``)
or a changed value (``incorrect``) in one surface form a model writes::

    >>> c = cases(seed=0, n=20000)[0]                                    # doctest: +SKIP
    Case(gold='72', completion='So the final answer is **72**.', expected='correct', form='bold', source='gsm8k')

A restatement keeps the value by construction (``\\dfrac`` for ``\\frac``, ``0.5`` for ``\\frac{1}{2}``,
``1,234`` for 1234, ``\\left( \\right)``, a unit or currency around a number). A change bumps the
first number of the gold by one (or, with no number, adds ``+ 1`` or swaps the word/letter), which
changes the value of every gold shape used here.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@dataclass(frozen=True)
class Case:
    gold: str
    completion: str
    expected: str  # correct | incorrect
    form: str
    source: str


# ---------------------------------------------------------------- golds

@cache
def golds() -> dict[str, list[str]]:
    """Golds per source, as ingest extracts and accepts them (the problems table's ``answer``)."""
    from pipeline.gold import GoldError, boxed_gold, gsm8k_gold
    from pipeline.ingest.synthetic import SyntheticOptions, generate

    out: dict[str, list[str]] = {"gsm8k": [], "math": [], "synthetic": []}
    for line in (DATA / "gsm8k" / "train.jsonl").read_text().splitlines():
        with contextlib.suppress(GoldError):
            out["gsm8k"].append(gsm8k_gold(json.loads(line)["answer"]))
    for line in (DATA / "math" / "train.jsonl").read_text().splitlines():
        try:
            g = boxed_gold(json.loads(line)["solution"])
        except GoldError:
            continue
        if len(g) <= 200:
            out["math"].append(g)  # whether ingest accepts it (gold_parses) is checked on the sampled ones
    out["synthetic"] = [i.answer for i in generate(SyntheticOptions(n_per_level=40, seed=0))]
    return out


_INT = re.compile(r"^-?\d+$")
_DEC = re.compile(r"^-?\d+\.\d+$")
_FRAC = re.compile(r"^(-?)\\[dt]?frac(?:\{(\d+)\}|(\d))(?:\{([1-9]\d*)\}|([1-9]))$")


def kind(g: str) -> str:
    """The shape of a gold, which decides the surface forms that restate it."""
    if _INT.match(g):
        return "int"
    if _DEC.match(g):
        return "decimal"
    if _FRAC.match(g):
        return "fraction"
    if "\\text" in g:
        return "text"
    if "matrix" in g:
        return "matrix"
    if "\\infty" in g or "\\cup" in g or (re.match(r"^(\\left)?[(\[].*[)\]]$", g) and g[0] != g[-1].translate(
            str.maketrans(")]", "(["))):
        return "interval"
    if re.match(r"^(\\left)?\(.*,.*\)$", g):
        return "tuple"
    if g.startswith("\\{"):
        return "set"
    if "=" in g:
        return "equation"
    if re.search(r"<|>|\\le|\\ge", g):
        return "inequality"
    return "symbolic"


# ---------------------------------------------------------------- changed values

_FIRST_NUMBER = re.compile(r"\d+")


def changed(g: str, k: str, rng: random.Random) -> str:
    """A gold of the same shape with another value."""
    if k == "text" and not _FIRST_NUMBER.search(g):  # a word answer: another word; with a number: another number
        return re.sub(r"\\text\{([^}]*)\}", lambda m: "\\text{" + rng.choice(["Tuesday", "Bob", "odd", "neither"])
                      + "}" if m.group(1) not in ("Tuesday", "Bob") else "\\text{Carol}", g, count=1)
    m = _FIRST_NUMBER.search(g)
    if m is None:
        return f"{g} + 1" if k in ("symbolic",) else g.replace("x", "(x+1)", 1)
    return g[:m.start()] + str(int(m.group()) + 1) + g[m.end():]


# ---------------------------------------------------------------- restatements of the same value

def _frac_forms(g: str) -> dict[str, str]:
    sign, a1, a2, b1, b2 = _FRAC.match(g).groups()
    a, b = int(a1 or a2), int(b1 or b2)
    out = {"dfrac": f"{sign}\\dfrac{{{a}}}{{{b}}}", "tfrac": f"{sign}\\tfrac{{{a}}}{{{b}}}", "slash": f"{sign}{a}/{b}"}
    f = Fraction(a, b)
    den = f.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1 and b:
        s = f"{float(f):.6f}".rstrip("0").rstrip(".")
        if Fraction(s) == f:
            out["decimal"] = sign + s
    if f > 1 and f.denominator > 1:
        q, r = divmod(f.numerator, f.denominator)
        out["mixed"] = f"{sign}{q}\\frac{{{r}}}{{{f.denominator}}}"
    return out


def _number_forms(g: str) -> dict[str, str]:
    out = {"money": f"\\${g}" if "." in g else f"\\${g}.00", "units": f"{g} cm", "degrees": f"{g}^\\circ",
           "percent": f"{g}\\%"}
    if _INT.match(g) and abs(int(g)) >= 1000:
        out["thousands"] = f"{int(g):,}"
    return out


def restatements(g: str, k: str) -> dict[str, str]:
    """form -> an answer string with the value of ``g``."""
    out = {"same": g}
    if k in ("int", "decimal"):
        out |= _number_forms(g)
    if k == "fraction":
        out |= _frac_forms(g)
    if "\\frac" in g and k != "fraction":
        out["dfrac"] = g.replace("\\frac", "\\dfrac")
    if k in ("tuple", "interval") and not g.startswith("\\left"):
        out["left_right"] = "\\left" + g[0] + " " + g[1:-1] + " \\right" + g[-1]
    if k == "text":
        out["plain_text"] = re.sub(r"\\text\{([^}]*)\}", r"\1", g)
    return out


# ---------------------------------------------------------------- where the answer sits in the completion

LEAD = ["Let me work through this step by step. First I compute the pieces. ",
        "We have 3 parts to combine, so the total follows. ", ""]
Wrapper = Callable[[str, bool], str]


def _plain(a: str, latex: bool) -> str:
    return f"${a}$" if latex else a


WRAPPERS: dict[str, Wrapper] = {
    "boxed_in_math": lambda a, latex: f"Therefore, the answer is $\\boxed{{{a}}}$.",
    "boxed_bare": lambda a, latex: f"Putting it together:\n\\boxed{{{a}}}",
    "bold": lambda a, latex: f"So the final answer is **{_plain(a, latex)}**.",
    "bold_final": lambda a, latex: f"**Final Answer:** {_plain(a, latex)}",
    "answer_is_colon": lambda a, latex: f"The answer is: {_plain(a, latex)}",
    "hashes": lambda a, latex: f"#### {a}",
}
NUMERIC_ONLY = {"hashes"}


def _latex(a: str) -> bool:
    return bool(re.search(r"[\\^_{}]", a))


def _wrap(rng: random.Random, a: str, numeric: bool) -> tuple[str, str]:
    names = [w for w in WRAPPERS if numeric or w not in NUMERIC_ONLY]
    w = rng.choice(names)
    return w, rng.choice(LEAD) + WRAPPERS[w](a, _latex(a))


# ---------------------------------------------------------------- constructed golds

def constructed(rng: random.Random) -> tuple[str, str]:
    """(gold, family) for shapes the sets have few of."""
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 9)
    v = rng.choice("xynkt")
    family = rng.choice(["juxtaposed", "juxtaposed", "juxtaposed", "choice", "choice", "text", "equation", "interval",
                         "set", "inequality"])
    if family == "juxtaposed":
        g = rng.choice([f"{a}{v}", f"{a}\\sqrt{{{b}}}", f"{a}\\pi", f"{a}{v}+{c}", f"{a}{v}^2", f"{a}i",
                        f"{a}{v} - {c}", "p - q", f"{a}\\sqrt{{{b}}}\\pi"])
    elif family == "choice":
        g = rng.choice(["(A)", "(B)", "(C)", "(D)", "(E)", "\\text{(B)}", "C"])
    elif family == "text":
        g = "\\text{" + rng.choice(["Monday", "Friday", "Alice", "even", "east"]) + "}"
    elif family == "equation":
        g = rng.choice([f"y = {a}x + {c}", f"y = -{a}x", f"x^2 + y^2 = {a * a + b * b}", f"{a}x - {b}y + {c}z + 4 = 0",
                        f"x = {a}"])
    elif family == "interval":
        g = rng.choice([f"({a}, {a + b})", f"[{a}, {a + b}]", f"(-\\infty, {a}]", f"[{a}, \\infty)",
                        f"(-\\infty, {a}) \\cup ({a + b}, \\infty)"])
    elif family == "set":
        g = f"\\{{{a}, {a + b}\\}}"
    else:
        g = rng.choice([f"x > {a}", f"x \\le {a}", f"{a} < x < {a + b}"])
    return g, family


def _choice_cases(g: str, rng: random.Random) -> list[tuple[str, str, str]]:
    letter = re.search(r"[A-E]", g).group()
    other = rng.choice([x for x in "ABCDE" if x != letter])
    return [("choice", f"The answer is ({letter}).", "correct"), ("choice", f"\\boxed{{{other}}}", "incorrect"),
            ("choice", f"So the final answer is **{letter}**.", "correct")]


# ---------------------------------------------------------------- the endings a reasoning model writes

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def in_words(n: int) -> str:
    """0 <= n < 1,000,000 in English words ("three hundred and twenty-five")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (f"-{_ONES[n % 10]}" if n % 10 else "")
    if n < 1000:
        return f"{_ONES[n // 100]} hundred" + (f" and {in_words(n % 100)}" if n % 100 else "")
    return f"{in_words(n // 1000)} thousand" + (f" {in_words(n % 1000)}" if n % 1000 else "")


def _ordinal(n: int) -> str:
    return f"{n}" + ("th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


PHRASES: dict[str, Callable[[str], str]] = {
    "should_be": lambda a: f"So the answer should be {a}.",
    "would_be": lambda a: f"Therefore, the final answer would be {a}",
    "must_be": lambda a: f"Hence the answer must be {a}.",
    "indeed": lambda a: f"I think the answer is indeed {a}.",
    "final_result_display": lambda a: f"Therefore, the final result is:\n\\[\n{a}\n\\]",
}
# a supposition or a question: no answer, whatever value stands in it (the label is "not correct")
HEDGES: dict[str, Callable[[str], str]] = {
    "conditional": lambda a: f"If the answer is {a}, we would be done, but let me check the second case.",
    "question": lambda a: f"Hmm, so the answer is {a}?",
}


def _ending_cases(g: str, source: str, rng: random.Random) -> list[Case]:
    """The gold (``correct``) and a changed value (``incorrect``) in one phrase ending each, plus number words,
    ordinals and unit words where the gold allows them, and a hedge (``incorrect``: no answer is stated)."""
    from pipeline.verify.answer_text import has_words

    k = kind(g)
    bad = changed(g, k, rng)
    out = []
    latex = _latex(g)
    for value, label in ((g, "correct"), (bad, "incorrect")):
        if value == g and label == "incorrect":
            continue
        a = f"${value}$" if latex else value
        form = rng.choice(sorted(PHRASES))
        out.append(Case(g, rng.choice(LEAD) + PHRASES[form](value if form == "final_result_display" else a), label,
                        f"{k}/{form}", source))
        if k == "int" and 0 <= int(value) < 1_000_000:
            extra = rng.choice(["number_words", "ordinal", "right_answer"])
            text = {"number_words": f"The answer is {in_words(int(value))}{rng.choice(['', ' boxes', ' dollars'])}.",
                    "ordinal": f"The answer is {_ordinal(int(value))}{rng.choice(['', ' grade'])}.",
                    "right_answer": f"I think {value} is the right answer."}[extra]
            out.append(Case(g, text, label, f"{k}/{extra}", source))
        # unit words after an expression: only when the gold has no words of its own and is no choice letter (a
        # power such as 2^{98} is left out: math-verify's float rounding equates 1/2^{98} and 2/2^{98})
        if k in ("symbolic", "fraction") and not has_words(g) and re.search(r"\d", g) and not re.search(
                r"\^\{?\d{2,}", g):
            unit = rng.choice(["inches per second", "units", "square feet"])
            out.append(Case(g, f"The answer is {value} {unit}.", label, f"{k}/unit_expression", source))
    form = rng.choice(sorted(HEDGES))
    out.append(Case(g, HEDGES[form](f"${g}$" if latex else g), "incorrect", f"{k}/{form}", source))
    return out


def ending_cases(seed: int, n: int) -> list[Case]:
    """About ``n`` cases of the endings above, from GSM8K and MATH golds (a stream of its own: the other cases do
    not move)."""
    from pipeline.verify.gold_check import gold_parses

    rng = random.Random(seed + 1_000_003)
    pool = golds()
    out: list[Case] = []
    for source in ("gsm8k", "math"):
        gs = [g for g in rng.sample(pool[source], n // 5) if len(g) <= 60 and gold_parses(g)]
        for g in gs:
            out.extend(_ending_cases(g, source, rng))
    return out


# ---------------------------------------------------------------- raw math-verify, as a new user calls it

def raw_math_verify(cases: list[Case], *, processes: int = 1) -> list[bool]:
    """``verify(parse(f"${gold}$"), parse(completion))`` with math-verify's defaults (an exception is False),
    each gold parsed once; over ``processes`` forked processes (each on its own main thread, where
    math-verify's SIGALRM timeout works)."""
    if processes > 1:
        import multiprocessing as mp

        chunks = [cases[i::processes] for i in range(processes)]
        with mp.get_context("fork").Pool(processes) as pool:
            parts = pool.map(raw_math_verify, chunks)
        out: list[bool] = [False] * len(cases)
        for i, part in enumerate(parts):
            out[i::processes] = part
        return out
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    gold_cache: dict[str, list] = {}
    out = []
    for c in cases:
        try:
            if c.gold not in gold_cache:
                gold_cache[c.gold] = parse(f"${c.gold}$")
            out.append(bool(verify(gold_cache[c.gold], parse(c.completion))))
        except Exception:
            out.append(False)
    return out


# ---------------------------------------------------------------- the corpus

def _cases_for(g: str, source: str, rng: random.Random, per_gold: int) -> list[Case]:
    k = kind(g)
    forms = restatements(g, k)
    numeric = k in ("int", "decimal")
    out = []
    for _ in range(per_gold):
        form, answer = rng.choice(sorted(forms.items()))
        w, text = _wrap(rng, answer, numeric and form in ("same", "thousands"))
        out.append(Case(g, text, "correct", f"{k}/{form}" if form != "same" else f"{k}/{w}", source))
    bad = changed(g, k, rng)
    if bad != g:
        bad_forms = restatements(bad, kind(bad)) if kind(bad) == k else {"same": bad}
        form, answer = rng.choice(sorted(bad_forms.items()))
        w, text = _wrap(rng, answer, numeric and form in ("same", "thousands"))
        out.append(Case(g, text, "incorrect", f"{k}/{form}" if form != "same" else f"{k}/{w}", source))
    return out


def cases(*, seed: int = 0, n: int = 20000) -> list[Case]:
    """At least ``n`` labelled cases, the same ones for the same seed."""
    from pipeline.verify.gold_check import gold_parses

    rng = random.Random(seed)
    pool = golds()
    out: list[Case] = []
    # MATH's structured golds (equations, intervals, tuples) cost math-verify tens of ms each: the shares keep the
    # differential test within a CI budget while every family keeps dozens to hundreds of cases
    sources = [("gsm8k", 0.42), ("math", 0.42), ("synthetic", 0.05)]
    for source, share in sources:
        gs = pool[source]
        want = min(len(gs), int(n * share / 2.5))
        for g in [g for g in rng.sample(gs, min(len(gs), int(want * 1.05))) if gold_parses(g)][:want]:
            out.extend(_cases_for(g, source, rng, per_gold=2 if source != "math" else 1))
    while len(out) < n:
        g, family = constructed(rng)
        if family == "choice":
            out.extend(Case(g, t, e, f"choice/{f}", "constructed") for f, t, e in _choice_cases(g, rng))
        else:
            out.extend(_cases_for(g, "constructed", rng, per_gold=1))
    return out + ending_cases(seed, n // 10)


if __name__ == "__main__":
    import collections
    import sys

    cs = cases(seed=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(len(cs), collections.Counter(c.expected for c in cs))
    print(collections.Counter(c.form.split("/")[0] for c in cs).most_common())
    for c in random.Random(1).sample(cs, 30):
        print(c)
