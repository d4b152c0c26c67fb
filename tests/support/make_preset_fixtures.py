"""Write tests/data/presets/<preset>/<split>-00000-of-00001.parquet: a few rows per preset in that dataset's layout.

Each fixture has the dataset's columns with its Arrow types (nested structs and lists as the Hub's
Parquet holds them), a few well-formed rows (questions written for these tests, not copied) and at
least one malformed row. The layouts come from the datasets' cards and loading code as the author
knew them (the Hub is not reachable here); tests/test_ingest_presets.py checks what ingest makes of them.

    python tests/support/make_preset_fixtures.py --write   # rewrites the files (deterministic)
    python tests/support/make_preset_fixtures.py --check   # exit 1 when a file differs from what this script makes

``python -m pipeline.docs`` runs both with the repository's other generators. ``--check`` compares the tables (schema
and rows), not the bytes, since Parquet's footer names the pyarrow version that wrote it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parents[1] / "data" / "presets"

MESSAGE = pa.struct([("content", pa.string()), ("role", pa.string())])
DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the "
               "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'
SKY_MODELS = ("DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-32B", "DeepSeek-R1-Distill-Qwen-7B")


def _dapo(question: str, gold: str | None, index: str) -> dict:
    return {"data_source": "math_dapo", "prompt": [{"content": DAPO_PREFIX + question + DAPO_SUFFIX, "role": "user"}],
            "ability": "MATH", "reward_model": {"ground_truth": gold, "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": index}}


def _sky(question: str, gold: str, index: int, diffs: tuple[int, int, int]) -> dict:
    return {"data_source": "train-math-numinamath1.5_olympiads", "prompt": [{"content": question, "role": "user"}],
            "ability": "math", "reward_model": {"ground_truth": gold, "style": "rule"},
            "extra_info": {"index": index, "model_difficulty": dict(zip(SKY_MODELS, diffs, strict=True))}}


def _openr1(uuid: str, problem: str, answer: str, solution: str, ptype: str, count: int) -> dict:
    return {"problem": problem, "solution": solution, "answer": answer, "problem_type": ptype,
            "question_type": "math-word-problem", "source": "olympiads", "uuid": uuid,
            "is_reasoning_complete": [True, True], "generations": ["<think>\nshort\n</think>\n\\boxed{x}"] * 2,
            "correctness_math_verify": [True, False], "correctness_llama": None, "finish_reasons": None,
            "correctness_count": count,
            "messages": [{"content": problem, "role": "user"}, {"content": "<think>...</think> done", "role": "assistant"}]}


def _numina(problem: str, answer: str, ptype: str, qtype: str) -> dict:
    return {"problem": problem, "solution": f"We compute it. The answer is ${answer}$.", "answer": answer,
            "problem_type": ptype, "question_type": qtype, "problem_is_valid": "Yes", "solution_is_valid": "Yes",
            "source": "cn_contest", "synthetic": False}


FIXTURES: dict[str, tuple[str, pa.Schema, list[dict]]] = {
    "dapo-math-17k": ("train", pa.schema([
        ("data_source", pa.string()), ("prompt", pa.list_(MESSAGE)), ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
        ("extra_info", pa.struct([("index", pa.string())]))]), [
        _dapo("Find the number of positive divisors of $360$.", "24", "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"),
        _dapo("What is the remainder when $7^{100}$ is divided by $5$?", "1", "b426d104-244d-4831-a2c4-cd756b61700a"),
        _dapo("Find the number of positive divisors of $360$.", "24", "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"),
        _dapo("How many primes are less than $30$?", None, "a2b3c4d5-0000-4000-8000-000000000001")]),
    "deepscaler-preview": ("train", pa.schema([("problem", pa.string()), ("answer", pa.string()),
                                                ("solution", pa.string())]), [
        {"problem": "Compute $\\sum_{k=1}^{10} k^2$.", "answer": "385",
         "solution": "By the formula $n(n+1)(2n+1)/6$ this is $\\boxed{385}$."},
        {"problem": "Solve for $x$: $3x - 7 = 11$.", "answer": "6", "solution": "$3x = 18$ so $x = 6$."},
        {"problem": "Evaluate the expression shown in the figure.", "answer": "", "solution": "See the figure."}]),
    "big-math-rl-verified": ("train", pa.schema([
        ("problem", pa.string()), ("answer", pa.string()), ("source", pa.string()), ("domain", pa.list_(pa.string())),
        ("llama8b_solve_rate", pa.float64())]), [
        {"problem": "Given that $a + b = 5$ and $ab = 6$, find $a^2 + b^2$.", "answer": "13", "source": "cn_k12",
         "domain": ["Mathematics -> Algebra -> Algebraic Expressions"], "llama8b_solve_rate": 0.78125},
        {"problem": "Find the least positive integer $n$ such that $n!$ ends in exactly $6$ zeros.", "answer": "25",
         "source": "olympiads", "domain": ["Mathematics -> Number Theory -> Factorization"],
         "llama8b_solve_rate": 0.046875},
        {"problem": "A rectangle has perimeter $20$ and area $21$. Find its longer side.", "answer": "7",
         "source": "orca_math", "domain": ["Mathematics -> Geometry -> Plane Geometry"], "llama8b_solve_rate": None},
        {"problem": "Find $\\lim_{x \\to 0} \\frac{\\sin 3x}{x}$.", "answer": "3", "source": "big_math",
         "domain": ["Mathematics -> Calculus -> Limits"], "llama8b_solve_rate": float("nan")}]),
    "openr1-math-220k": ("train", pa.schema([
        ("problem", pa.string()), ("solution", pa.string()), ("answer", pa.string()), ("problem_type", pa.string()),
        ("question_type", pa.string()), ("source", pa.string()), ("uuid", pa.string()),
        ("is_reasoning_complete", pa.list_(pa.bool_())), ("generations", pa.list_(pa.string())),
        ("correctness_math_verify", pa.list_(pa.bool_())), ("correctness_llama", pa.list_(pa.bool_())),
        ("finish_reasons", pa.list_(pa.string())), ("correctness_count", pa.int64()), ("messages", pa.list_(MESSAGE))]), [
        _openr1("0b1c2d3e-1111-5222-8333-444455556666", "Find all real $x$ with $x^2 - 5x + 6 = 0$.", "2,3",
                "Factor: $(x-2)(x-3)=0$.", "Algebra", 2),
        _openr1("1c2d3e4f-1111-5222-8333-444455556666", "What is $\\frac{1}{2} + \\frac{1}{3}$?", "\\frac{5}{6}",
                "Common denominator $6$.", "Algebra", 1),
        _openr1("2d3e4f5a-1111-5222-8333-444455556666", "Prove that there are infinitely many primes.", "proof",
                "Suppose finitely many...", "Number Theory", 0)]),
    "numinamath-1.5": ("train", pa.schema([
        ("problem", pa.string()), ("solution", pa.string()), ("answer", pa.string()), ("problem_type", pa.string()),
        ("question_type", pa.string()), ("problem_is_valid", pa.string()), ("solution_is_valid", pa.string()),
        ("source", pa.string()), ("synthetic", pa.bool_())]), [
        _numina("Find the sum of the interior angles of a hexagon, in degrees.", "720", "Geometry", "math-word-problem"),
        _numina("Let $x = 2$. Compute $x^3 - x$.", "6", "Algebra", "math-word-problem"),
        _numina("Show that $n^3 - n$ is divisible by $6$ for every integer $n$.", "proof", "Number Theory", "proof"),
        _numina("Find the value of the constant in the original (lost) statement.", "notfound", "Algebra",
                "math-word-problem")]),
    "skywork-or1-rl-data": ("math", pa.schema([
        ("data_source", pa.string()), ("prompt", pa.list_(MESSAGE)), ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64()), ("model_difficulty", pa.struct(
            [(m, pa.int64()) for m in SKY_MODELS]))]))]), [
        _sky("Find the smallest prime greater than $100$.", '["101"]', 0, (9, 1, 3)),
        _sky("Compute $1 - \\frac{1}{2}$.", '["\\\\frac{1}{2}", "0.5"]', 1, (16, 8, 12)),
        _sky("Compute $\\binom{6}{2}$.", "15", 2, (0, 0, 0)),
        _sky("Determine the constant from the diagram.", "[]", 3, (16, 16, 16))]),
    "polaris-53k": ("train", pa.schema([("problem", pa.string()), ("answer", pa.string()), ("difficulty", pa.string())]), [
        {"problem": "Let $f(x) = 2x + 1$. Find $f(f(3))$.", "answer": "15", "difficulty": "8/8"},
        {"problem": "How many ways can $4$ people sit in a row?", "answer": "24", "difficulty": "3/8"},
        {"problem": "Find the area of a circle of radius $3$.", "answer": "9\\pi", "difficulty": "n/a"}]),
    "deepmath-103k": ("train", pa.schema([
        ("question", pa.string()), ("final_answer", pa.string()), ("difficulty", pa.float64()), ("topic", pa.string()),
        ("r1_solution_1", pa.string()), ("r1_solution_2", pa.string()), ("r1_solution_3", pa.string())]), [
        {"question": "Evaluate $\\int_0^1 3x^2\\,dx$.", "final_answer": "1", "difficulty": 3.0,
         "topic": "Mathematics -> Calculus -> Integral Calculus -> Techniques of Integration -> Single-variable",
         "r1_solution_1": "<think>" + "antiderivative x^3. " * 3000 + "</think> \\boxed{1}", "r1_solution_2": "\\boxed{1}",
         "r1_solution_3": "\\boxed{1}"},
        {"question": "Determine the order of the group $S_4$.", "final_answer": "24", "difficulty": 5.5,
         "topic": "Mathematics -> Algebra -> Abstract Algebra -> Group Theory",
         "r1_solution_1": "4! = 24", "r1_solution_2": "\\boxed{24}", "r1_solution_3": "\\boxed{24}"},
        {"question": "Decide whether the series converges.", "final_answer": None, "difficulty": 6.0,
         "topic": "Mathematics -> Calculus -> Series", "r1_solution_1": "", "r1_solution_2": "", "r1_solution_3": ""}]),
    "math-lighteval": ("train", pa.schema([("problem", pa.string()), ("level", pa.string()), ("solution", pa.string()),
                                           ("type", pa.string())]), [
        {"problem": "What is the value of $\\sqrt{49} + \\sqrt{16}$?", "level": "Level 1",
         "solution": "$7 + 4 = \\boxed{11}$.", "type": "Prealgebra"},
        {"problem": "Find the sum of all $x$ with $|x - 3| = 5$.", "level": "Level 3",
         "solution": "$x = 8$ or $x = -2$, so the sum is $\\boxed{6}$.", "type": "Algebra"},
        {"problem": "Find the area of the shaded region.", "level": "Level 4",
         "solution": "The area is the difference of the two squares.", "type": "Geometry"}]),
    "gsm8k": ("train", pa.schema([("question", pa.string()), ("answer", pa.string())]), [
        {"question": "Ana has 5 apples and buys 7 more. How many apples does she have?",
         "answer": "She has 5 + 7 = <<5+7=12>>12 apples.\n#### 12"},
        {"question": "A book costs $4. How much do 6 books cost?", "answer": "6 * 4 = <<6*4=24>>24\n#### 24"},
        {"question": "Tom runs 3 miles a day. How far does he run in a week?", "answer": "He runs 21 miles."}]),
}


def write(out: Path = OUT) -> list[Path]:
    written = []
    for name, (split, sch, rows) in FIXTURES.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{split}-00000-of-00001.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=sch), path, compression="snappy")
        written.append(path)
    return written


def differences(out: Path = OUT) -> list[str]:
    """The fixture files under ``out`` whose table differs from what :data:`FIXTURES` makes, and any extra file."""
    bad, expected = [], set()
    for name, (split, sch, rows) in FIXTURES.items():
        path = out / name / f"{split}-00000-of-00001.parquet"
        expected.add(path)
        sink = pa.BufferOutputStream()  # through Parquet and back, as the file was (list fields come back renamed)
        pq.write_table(pa.Table.from_pylist(rows, schema=sch), sink)
        want = pq.read_table(pa.BufferReader(sink.getvalue()))
        if not path.is_file():
            bad.append(f"{path.relative_to(out)}: missing")
        # rows compared by repr: a NaN solve rate (a malformed row) equals itself there, not under == or equals()
        elif not ((got := pq.read_table(path)).schema.equals(want.schema)
                  and repr(got.to_pylist()) == repr(want.to_pylist())):
            bad.append(f"{path.relative_to(out)}: differs")
    bad += [f"{p.relative_to(out)}: not made by this script" for p in sorted(out.rglob("*.parquet")) if p not in expected]
    return bad


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        if bad := differences():
            print(f"{OUT}: " + "; ".join(bad) + " (run: python tests/support/make_preset_fixtures.py --write)", file=sys.stderr)
            sys.exit(1)
    else:
        target = Path(sys.argv[1]) if sys.argv[1:] and sys.argv[1] != "--write" else OUT
        for p in write(target):
            print(p)
