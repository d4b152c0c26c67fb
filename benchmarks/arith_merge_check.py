"""The reformulators' solution reader before and after it joined pipeline/arith.py, on every real solution.

Before, pipeline/reformulate/arithmetic.py had its own evaluator (Python's ``ast``), ``number`` and ``agrees``;
now :func:`pipeline.arith.chain` reads a solution's steps with the flags' evaluator. This loads the old module from
git (the commit before the merge) and compares, on every GSM8K (train, test) and MATH train solution in
../shared/data: each solution's chain (steps, values, spans, or the error), each step's place-value expansion, each
computation's value and each stated number. Prints the counts; exits 1 on any difference.

    .venv/bin/python benchmarks/arith_merge_check.py [--commit 50cc8ba]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline import arith

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
SOURCES = (("gsm8k/train.jsonl", "answer"), ("gsm8k/test.jsonl", "answer"), ("math/train.jsonl", "solution"))


def old_module(commit: str):
    text = subprocess.run(["git", "show", f"{commit}:pipeline/reformulate/arithmetic.py"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_arithmetic.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_arithmetic", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_arithmetic"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def outcome(fn, *args):
    try:
        out = fn(*args)
    except Exception as exc:
        return ("error", type(exc).__name__ == "NotArithmetic", str(exc))
    if isinstance(out, list) and out and hasattr(out[0], "expr"):
        return ("ok", [(s.expr, s.value, s.stated, s.start, s.end) for s in out])
    return ("ok", out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="50cc8ba", help="a commit that still has pipeline/reformulate/arithmetic.py")
    args = ap.parse_args()
    old = old_module(args.commit)
    solutions = [json.loads(line)[key] for rel, key in SOURCES for line in (DATA / rel).open(encoding="utf-8")]
    counts = {"solutions": len(solutions), "valid chains": 0, "steps": 0, "computations": 0, "differences": 0}
    shown = 0
    for text in solutions:
        pairs = [(outcome(old.chain, text), outcome(arith.chain, text))]
        if pairs[0][0][0] == "ok":
            counts["valid chains"] += bool(pairs[0][0][1])
            for expr, value, *_ in pairs[0][0][1] or []:
                counts["steps"] += 1
                step = f"{expr} = {old.fmt(value)}."
                pairs.append((outcome(old.expand_step, step), outcome(arith.expand_step, step)))
        for m in [*old._ANNOTATION.finditer(text), *old._EQUATION.finditer(text)]:
            counts["computations"] += 1
            pairs.append((outcome(old.evaluate, m.group(1)), outcome(arith.step_value, m.group(1))))
            pairs.append((outcome(old.number, m.group(2)), outcome(arith.number, m.group(2))))
        for a, b in pairs:
            if a != b:
                counts["differences"] += 1
                if shown < 10:
                    shown += 1
                    print(f"differs: {text[:120]!r}: before {a}, after {b}")
    print(", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return 1 if counts["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
