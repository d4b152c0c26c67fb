"""hint_prefix's leak check, conservative vs exact: how many hint_leaks_answer rejections the exact reading keeps.

    .venv/bin/python benchmarks/leak_check.py                  # the main job's hard parents + GSM8K + MATH
    .venv/bin/python benchmarks/leak_check.py --examples 5

For each set of parents, the old single-rung hint (half the solution's steps, no place-value
expansion: ``hint_prefix`` before the ladder) is checked twice: the conservative reading
(every stated number equal to the answer leaks) and the exact one (a number equal to the answer
that the question itself gives, mentioned but not the result of ``=``/``is``, is a restated
given). Prints, per set: parents, rejections under each reading, how many the exact reading
keeps, and examples of kept hints. Sets: the main job's hard parents (needs ``dvc repro``
through annotate: ``data/difficulty``), and the first N items of GSM8K train and MATH train from
``../shared/data``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.config import load_params  # noqa: E402
from pipeline.gold import boxed_gold, gsm8k_gold  # noqa: E402
from pipeline.reformulate.registry import Child, Parent, Skip, build  # noqa: E402


def main_job_parents(root: Path) -> list[Parent]:
    from pipeline.io import read_table
    from pipeline.reformulate.core import select_parents

    params = load_params(root / "params.yaml")
    cfg = params.reformulate
    difficulty = read_table(root / params.paths.difficulty, name="difficulty")
    problems = read_table(root / params.paths.problems, name="problems")
    return select_parents(difficulty, problems, bands=cfg.bands, max_pass_rate=cfg.max_pass_rate)


def shared_parents(file: str, n: int) -> list[Parent]:
    path = REPO.parent / "shared" / "data" / file
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()[:n]):
        obj = json.loads(line)
        if file.startswith("gsm8k"):
            out.append(Parent(f"{file}:{i + 1}", "gsm8k", obj["question"], gsm8k_gold(obj["answer"]), obj["answer"]))
        else:
            out.append(Parent(f"{file}:{i + 1}", "math", obj["problem"], boxed_gold(obj["solution"]), obj["solution"]))
    return out


def compare(name: str, parents: list[Parent], examples: int) -> None:
    opts = {"fractions": [0.5], "expand_arithmetic": False}
    conservative = build("hint_prefix", {**opts, "exact_leak_check": False})
    exact = build("hint_prefix", opts)
    leaks_c = leaks_e = 0
    kept: list[tuple[Parent, Child, Skip]] = []
    for p in parents:
        a, b = conservative.one(p), exact.one(p)
        leaks_c += isinstance(a, Skip) and a.reason == "hint_leaks_answer"
        leaks_e += isinstance(b, Skip) and b.reason == "hint_leaks_answer"
        if isinstance(a, Skip) and a.reason == "hint_leaks_answer" and isinstance(b, Child):
            kept.append((p, b, a))
    print(f"{name}: {len(parents)} parents; hint_leaks_answer conservative {leaks_c}, exact {leaks_e}; "
          f"the exact reading keeps {len(kept)} of the {leaks_c} rejections")
    for p, child, why in kept[:examples]:
        print(f"  {p.problem_id} (answer {p.answer}): hint {child.metadata['hint'][:160]!r}")
        print(f"      conservative: {why.detail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="GSM8K / MATH items per file")
    ap.add_argument("--examples", type=int, default=3)
    args = ap.parse_args()
    if (REPO / "data" / "difficulty").is_dir():
        compare("main job hard parents", main_job_parents(REPO), args.examples)
    for file in ("gsm8k/train.jsonl", "math/train.jsonl"):
        compare(f"{file} (first {args.n})", shared_parents(file, args.n), args.examples)


if __name__ == "__main__":
    main()
