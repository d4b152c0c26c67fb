"""A seeded generator of long chain-of-thought completions with the grade a reader gives each, by construction.

Built at test time from real reference solutions in ../shared/data (GSM8K test, MATH train: read, never
copied): each case takes one problem's gold and its solution's reasoning and wraps them in what a long-CoT
reasoning model writes: a thinking block of thousands of tokens (the reasoning, re-checks, a wrong detour,
re-reading the problem, flip-flops), closed (``</think>``; R1 style with the opening tag in the prompt, or
Qwen3 style with both) or not (cut at max_tokens, or looping on one paragraph until cut), then a final section
that ends one way: a box, a phrase ("the answer should be", "is indeed", "is the right answer", "the final
result is:" and a display block, number words, unit words, ordinals), prose ("Therefore, the total comes to
18 dollars."), the solution's own last line, or no answer (a question, a condition, a plan, "I hope this helps").

Rules that decide the grade (``expected``, the reader's grade), fixed before any verdict was looked at:

1. A thinking block that never closes has no answer: ``no_answer``, whatever it says inside.
2. Otherwise the grade is the final section's: the answer it states last, compared with the gold.
   The stated answer is the gold itself (restated: the same value, or the value in words, with a unit, as
   an ordinal) or a wrong value (a plain-number gold plus 1 to 4), so ``correct`` / ``incorrect`` follows
   from which one was written.
3. A final section that ends in a question, a supposition ("If the answer is 12, then ..."), a plan
   ("Next, I will multiply ..."), or no value at all states no answer: ``no_answer``, even when a value
   stands in it or in the thinking.
4. Prose endings (a sentence that states the value without an answer marker) are answers to a reader.
   ``expected_default`` is the grade under the default extractors, which read only marked answers: the
   same as ``expected`` except ``no_answer`` for the prose kinds (``PROSE_KINDS``); the optional
   ``prose_final`` extractor is measured on ``expected``.

The dev part and the held-back part are split by a fixed hash rule, written here before the set was run:
a case is held back when ``int(sha256(id).hexdigest(), 16) % 3 == 0`` (:func:`held_back`). The cases'
ids are ``{kind}-{j:02d}``, so the split does not move when the texts change.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PER_KIND = 36
MAX_SOLUTION_CHARS = 1500


@dataclass(frozen=True)
class LongCase:
    id: str
    kind: str
    source: str
    mode: str  # the thinking mode to judge with (tags: the prompt opened the thinking)
    gold: str
    completion: str
    expected: str  # the reader's grade: correct | incorrect | no_answer
    expected_default: str  # the grade under the default extractors (prose endings: no_answer)
    unfinished: bool  # the thinking never closes


def held_back(case_id: str) -> bool:
    """The fixed split: a third of the ids, by their sha256."""
    return int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 3 == 0


# ---------------------------------------------------------------- the real problems

@cache
def pool() -> tuple[list[dict], list[dict]]:
    """(numeric items, other items): gold, the reasoning (the solution without its final-answer marker), the
    solution's last line (GSM8K), from GSM8K test and MATH train."""
    from pipeline.gold import GoldError, boxed_gold, gsm8k_gold, is_plain_number

    numeric, other = [], []
    for i, line in enumerate((DATA / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        body, _, _ = row["answer"].rpartition("####")
        body = re.sub(r"<<[^>]*>>", "", body).strip()
        gold = gsm8k_gold(row["answer"])
        if len(body) <= MAX_SOLUTION_CHARS and is_plain_number(gold):
            numeric.append({"source": f"gsm8k/test/{i}", "gold": gold, "reasoning": body,
                            "last_line": body.splitlines()[-1].strip()})
    for i, line in enumerate((DATA / "math" / "train.jsonl").read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        sol = row["solution"]
        try:
            gold = boxed_gold(sol)
        except GoldError:
            continue
        if len(sol) > MAX_SOLUTION_CHARS or len(gold) > 40 or "\\text" in gold or "\\boxed" not in sol:
            continue
        item = {"source": f"math/train/{i}", "gold": gold, "reasoning": sol.replace("\\boxed{", "{"), "last_line": None}
        (numeric if is_plain_number(gold) else other).append(item)
    return numeric, other


def _wrong(gold: str, j: int) -> str:
    value = Fraction(gold) + 1 + j % 4
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


# ---------------------------------------------------------------- number words, ordinals

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def in_words(n: int, rng: random.Random) -> str:
    """0 <= n < 1,000,000 in English words ("three hundred and twenty-five")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ((rng.choice(["-", " "]) + _ONES[n % 10]) if n % 10 else "")
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ((rng.choice([" and ", " "]) + in_words(rest, rng)) if rest else "")
    rest = n % 1000
    return in_words(n // 1000, rng) + " thousand" + ((" " + in_words(rest, rng)) if rest else "")


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ---------------------------------------------------------------- the thinking

INTROS = ["Okay, let me try to figure this out.", "Alright, so I need to solve this problem step by step.",
          "Let me start by reading the problem carefully.", "Hmm, let's see what the question is asking."]
RECHECKS = [
    "Wait, let me double-check that. Going back over each step:",
    "Hmm, I should verify this a different way. Re-reading the problem once more:",
    "Let me make sure I didn't misread anything. Once more, slowly:",
    "Actually, hold on. Let me redo the computation carefully to avoid an arithmetic slip:",
]
DETOURS = [
    "Maybe I should try another approach. Suppose the answer is {w}; then the numbers would not add up, because "
    "the pieces above already fix every quantity. So that can't be it.",
    "Hmm, could it be {w}? No, that would mean I counted one of the parts twice. Scrap that.",
    "At first glance I might have guessed {w}, but that ignores part of the problem statement.",
]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def thinking(item: dict, wrong: str, rng: random.Random, *, rounds: int) -> str:
    """A long thinking text: the reasoning, then ``rounds`` re-checks and detours (each restates the reasoning,
    sometimes reordered), ending on the right value."""
    r = item["reasoning"]
    parts = [rng.choice(INTROS), r]
    for _ in range(rounds):
        s = _sentences(r)
        if len(s) > 2 and rng.random() < 0.5:
            head, tail = s[:1], s[1:]
            rng.shuffle(tail)
            s = head + tail
        parts.append(rng.choice(RECHECKS) + "\n" + " ".join(s))
        if rng.random() < 0.5:
            parts.append(rng.choice(DETOURS).format(w=wrong))
    parts.append(f"Yes, everything checks out. The value is {item['gold']}.")
    return "\n\n".join(parts)


# ---------------------------------------------------------------- the endings

UNITS = ["dollars", "apples", "meals", "cm", "inches per second", "boxes", "people", "miles"]


def _phrase(value: str, rng: random.Random) -> str:
    phrases = [f"The answer is {value}.", f"So the answer should be {value}.",
               f"Therefore, the final answer would be {value}.", f"Hence the answer must be {value}.",
               f"The answer is indeed {value}.", f"I think the answer is definitely {value}.",
               f"So the answer is clearly {value}.", f"Final Answer: {value}"]
    if not value.startswith("$"):  # "X is the right answer" reads one token before the phrase: a plain value
        phrases.append(f"I think {value} is the right answer.")
    return rng.choice(phrases)


def _math(g: str) -> str:
    return f"${g}$" if re.search(r"[\\^_{}]", g) else g


PROSE = ["Therefore, the total comes to {v}.", "So altogether that makes {v}.", "In the end, the result is {v}.",
         "Thus the quantity asked for is {v}.", "So, in total, there are {v}."]
QUESTIONS = ["So is the answer {v}? I'm not completely sure.", "Could the answer be {v}?",
             "Hmm, so the answer is {v}?"]
SUPPOSITIONS = ["If the answer is {v}, then the total would be {d}.", "Suppose the answer is {v}: then twice it is {d}.",
                "Let me check whether the answer is {v} by substituting it back."]
PLANS = ["Next, I will multiply {v} by 2 and add the {d} remaining items.",
         "The answer should be an integer, so let me recompute the last step with {v} and {d}.",
         "Let me now compute the total of {v} and {d} to finish."]

PROSE_KINDS = {"prose", "prose_wrong", "prose_last_line"}


def _ending(kind: str, item: dict, w: str, rng: random.Random) -> tuple[str, str]:
    """(final section, expected) for a final-section kind."""
    g = item["gold"]
    m = _math(g)
    if kind == "boxed":
        return rng.choice([f"**Final Answer**\n\\boxed{{{g}}}", f"The final answer is $\\boxed{{{g}}}$."]), "correct"
    if kind == "boxed_wrong":
        return f"**Final Answer**\n\\boxed{{{w}}}", "incorrect"
    if kind == "phrase":
        return _phrase(m, rng), "correct"
    if kind == "phrase_wrong":
        return _phrase(w, rng), "incorrect"
    if kind == "display":
        return rng.choice([f"Therefore, the final result is:\n\\[\n{g}\n\\]",
                           f"So the final answer is:\n\n$$ {g} $$"]), "correct"
    if kind == "number_words":
        return f"The answer is {in_words(int(g), rng)}{rng.choice(['', ' ' + rng.choice(UNITS)])}.", "correct"
    if kind == "number_words_wrong":
        return f"So the answer should be {in_words(int(w), rng)}.", "incorrect"
    if kind == "unit_words":
        return rng.choice([f"So the answer should be {g} {rng.choice(UNITS)}.",
                           f"The answer is {m} {rng.choice(UNITS)}."]), "correct"
    if kind == "ordinal":
        return f"The answer is {ordinal(int(g))}{rng.choice(['', ' grade', ' place'])}.", "correct"
    if kind == "prose":
        return rng.choice(PROSE).format(v=f"{m} {rng.choice(UNITS)}" if rng.random() < 0.4 else m), "correct"
    if kind == "prose_wrong":
        return rng.choice(PROSE).format(v=w), "incorrect"
    if kind == "prose_last_line":
        return item["last_line"], "correct"
    if kind == "question":
        return rng.choice(QUESTIONS).format(v=m), "no_answer"
    if kind == "supposition":
        return rng.choice(SUPPOSITIONS).format(v=m, d=rng.randint(2, 99)), "no_answer"
    if kind == "plan":
        return rng.choice(PLANS).format(v=m, d=rng.randint(2, 99)), "no_answer"
    if kind == "no_value":
        return rng.choice(["I hope this helps!", "Let me know if you need anything else.",
                           "That completes the reasoning above."]), "no_answer"
    raise ValueError(kind)


FINAL_KINDS = ["boxed", "boxed_wrong", "phrase", "phrase_wrong", "display", "number_words", "number_words_wrong",
               "unit_words", "ordinal", "prose", "prose_wrong", "prose_last_line", "question", "supposition", "plan",
               "no_value"]
UNFINISHED_KINDS = ["truncated", "looping", "r1_truncated"]
KINDS = FINAL_KINDS + UNFINISHED_KINDS + ["looping_closed"]
NUMERIC_KINDS = {"boxed_wrong", "phrase_wrong", "number_words", "number_words_wrong", "ordinal", "prose_wrong",
                 "prose_last_line", "truncated", "looping", "r1_truncated", "looping_closed", "question"}


def _fits(kind: str, item: dict) -> bool:
    g = item["gold"]
    if kind in ("number_words", "number_words_wrong", "ordinal"):
        return g.isdigit() and 0 < int(g) < 100_000
    if kind == "prose_last_line":  # the solution's last line must end on the gold (its last number is the gold)
        line = item["last_line"] or ""
        nums = re.findall(r"-?\d[\d,]*(?:\.\d+)?", line)
        return bool(nums) and nums[-1].replace(",", "") == g and not re.search(r"[?]", line)
    return True


def _case(kind: str, item: dict, j: int, rng: random.Random) -> LongCase:
    from pipeline.gold import is_plain_number

    g = item["gold"]
    w = _wrong(g, j) if is_plain_number(g) else "7"
    rounds = rng.randint(10, 30)
    think = thinking(item, w, rng, rounds=rounds)
    r1 = rng.random() < 0.5
    mode, unfinished = ("tags" if r1 else "auto"), False
    opening = "" if r1 else "<think>\n"
    if kind in FINAL_KINDS:
        final, expected = _ending(kind, item, w, rng)
        summary = rng.choice(["", "Putting the steps together:\n\n" + item["reasoning"].split("\n")[0] + "\n\n"])
        if re.search(r"(?i)answer|result", summary):  # a summary states no answer of its own: the ending does
            summary = ""
        text = f"{opening}{think}\n</think>\n\n{summary}{final}"
    elif kind == "looping_closed":  # a loop that ends: the final section decides
        loop = f"Wait, so the answer should be {g}. Let me re-check that once more."
        final, expected = _ending(rng.choice(["phrase", "boxed", "display"]), item, w, rng)
        text = f"{opening}{think}\n\n" + "\n".join([loop] * rng.randint(20, 60)) + f"\n</think>\n\n{final}"
    else:
        unfinished, expected = True, "no_answer"
        if kind == "truncated":  # cut at max_tokens in the middle of a sentence
            full = f"<think>\n{think}\nSo the answer is \\boxed{{{g}}}. Let me verify once more: {item['reasoning']}"
            text, mode = full[:len(full) - rng.randint(5, 200)], "auto"
        elif kind == "looping":
            loop = f"So the answer should be {g}. Wait, maybe it's {w}? No, the answer is {g}. Let me re-check."
            text = f"<think>\n{think}\n" + "\n".join([loop] * rng.randint(30, 120)) + "\nSo the answer"
            mode = "auto"
        else:  # r1_truncated: the prompt opened the thinking, the completion holds no tag at all
            text, mode = f"{think}\nThe final answer is \\boxed{{{g}}}. Hmm, but let me check the", "tags"
    expected_default = "no_answer" if kind in PROSE_KINDS else expected
    return LongCase(f"{kind}-{j:02d}", kind, item["source"], mode, g, text, expected, expected_default, unfinished)


def cases(seed: int = 0, per_kind: int = PER_KIND) -> list[LongCase]:
    """``per_kind`` cases of each of :data:`KINDS`, the same ones for the same seed."""
    numeric, other = pool()
    rng = random.Random(seed)
    out = []
    for kind in KINDS:
        items = numeric if kind in NUMERIC_KINDS else numeric + other
        if kind in ("display", "phrase", "boxed", "unit_words", "prose", "supposition", "plan"):
            items = other + numeric[: len(other)]  # about as many symbolic MATH golds as numbers
        items = [it for it in items if _fits(kind, it)]
        for j, item in enumerate(rng.sample(items, per_kind)):
            out.append(_case(kind, item, j, rng))
    return out


def judged(cs: list[LongCase], extractors: list[str] | None = None, workers: int = 2) -> list:
    """The verifier's judgements of ``cs`` (each case under its own thinking mode), in order."""
    from pipeline.verify import judge_many

    out: list = [None] * len(cs)
    for mode in sorted({c.mode for c in cs}):
        idx = [i for i, c in enumerate(cs) if c.mode == mode]
        for i, j in zip(idx, judge_many([(cs[i].gold, cs[i].completion) for i in idx], extractors, thinking=mode,
                                        workers=workers), strict=True):
            out[i] = j
    return out


def prose_final_scores(cs: list[LongCase], js: list) -> tuple[float, float, int, int]:
    """(precision, recall, n_taken, n_prose) of ``prose_final``: precision over the cases whose answer it took
    (the verdict matches the reader's grade), recall over the prose endings (it took the answer and the verdict
    matches)."""
    taken = [(c, j) for c, j in zip(cs, js, strict=True) if j.extractor == "prose_final"]
    prose = [(c, j) for c, j in zip(cs, js, strict=True) if c.kind in PROSE_KINDS]
    precision = sum(j.status == c.expected for c, j in taken) / len(taken) if taken else 1.0
    recall = sum(j.extractor == "prose_final" and j.status == c.expected for c, j in prose) / len(prose)
    return precision, recall, len(taken), len(prose)


def report() -> None:
    """Agreement on both parts (default extractors; with prose_final), prose_final's precision and recall."""
    from pipeline.config import VerifyConfig

    cs = cases()
    default = VerifyConfig().extractors
    lengths = sorted(len(c.completion) for c in cs)
    print(f"{len(cs)} cases, {sum(c.unfinished for c in cs)} with unfinished thinking; characters: min {lengths[0]}, "
          f"median {lengths[len(lengths) // 2]}, max {lengths[-1]}")
    for name, extractors, key in (("default extractors", default, "expected_default"),
                                  ("default + prose_final", [*default, "prose_final"], "expected")):
        js = judged(cs, extractors)
        for part, keep in (("dev", False), ("held-back", True)):
            sel = [(c, j) for c, j in zip(cs, js, strict=True) if held_back(c.id) == keep]
            agree = sum(j.status == getattr(c, key) for c, j in sel)
            print(f"{name:24} {part:9} {agree}/{len(sel)} = {100 * agree / len(sel):.2f}% (grade: {key})")
        inside = sum(c.unfinished and j.status != "no_answer" for c, j in zip(cs, js, strict=True))
        print(f"{name:24} answers taken from unfinished thinking: {inside}")
        if "prose_final" in extractors:
            p, r, n_taken, n_prose = prose_final_scores(cs, js)
            print(f"prose_final: precision {100 * p:.1f}% ({n_taken} answers taken), recall {100 * r:.1f}% "
                  f"({n_prose} prose endings)")


if __name__ == "__main__":
    report()
