"""The pre-registered band-value design (PREREGISTRATION.md): its runs, their item draws and its held-out set.

- **Runs.** ``prereg/design.yaml`` gives the runs an arm; run ``r`` (from ``first_run`` up) is named
  ``<arm>-d<r>-s<r>``: its items are a fresh seeded draw (seed ``r``) and its GRPO seed is ``r``, so no two runs
  share a draw and the run is the unit of every test. The runs are ordered so that any prefix keeps the arms'
  ratio (a session that stops early leaves a balanced, smaller design, never one arm finished and another
  not started).
- **Draws.** A run draws ``arm_size`` items from its arm's published configs (the whole of each config's train
  split, not what another arm left), of the levels the held-out set measures (``levels``: L8-L9 are only ever
  hard and never measured, which tied the band to the skill): runs are independent, so arms need not be
  disjoint within a draw.
- **Held-out and OOD sets disjoint across skills.** The committed sets share no phrasing and no operand tuple
  with the pool within a skill, but 14 of 126 held-out and 5 of 56 OOD items compute a step that some pool
  item's solution also computes (``38 + 47`` is a held-out item and a step of a pool word problem; the
  children arm trains on exactly such steps). :func:`disjoint_items` draws the design's sets from the same
  generator parts and drops every item that shares a solution step with any pool item (and OOD items that
  repeat a held-out item's skill and operands).

    .venv/bin/python experiments/band_value/design.py sets    # writes prereg/heldout.jsonl, prereg/ood.jsonl
    .venv/bin/python experiments/band_value/design.py plan    # the runs in order, as JSON lines
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DESIGN = HERE / "prereg" / "design.yaml"
STEP = re.compile(r"(\d+) ([-+*]) (\d+) = (\d+)\.")
DEFAULT = "default"  # the published config holding the whole pool


def steps(solution: str) -> frozenset[tuple]:
    """The computations a synthetic solution writes out (``a op b = c.``), as (op, operands): the operands
    sorted for + and * (``8 + 2`` is ``2 + 8``), in order for -."""
    out = set()
    for a, op, b, _c in STEP.findall(solution):
        x, y = int(a), int(b)
        out.add((op, x, y) if op == "-" else (op, *sorted((x, y))))
    return frozenset(out)


def shares_a_step(items: Iterable[Any], pool: Iterable[Any]) -> list[Any]:
    """The items some step of whose solution is also a step of some pool item's solution."""
    pool_steps = frozenset().union(*(steps(p.solution) for p in pool))
    return [i for i in items if steps(i.solution) & pool_steps]


def disjoint_items(options: dict, pool: list[Any], *, n_per_level: int, exclude: Iterable[Any] = ()) -> list[Any]:
    """``n_per_level`` items a level from the synthetic generator with ``options`` (its part, seed, levels), none
    sharing a solution step with ``pool`` nor a (skill, operands) with ``exclude``: the generator is asked for
    more items a level until that many survive. A level's half holds a bounded number of operand tuples
    (one-digit products: 18 in the test half); when the generator runs out, the level keeps what survived."""
    from pipeline.ingest.synthetic import SyntheticOptions, generate, operands_of

    pool_steps = frozenset().union(*(steps(p.solution) for p in pool))
    taken = {(i.skill, tuple(sorted(operands_of(i)))) for i in exclude}
    out = []
    for level in options["levels"]:
        kept: list[Any] = []
        n = n_per_level
        while len(kept) < n_per_level:
            try:
                drawn = list(generate(SyntheticOptions(**{**options, "levels": [level], "n_per_level": n})))
            except ValueError:  # the level's half is exhausted: keep every survivor of the last full draw
                break
            kept = [i for i in drawn if not steps(i.solution) & pool_steps
                    and (i.skill, tuple(sorted(operands_of(i)))) not in taken][:n_per_level]
            n += 1
        out += kept
    return out


def design_sets(params_path: Path = HERE / "params.yaml") -> dict[str, list[Any]]:
    """The design's held-out and OOD items: the committed sources' options (part, seed, levels, sizes), the
    items sharing a step with the pool left out, OOD also leaving out held-out's (skill, operands)."""
    from pipeline.config import load_params
    from pipeline.ingest.synthetic import SyntheticOptions, generate

    params = load_params(params_path)
    sources = {s.name: s.options for s in params.ingest.sources}
    pool = list(generate(SyntheticOptions(**sources["pool"])))
    heldout = disjoint_items(sources["heldout"], pool, n_per_level=sources["heldout"]["n_per_level"])
    ood = disjoint_items(sources["ood"], pool, n_per_level=sources["ood"]["n_per_level"], exclude=heldout)
    return {"pool": pool, "heldout": heldout, "ood": ood}


def jsonl(items: list[Any]) -> str:
    return "".join(json.dumps({"question": i.question, "answer": i.answer, "solution": i.solution,
                               "level": i.level, "subject": i.skill}, sort_keys=True) + "\n" for i in items)


# --- runs ----------------------------------------------------------------------------------------

def plan(runs: dict[str, int], *, first_run: int) -> list[dict[str, Any]]:
    """Every run of the design in the order to train them: at each point the arms' counts so far are as close to
    their final ratio as whole runs allow (largest remaining share first), so a prefix is a smaller balanced
    design. Run ``first_run + k`` is the k-th in this order: its item seed and GRPO seed."""
    total = sum(runs.values())
    done = dict.fromkeys(runs, 0)
    out = []
    for k in range(total):
        # the arm furthest behind its share of the runs so far (ties: the order in design.yaml)
        arm = max(runs, key=lambda a: (runs[a] * (k + 1) / total - done[a]) if done[a] < runs[a] else -1e9)
        done[arm] += 1
        r = first_run + k
        out.append({"name": f"{arm}-d{r}-s{r}", "arm": arm, "run": r, "item_seed": r, "grpo_seed": r})
    return out


def draw(configs: dict[str, list[dict[str, Any]]], names: list[str], *, size: int, seed: int,
         levels: list[str] | None = None) -> list[dict[str, Any]]:
    """One run's items: ``size`` rows drawn (seeded) from the union of the named published configs (only rows of
    ``levels`` when given), sorted by problem_id first so the draw does not depend on the configs' row order."""
    rows = {r["problem_id"]: r for name in names for r in configs[name] if levels is None or r["level"] in levels}
    pool = [rows[k] for k in sorted(rows)]
    if len(pool) < size:
        raise ValueError(f"configs {names} hold {len(pool)} items{f' of {levels}' if levels else ''}, a run draws {size}")
    return random.Random(f"prereg:{seed}").sample(pool, size)


def load_design(path: Path = DESIGN) -> dict[str, Any]:
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    if missing := set(cfg["runs"]) - set(cfg["arms"]):
        raise ValueError(f"{path}: runs name arms {sorted(missing)} that arms does not define")
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["sets", "plan"])
    args = ap.parse_args()
    if args.what == "plan":
        cfg = load_design()
        for r in plan(cfg["runs"], first_run=cfg["first_run"]):
            print(json.dumps(r))
        return
    sets = design_sets()
    for name in ("heldout", "ood"):
        path = HERE / "prereg" / f"{name}.jsonl"
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text(jsonl(sets[name]), encoding="utf-8")
        tmp.replace(path)
        print(f"{path.relative_to(HERE)}: {len(sets[name])} items")


if __name__ == "__main__":
    main()
