"""Annotate on hostile and long model text (chains of thought): every detector bounded, a detector error a recorded row.

Reproductions: ``"1 + " * 1200 + "1 = 1201"`` (RecursionError in the ast evaluator), ``\\sqrt{4^{10^{10}}}`` (sympy
past 60 s at 4.3 GB), ``\\binom{10^{7}}{5000}`` (``ValueError: Exceeds the limit (4300 digits)``), each through the
stage; then every detector on adversarial 32k-token-sized strings, in CPU time (other work on the box does not count).
"""

from __future__ import annotations

import ast
import json
import random
import time
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from cpu_clock import BOUNDED_S, own_cpu, tree_cpu_s

from pipeline.annotate import annotate_tables, run
from pipeline.annotate import core as annotate_core
from pipeline.annotate.detectors import DETECTORS
from pipeline.annotate.flag_runner import DETECTOR_ERROR
from pipeline.arith import MAX_DIGITS, evaluate, show, statements
from pipeline.arith.evaluate import _evaluate_tokens
from pipeline.cli import cli
from pipeline.config import AnnotateConfig, load_params
from pipeline.io import read_table, write_table
from pipeline.schema import schema
from pipeline.verify import verifier_id

PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}}
RECURSION = "1 + " * 1200 + "1 = 1201"
SQRT = r"$\sqrt{4^{10^{10}}} = 2$"
BINOM = r"$\binom{10^{7}}{5000} = 3$"


def build(tmp: Path, problems: list[tuple[str, str, list[tuple[str, str, str | None]]]]) -> str:
    """A project in ``tmp`` with (question, gold, [(completion, status, extracted)]) problems, one policy."""
    (tmp / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    vid = verifier_id(load_params(tmp / "params.yaml").verify)
    probs, rolls, verds = [], [], []
    for i, (q, gold, samples) in enumerate(problems):
        pid = f"p{i}"
        probs.append({"problem_id": pid, "source": "t", "source_id": str(i), "question": q, "answer": gold,
                      "solution": None, "n_duplicates": 0})
        for j, (text, status, ext) in enumerate(samples):
            rolls.append({"problem_id": pid, "policy_id": "pol", "sample_idx": j, "seed": j, "completion": text,
                          "n_tokens": len(text) // 4, "finish_reason": "stop"})
            verds.append({"problem_id": pid, "policy_id": "pol", "sample_idx": j, "verifier_id": vid, "status": status,
                          "extracted": ext, "extractor": "answer_is"})
    write_table(schema("problems").from_rows(probs), tmp / "data/problems/part-0.parquet", name="problems")
    write_table(schema("rollouts").from_rows(rolls), tmp / "data/rollouts/part-0.parquet", name="rollouts")
    write_table(schema("verdicts").from_rows(verds), tmp / "data/verdicts/part-0.parquet", name="verdicts")
    return vid


def flags_of(tmp: Path) -> dict[tuple[str, int], dict[str, dict]]:
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for f in read_table(tmp / "data/flags", name="flags").to_pylist():
        out.setdefault((f["problem_id"], f["sample_idx"]), {})[f["flag"]] = f
    return out


@pytest.mark.timing
def test_the_reproductions_finish_through_the_stage_with_their_records(tmp_path):
    build(tmp_path, [
        ("What is the sum of the ones written in the working?", "1201",
         [(f"{RECURSION}. The answer is 1201.", "correct", "1201"), (" The answer is 7.", "incorrect", "7")]),
        ("What is the square root of 4 to the power 10^10, halved many times?", "2",
         [(f"{SQRT}. The answer is 2.", "correct", "2"), (" The answer is 9.", "incorrect", "9")]),
        ("How many ways, modulo 7, are there?", "3",
         [(f"{BINOM}. The answer is 3.", "correct", "3"), (" The answer is 1.", "incorrect", "1")]),
    ])
    t = tree_cpu_s()
    result = run(load_params(tmp_path / "params.yaml"), root=tmp_path, progress=False, plots=False)
    assert tree_cpu_s() - t < 60  # CPU seconds: sqrt alone ran past 60 s before (4.3 GB in sympy)
    assert result.groups == 3 and result.detector_errors == {}
    flags = flags_of(tmp_path)
    # "1 + ... + 1 = 1201" is a true statement that computes the answer: read, not a crash, and not unsupported
    assert not {DETECTOR_ERROR, "unsupported_answer"} & set(flags.get(("p0", 0), {}))
    # a power tower and a giant binomial are not evaluated: the working does not compute the answer
    for pid in ("p1", "p2"):
        hit = flags[(pid, 0)]["unsupported_answer"]
        assert hit["evidence"].startswith("no true computation gives") and "is not arithmetic" in hit["evidence"]
    m = json.loads((tmp_path / "data/metrics/annotate.json").read_text())
    assert m["detector_errors"] == {}


def test_a_detector_that_raises_is_a_recorded_row_and_counted(tmp_path, monkeypatch):
    class Boom(DETECTORS["repetition_loop"]):
        def detect(self, row: dict):
            if "loop loop" in row["completion"]:
                raise RecursionError("maximum recursion depth exceeded")
            return super().detect(row)

    monkeypatch.setitem(DETECTORS, "repetition_loop", Boom)
    loop = " ".join(["loop"] * 40) + ". The answer is 4."
    build(tmp_path, [("What is 2 + 2?", "4", [(loop, "correct", "4"), (" 2 + 2 = 4. The answer is 4.", "correct", "4"),
                                               (" It is 2 + 2 = 5. The answer is 5.", "incorrect", "5")])])
    result = run(load_params(tmp_path / "params.yaml"), root=tmp_path, progress=False, plots=False)
    assert result.detector_errors == {"repetition_loop": 1}
    flags = flags_of(tmp_path)
    err = flags[("p0", 0)][DETECTOR_ERROR]
    assert err["score"] is None
    assert err["evidence"] == "repetition_loop: error:RecursionError: maximum recursion depth exceeded"
    assert "answer_repetition" not in flags[("p0", 0)] and "unsupported_answer" in flags[("p0", 0)]  # others ran
    m = json.loads((tmp_path / "data/metrics/annotate.json").read_text())
    assert m["detector_errors"] == {"repetition_loop": 1} and m["flags"] == result.flags
    res = CliRunner().invoke(cli, ["annotate", "--params", str(tmp_path / "params.yaml"), "--no-progress", "--no-plots"])
    assert res.exit_code == 0, res.output
    assert "\n  detector errors (rows flagged detector_error): repetition_loop 1\n" in res.output


# -- every detector on adversarial long strings ------------------------------------------------------------------

_LOOP = "Wait, let me recompute 12 * 7 = 84 and check it again carefully. " * 2200  # ~32k tokens, ~140 KB
ADVERSARIAL = {
    "repetition loop (32k tokens)": _LOOP,
    "commas": "," * 100_000,
    "1 + ... (30000)": "1 + " * 30_000 + "1 = 30001",
    "1 + ... (1200)": RECURSION,
    "parens 20000 deep": "(" * 20_000 + "2" + ")" * 20_000 + " = 2",
    "open boxes": "\\boxed{" * 20_000,
    "nested boxes": "\\boxed{" * 20_000 + "5" + "}" * 20_000,
    "long digits": "7" * 100_000 + " = 7 and 3.5" + "1" * 50_000 + "% = 2",
    "answer is 5 (10000)": "The answer is 5. " * 10_000,
    "answer is, dollars": "$ the answer is 5 " * 8_000,
    "unicode junk": "\u202e\u0301\U0001d7d8\u2211\u2260\u00a0\ufffd" * 20_000,
    "spaces": "1" + " " * 100_000 + "answer is 5",
    "equals chain": "1 = " * 30_000,
    "equations (20000)": "".join(f"x + {i} = {i + 1}\n" for i in range(20_000)),  # each one solved: 1.2 s before
    "latex sides": "".join(rf"$\sqrt{{{i}}} \cdot 2^{{{i % 60}}} = {i}$. " for i in range(4000)),
    "power tower": SQRT + " " + BINOM + r" $\frac{10^{9999}}{3}! = 4$ " + "2^2^2^2^2^2^2^2 = 4",
    "hashes": "#### 5\n" * 15_000,
    "thinking flip-flops": "<think>" + "The answer is 5. No, the answer is \\boxed{7}. " * 5_000 + "</think> The answer is 6.",
    "thinking never closed": "<think>" + "</think" * 20_000 + "<think>" * 10_000,
}
ROW = {"problem_id": "p", "policy_id": "q", "sample_idx": 0, "status": "correct", "extracted": "5", "n_tokens": 32_000,
       "finish_reason": "length", "question": "Ana has 5 apples and 12 pears, 7 plums and 84 figs. How many?", "n": 8,
       "n_correct": 4, "pass_rate": 0.5, "ref_steps": 3, "median_correct_steps": 3.0}


@pytest.fixture(scope="module")
def warm_detectors() -> None:
    """Each detector once on a short text first: its first call imports sympy's LaTeX parser (about a second of
    CPU), which is start-up, not the cost of the text the bound is about."""
    text = r"$\sqrt{2} \cdot 2^{3} = 4$. $\frac{1}{2} + (3) = 5$. The answer is \boxed{5}."
    for detector in DETECTORS.values():
        detector().detect({**ROW, "completion": text, "steps": 2})


@pytest.mark.timing
@pytest.mark.parametrize("case", list(ADVERSARIAL))
@pytest.mark.parametrize("name", list(DETECTORS))
def test_every_detector_is_bounded_on_adversarial_text(warm_detectors, name, case):
    text = ADVERSARIAL[case]
    row = {**ROW, "completion": text, "steps": text.count("=")}
    with own_cpu() as spent:
        DETECTORS[name]().detect(row)  # no exception
    assert spent() < BOUNDED_S, f"{name} on {case}"  # each took 10 s to minutes (or raised) before


def test_the_core_on_every_adversarial_row_writes_no_detector_error():
    texts = list(ADVERSARIAL.values())
    rollouts = pa.table({"problem_id": ["p0"] * len(texts), "policy_id": ["pol"] * len(texts),
                         "sample_idx": pa.array(range(len(texts)), pa.int64()), "completion": texts,
                         "n_tokens": pa.array([32_000] * len(texts), pa.int64()), "finish_reason": ["length"] * len(texts)})
    verdicts = pa.table({"problem_id": ["p0"] * len(texts), "policy_id": ["pol"] * len(texts),
                         "sample_idx": pa.array(range(len(texts)), pa.int64()), "verifier_id": ["v"] * len(texts),
                         "status": [("correct", "incorrect")[i % 2] for i in range(len(texts))],
                         "extracted": ["5"] * len(texts)})
    problems = pa.table({"problem_id": ["p0"], "question": [ROW["question"]], "answer": ["5"], "solution": [None]},
                        schema=pa.schema([("problem_id", pa.string()), ("question", pa.string()),
                                          ("answer", pa.string()), ("solution", pa.string())]))
    _, flags = annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(), verifier_id="v")
    assert DETECTOR_ERROR not in flags.column("flag").to_pylist()
    assert "repetition_loop" in flags.column("flag").to_pylist()


def test_long_text_batches_are_sized_by_bytes(monkeypatch):
    """Candidate rows reach Python in batches of about BATCH_TEXT_BYTES of text, not 16k rows of 64 KB each."""
    monkeypatch.setattr(annotate_core, "BATCH_TEXT_BYTES", 1_300_000)  # 20 rows of ~63 KB
    n = 40
    text = "The total is 12 * 7 = 84 and then some more words follow here. " * 1000  # ~64 KB, a loop
    rollouts = pa.table({"problem_id": ["p0"] * n, "policy_id": ["pol"] * n, "sample_idx": pa.array(range(n), pa.int64()),
                         "completion": [text + str(i) for i in range(n)], "n_tokens": pa.array([16_000] * n, pa.int64()),
                         "finish_reason": ["stop"] * n})
    verdicts = pa.table({"problem_id": ["p0"] * n, "policy_id": ["pol"] * n, "sample_idx": pa.array(range(n), pa.int64()),
                         "verifier_id": ["v"] * n, "status": ["incorrect"] * n, "extracted": ["3"] * n})
    problems = pa.table({"problem_id": ["p0"], "question": ["What is 12 * 7?"], "answer": ["84"], "solution": ["12 * 7 = 84"]})
    import duckdb

    con = duckdb.connect()
    for name, t in (("verdicts", verdicts), ("rollouts", rollouts), ("problems", problems)):
        con.register(name, t)
    ann = annotate_core.prepare(con, config=AnnotateConfig(), verifier_id="v")
    sizes: list[int] = []
    hits = list(annotate_core.flag_batches(ann, on_batch=sizes.append))
    assert sizes == [20, 20]
    assert sum(h.num_rows for h in hits) >= n  # every row loops


# -- the evaluator: bounded, iterative, and Python's arithmetic --------------------------------------------------

@pytest.mark.timing
def test_reproductions_in_the_evaluator():
    assert evaluate("1 + " * 1200 + "1") == 1201
    assert evaluate("(" * 20_000 + "3" + ")" * 20_000) == 3
    t = time.process_time()
    assert evaluate(r"\sqrt{4^{10^{10}}}") is None and evaluate(r"\binom{10^{7}}{5000}") is None
    assert evaluate(r"\sqrt{16} + 2") == 6 and evaluate(r"10\frac{1}{12}") == Fraction(121, 12)  # sympy still reads these
    assert time.process_time() - t < 5.0  # minutes and gigabytes before
    assert evaluate("7" * (MAX_DIGITS + 1)) is None and evaluate("7" * MAX_DIGITS) == int("7" * MAX_DIGITS)
    assert evaluate("999999 ^ 64") == 999999 ** 64  # 384 digits: the largest power the rule allows
    assert evaluate("1000001 ^ 2") is None and evaluate("2 ^ 65") is None and evaluate("2 ^ 0.5") is None
    assert evaluate("(10 ^ 60) * (10 ^ 60) * " * 10 + "1") is None  # an intermediate result past MAX_DIGITS
    stmts = statements(" 7" + "0" * 5000 + " + 1 = 2. 3 + 4 = 7.")
    assert [(s.text.endswith("= 2"), s.ok) for s in stmts] == [(True, None), (False, True)]
    assert show(Fraction(10) ** 5000) == f"a number of over {MAX_DIGITS} digits"


def _ast_reference(expr: str) -> Fraction | None:
    """The evaluator before it was bounded (Python's ast), the reference for the iterative one on short expressions."""
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}

    def node_value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return Fraction(node.value) if isinstance(node.value, int) else Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = node_value(node.operand)
            return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp):
            a, b = node_value(node.left), node_value(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Pow):
                if b.denominator != 1 or abs(b) > 64 or abs(a) > 10 ** 6:
                    return None
                return a ** int(b) if a or b >= 0 else None
            op = ops.get(type(node.op))
            if op is None or (isinstance(node.op, ast.Div) and b == 0):
                return None
            return op(a, b)
        return None

    try:
        return node_value(ast.parse(expr, mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def test_the_iterative_evaluator_agrees_with_pythons_parser():
    rng = random.Random(29)
    atoms = ["0", "1", "2", "3", "7", "10", "12", "007", "00", "0.5", "2.", ".25", "1.5", "64", "100"]
    ops = [" + ", " - ", " * ", " / ", " ** ", "**", " % ", " // ", "*", "-", "+", " "]
    checked = 0
    for _ in range(6000):
        parts: list[str] = []
        for _ in range(rng.randint(1, 7)):
            if rng.random() < 0.25:
                parts.append(rng.choice(["-", "+", "(", "-(", "(-"]))
            parts.append(rng.choice(atoms))
            if rng.random() < 0.2:
                parts.append(")")
            parts.append(rng.choice(ops))
        expr = "".join(parts[:-1]).strip()
        want = _ast_reference(expr)
        got = _evaluate_tokens(expr)
        assert (None if got is None else Fraction(got)) == want, expr
        checked += want is not None
    assert checked > 1000  # most random expressions are valid arithmetic, not only syntax errors
