"""The gold lint's precision and recall on real golds: MATH train and test as written, and the same golds garbled.

    python benchmarks/gold_lint_recall.py [--data ../shared/data] [--limit 0] [--examples 8]

Precision: every real gold the text checks flag (no math-verify: ``unparseable`` and ``unparsed_left_side`` are the
stage's own parse checks) is printed with its check and question start, to be read; the flags are few. Recall: the
real golds that hold letters outside LaTeX commands (``x=3, x=-1+\\sqrt{5}``, ``g(x)=x^2+c, where c is an
integer``, ``\\text{7:15 a.m.}``) are garbled the ways the held-out benchmark's were (its golds lost their letters
where they were copied: ``=3,=-1+\\sqrt{5}``, ``g()=+c,wherecisaninteger``; or were cut short: ``7:15a..``), and
per garbling, among the garbled golds that no longer grade the true answer correct (the verifier's own ``grade``:
a lost unit's text is harmless), the share an *unusable* check or the parse check rejects, with the ones missed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from pipeline.gold import GoldError, boxed_gold
from pipeline.ingest.gold_lint import CHECKS
from pipeline.verify.gold_check import gold_parses
from pipeline.verify.grader import grade

REPO = Path(__file__).resolve().parents[1]
TEXT_CHECKS = [c for name, c in CHECKS.items() if name not in ("unparseable", "unparsed_left_side")]
_COMMANDS = re.compile(r"\\[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")


def _letters_outside_commands(gold: str) -> int:
    return len(_LETTER.findall(_COMMANDS.sub("", gold)))


def strip_letters(gold: str) -> str:
    """Every letter outside a LaTeX command removed, and the spaces with them (the held-out set's garbling)."""
    out, i = [], 0
    for m in _COMMANDS.finditer(gold):
        out.append(re.sub(r"[A-Za-z ]", "", gold[i:m.start()]))
        out.append(m.group())
        i = m.end()
    out.append(re.sub(r"[A-Za-z ]", "", gold[i:]))
    return "".join(out)


def cut_short(gold: str) -> str:
    """The gold cut two characters short and ended with two dots (``7:15 a.m.`` -> ``7:15 a..``)."""
    return gold[: max(1, len(gold) - 2)].rstrip() + ".."


def flags(gold: str, question: str) -> list[str]:
    return [c.name for c in TEXT_CHECKS if c.fn(gold, question) is not None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--examples", type=int, default=8)
    args = ap.parse_args()
    golds: list[tuple[str, str]] = []
    for name in ("train", "test"):
        path = args.data / "math" / f"{name}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            try:
                golds.append((boxed_gold(r["solution"]), r["problem"]))
            except GoldError:
                continue
    flagged = [(g, q, f) for g, q in golds if (f := flags(g, q))]
    print(f"real MATH golds: {len(golds)}; flagged by the text checks: {len(flagged)} "
          f"({dict(Counter(x for _, _, f in flagged for x in f))})")
    for g, q, f in flagged:
        print(f"  {f}: {g[:60]!r}  <- {q[:90]!r}")
    unusable = {n for n, c in CHECKS.items() if c.unusable}
    for what, garble, pool in (("letters stripped", strip_letters,
                                [(g, q) for g, q in golds if _letters_outside_commands(g) >= 2]),
                               ("cut short", cut_short, [(g, q) for g, q in golds if len(g) >= 4])):
        changed = [(garble(g), q, g) for g, q in pool if garble(g) != g]
        # harmless: the garbled key still grades the true answer correct (a unit's text lost: "4\\text{}")
        harmful = [(b, q) for b, q, g in changed if grade(b, g).status != "correct"]
        caught = [(b, q) for b, q in harmful if set(flags(b, q)) & unusable or not gold_parses(b)]
        missed = [b for b, q in harmful if not (set(flags(b, q)) & unusable or not gold_parses(b))]
        print(f"{what}: {len(changed)} golds changed, {len(harmful)} of them so the true answer no longer grades "
              f"correct; {len(caught)} of those rejected ({len(caught) / max(1, len(harmful)):.1%}: an unusable "
              f"check or the parse check); missed, e.g.: {missed[: args.examples]}")


if __name__ == "__main__":
    main()
