"""Write tests/data/thinking_cases.jsonl: reasoning-model completions with hand-checkable grades.

``python tests/support/make_thinking_cases.py --write`` (needs ../shared/data: GSM8K test, MATH train; the data files are
read, never copied: each case keeps only one solution, reworded into a completion); ``--check`` exits 1 when the
file differs from what it would write (``python -m pipeline.docs`` runs it; without ../shared/data it says so and
passes, unless ``PASSBAND_REQUIRE_SHARED=1``, as in CI).

Each case wraps one real GSM8K or MATH reference solution in the shape a reasoning model writes:
R1-distill (the prompt opened ``<think>``, so the completion holds only ``</think>``, then a summary and
``**Final Answer**\\n\\boxed{}``), Qwen3 (``<think>\\n...\\n</think>\\n\\n`` then the answer), OpenThoughts /
Sky-T1 (``<|begin_of_thought|>...<|end_of_thought|>`` then ``<|begin_of_solution|>``), Qwen2.5-Math (no
thinking), answers inside and outside the thinking, boxed / ``####`` / "The answer is" endings, flip-flops
inside the thinking, and thinking blocks cut off at max_tokens (closed and unclosed). The expected grade
follows from how the case is built (which answer stands after the closing tag, and whether it closes), not
from the verifier; tests/test_verify_thinking.py checks the verifier against it. Fields::

    {"id", "kind", "source", "mode" (the thinking mode to judge with), "gold", "completion",
     "expected" (correct | incorrect | no_answer), "expected_detail" (unfinished_thinking or null),
     "unfinished" (the thinking never closes), "inside" (an answer to the problem stands inside the thinking)}
"""

from __future__ import annotations

import json
import os
import re
import sys
from fractions import Fraction
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent))

from pipeline.gold import boxed_gold, gsm8k_gold, is_plain_number  # noqa: E402

SHARED = TESTS.parent.parent / "shared" / "data"
OUT = TESTS / "data" / "thinking_cases.jsonl"
PER_KIND = 24
MAX_SOLUTION_CHARS = 700  # keeps the file small (about 300 KB)


def _pool() -> list[dict]:
    """Every 37th GSM8K test item and every 53rd MATH train item with a short solution: (gold, reasoning)."""
    items = []
    for i, line in enumerate((SHARED / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()):
        if i % 37:
            continue
        row = json.loads(line)
        reasoning = re.sub(r"<<[^>]*>>", "", row["answer"])
        if len(reasoning) <= MAX_SOLUTION_CHARS:
            items.append({"source": f"gsm8k/test/{i}", "gold": gsm8k_gold(row["answer"]), "reasoning": reasoning})
    for i, line in enumerate((SHARED / "math" / "train.jsonl").read_text(encoding="utf-8").splitlines()):
        if i % 53:
            continue
        row = json.loads(line)
        sol = row["solution"]
        if len(sol) <= MAX_SOLUTION_CHARS and "\\boxed" in sol:
            gold = boxed_gold(sol)
            if len(gold) <= 40 and "\\text" not in gold:
                items.append({"source": f"math/train/{i}", "gold": gold, "reasoning": sol})
    return items


def _wrong(gold: str, j: int) -> str:
    """A numerically different answer to a plain-number gold."""
    value = Fraction(gold) + 1 + j % 4
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def _bare(reasoning: str) -> str:
    """The reasoning without its final answer marker (GSM8K's #### line): the thinking states it in words."""
    return reasoning.rsplit("####", 1)[0].rstrip() if "####" in reasoning else reasoning


def _unboxed(text: str) -> str:
    return text.replace("\\boxed{", "{")


INTROS = ["Okay, let me try to figure this out.\n\n", "Alright, so I need to solve this problem step by step.\n\n",
          "Let me start by reading the problem carefully.\n\n", "Hmm, let's see.\n\n"]
ENDINGS = ["\\boxed{{{a}}}", "The answer is {a}.", "#### {a}", "**Final Answer**\n\\boxed{{{a}}}",
           "The final answer is $\\boxed{{{a}}}$.", "Final answer: {a}"]


def _final(answer: str, j: int) -> str:
    return ENDINGS[j % len(ENDINGS)].format(a=answer)


def _case(kind: str, item: dict, j: int) -> dict:
    g, r = item["gold"], item["reasoning"]
    intro = INTROS[j % len(INTROS)]
    numeric = is_plain_number(g)
    w = _wrong(g, j) if numeric else None
    mode, expected, detail, unfinished, inside = "auto", "correct", None, False, True
    if kind == "r1_closed":  # the prompt ends in "<think>\n": only the closing tag is in the completion
        mode = "tags"
        text = (f"{intro}{r}\n\nWait, let me double-check that. Going through it again gives {g}. Yes.\n</think>\n\n"
                f"The computation above gives the result.\n\n**Final Answer**\n\\boxed{{{g}}}")
    elif kind == "qwen3_closed":
        text = f"<think>\n{intro}{_bare(r)}\n</think>\n\nWorking it through step by step as above.\n\n{_final(g, j)}"
    elif kind == "qwen3_nothinking":  # enable_thinking false: an empty block, then the answer
        text = f"<think>\n\n</think>\n\n{_bare(r)}\n\n{_final(g, j)}"
        inside = False
    elif kind == "inside_only":  # the answer stands only inside the thinking: nothing to grade after </think>
        text = f"<think>\n{intro}{r}\nSo the answer is \\boxed{{{g}}}.\n</think>\n\nI hope this explanation helps!"
        expected = "no_answer"
    elif kind == "final_wrong":  # right inside, wrong after: graded on the final answer
        text = f"<think>\n{intro}{r}\nSo the answer is {g}.\n</think>\n\nOn reflection the answer is different.\n\n{_final(w, j)}"
        expected = "incorrect"
    elif kind == "inside_wrong_final_right":
        text = (f"<think>\n{intro}So the answer is \\boxed{{{w}}}. Hmm, wait, that's not right; let me redo it.\n"
                f"{_bare(r)}\n</think>\n\n{_final(g, j)}")
    elif kind == "unclosed_truncated":  # cut at max_tokens inside the thinking: never graded from inside
        text = f"<think>\n{intro}{r}\nThe answer is {g}. Hmm, but it might be {w or 7}"
        expected, detail, unfinished = "no_answer", "unfinished_thinking", True
    elif kind == "unclosed_boxed":
        text = f"<think>\n{intro}{_bare(r)}\nSo the final answer is \\boxed{{{g}}}."
        expected, detail, unfinished = "no_answer", "unfinished_thinking", True
    elif kind == "r1_unclosed":  # R1 prompt opened the thinking; truncated: no tag at all
        mode = "tags"
        text = f"{intro}{r}\nSo the answer is \\boxed{{{g}}}. Let me verify this by plugging it back in: if we"
        expected, detail, unfinished = "no_answer", "unfinished_thinking", True
    elif kind == "flipflop_right":  # the thinking flip-flops; the final answer decides
        text = (f"<think>\n{intro}{_bare(r)}\nSo the answer is {g}. Wait, no, maybe it's {w}. Actually, it's {g}. "
                f"Hmm, or {w}? No: {g}.\n</think>\n\n{_final(g, j)}")
    elif kind == "flipflop_wrong":
        text = (f"<think>\n{intro}{_bare(r)}\nSo the answer is {g}. Wait, no, maybe it's {w}. Actually, it's {g}. "
                f"Hmm, or {w}?\n</think>\n\n{_final(w, j)}")
        expected = "incorrect"
    elif kind == "thought_closed":  # OpenThoughts / Sky-T1 tags
        text = (f"<|begin_of_thought|>\n\n{intro}{r}\n\n<|end_of_thought|>\n\n<|begin_of_solution|>\n\n"
                f"{_bare(r)}\n\nThe final answer is $\\boxed{{{g}}}$.\n\n<|end_of_solution|>")
    elif kind == "thought_unclosed":
        text = f"<|begin_of_thought|>\n\n{intro}{r}\n\nSo the answer should be {g}, but let me check the"
        expected, detail, unfinished = "no_answer", "unfinished_thinking", True
    elif kind == "no_thinking":  # Qwen2.5-Math / GPT-style: no thinking block, the whole text is graded
        text = f"{_bare(r)}\n\n{_final(g, j)}"
        inside = False
    elif kind == "no_thinking_wrong":
        # its own answer unmarked (a box would be a second marked answer, which the extractor order decides)
        text = f"{_unboxed(_bare(r))}\n\nHmm, rounding differently instead.\n\n{_final(w, j)}"
        expected, inside = "incorrect", False
    elif kind == "off_mode_unclosed":  # thinking: off grades the whole text, tags included (the old behaviour)
        mode = "off"
        text = f"<think>\n{intro}{_bare(r)}\nThe answer is \\boxed{{{g}}}"
        unfinished = True
    else:
        raise ValueError(kind)
    return {"kind": kind, "source": item["source"], "mode": mode, "gold": g, "completion": text,
            "expected": expected, "expected_detail": detail, "unfinished": unfinished, "inside": inside}


NEEDS_WRONG = {"final_wrong", "inside_wrong_final_right", "unclosed_truncated", "flipflop_right", "flipflop_wrong",
               "no_thinking_wrong"}
KINDS = ["r1_closed", "qwen3_closed", "qwen3_nothinking", "inside_only", "final_wrong", "inside_wrong_final_right",
         "unclosed_truncated", "unclosed_boxed", "r1_unclosed", "flipflop_right", "flipflop_wrong", "thought_closed",
         "thought_unclosed", "no_thinking", "no_thinking_wrong", "off_mode_unclosed"]


def cases() -> list[dict]:
    pool = _pool()
    numeric = [it for it in pool if is_plain_number(it["gold"])]
    out = []
    for k, kind in enumerate(KINDS):
        items = numeric if kind in NEEDS_WRONG else pool
        for j in range(PER_KIND):
            case = _case(kind, items[(k * 7 + j * 5) % len(items)], j)
            out.append({"id": f"{kind}-{j:02d}", **case})
    return out


def main(argv: list[str]) -> int:
    if not SHARED.is_dir():
        print(f"{SHARED} is missing: the cases are made from its GSM8K and MATH files", file=sys.stderr)
        return 1 if "--write" in argv or os.environ.get("PASSBAND_REQUIRE_SHARED", "") not in ("", "0") else 0
    rows = cases()
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(TESTS.parent)} differs from what this script makes "
                  "(run: python tests/support/make_thinking_cases.py --write)", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"{len(rows)} cases -> {OUT.relative_to(TESTS.parent)} ({OUT.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
