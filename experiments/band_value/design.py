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

- **Running it.** ``arms`` writes every run's draw (``prereg/data/arms/d<run>/<arm>.jsonl``) from the band-value
  experiment's published folder; ``train NAME`` trains one run with passband's band-value training
  (:func:`bandvalue.experiment.train`, the experiment's ``grpo`` block; a ``signal_gated`` arm with
  :class:`signal_gate.SignalGate` and ``max_groups_per_step`` x its steps as the cap on groups);
  ``measure NAME`` (or ``base``) measures it on the held-out set with ``prereg/params.yaml``, its tables and
  training log into ``prereg/results/NAME``, which ``prereg_analysis.py`` reads. Run them from the repository
  root with the experiment's pinned passband first on the path, one run at a time, in plan order.

    .venv/bin/python experiments/band_value/design.py sets    # writes prereg/heldout.jsonl, prereg/ood.jsonl
    .venv/bin/python experiments/band_value/design.py plan    # the runs in order, as JSON lines
    PYTHONPATH=experiments/band_value/data/passband python experiments/band_value/design.py arms
    PYTHONPATH=experiments/band_value/data/passband python experiments/band_value/design.py train hard-d100-s100
    PYTHONPATH=experiments/band_value/data/passband python experiments/band_value/design.py trained hard-d100-s100
    PYTHONPATH=experiments/band_value/data/passband python experiments/band_value/design.py measure hard-d100-s100
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
PREREG = HERE / "prereg"
DESIGN = PREREG / "design.yaml"
# design name -> its folder (design.yaml, params.yaml, the held-out set, data/, results/): the first design, and the
# gated one (PREREGISTRATION_GATED.md: learnable against the whole pool, both filtered online)
DESIGNS = {"prereg": PREREG, "gated": HERE / "gated"}
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


def gated_sets(root: Path, design: dict[str, Any]) -> dict[str, list[Any]]:
    """A design's pool (every synthetic source of ``<root>/params.yaml``) and its held-out set: the generator options
    of design.yaml's ``heldout``, every item sharing a solution step with the pool left out (no OOD set)."""
    from pipeline.config import load_params
    from pipeline.ingest.synthetic import SyntheticOptions, generate

    params = load_params(root / "params.yaml")
    pool = [i for s in params.ingest.sources if s.kind == "synthetic" for i in generate(SyntheticOptions(**s.options))]
    held = design["heldout"]
    return {"pool": pool, "heldout": disjoint_items(held, pool, n_per_level=held["n_per_level"])}


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


def allocate(mix: dict[str, int], size: int) -> dict[str, int]:
    """``size`` items split over levels in proportion to ``mix`` (level -> count): largest remainders, ties to the
    level first in ``mix``'s order. A level with no items gets none."""
    total = sum(mix.values())
    if total <= 0:
        raise ValueError(f"an empty level mix {mix}: nothing to match")
    quota = {lv: size * n / total for lv, n in mix.items()}
    out = {lv: int(q) for lv, q in quota.items()}
    order = sorted(mix, key=lambda lv: (-(quota[lv] - out[lv]), list(mix).index(lv)))
    for lv in order[: size - sum(out.values())]:
        out[lv] += 1
    return out


def level_mix(rows: Iterable[dict[str, Any]], levels: list[str]) -> dict[str, int]:
    """level -> how many of ``rows`` (distinct problem ids) are of it, in ``levels``' order."""
    seen = {r["problem_id"]: r["level"] for r in rows}
    return {lv: sum(1 for x in seen.values() if x == lv) for lv in levels}


def draw(configs: dict[str, list[dict[str, Any]]], names: list[str], *, size: int, seed: int,
         levels: list[str] | None = None, mix: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One run's items: ``size`` rows drawn (seeded) from the union of the named published configs (only rows of
    ``levels`` when given), sorted by problem_id first so the draw does not depend on the configs' row order.
    ``mix`` (level -> count): drawn within level, ``allocate(mix, size)`` items of each, so the draw has that mix
    of levels (the gated design's random arm copies the learnable band's)."""
    rows = {r["problem_id"]: r for name in names for r in configs[name] if levels is None or r["level"] in levels}
    pool = [rows[k] for k in sorted(rows)]
    if len(pool) < size:
        raise ValueError(f"configs {names} hold {len(pool)} items{f' of {levels}' if levels else ''}, a run draws {size}")
    if mix is None:
        return random.Random(f"prereg:{seed}").sample(pool, size)
    out: list[dict[str, Any]] = []
    for level, n in allocate(mix, size).items():
        here = [r for r in pool if r["level"] == level]
        if len(here) < n:
            raise ValueError(f"configs {names} hold {len(here)} items of {level}, the level mix asks for {n}")
        out += random.Random(f"prereg:{seed}:{level}").sample(here, n)
    return out


def expected_shared(size: int, pool: int) -> float:
    """Items two independent draws of ``size`` from ``pool`` items share on average (each of one draw's items
    is in the other with probability ``size / pool``): how far runs that each draw "their own" items are
    really independent samples of the band."""
    if not 0 < size <= pool:
        raise ValueError(f"a draw of {size} from {pool} items")
    return size * size / pool


def load_design(path: Path = DESIGN) -> dict[str, Any]:
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    if missing := set(cfg["runs"]) - set(cfg["arms"]):
        raise ValueError(f"{path}: runs name arms {sorted(missing)} that arms does not define")
    for arm, like in cfg.get("level_matched", {}).items():
        if arm not in cfg["arms"] or like not in cfg["arms"]:
            raise ValueError(f"{path}: level_matched {arm}: {like} names an arm that arms does not define")
    return cfg


def published_folder(design: dict[str, Any], root: Path) -> Path:
    """Where a design's runs draw from: its own published pool (``published`` in design.yaml, under its folder),
    or the band-value experiment's (the first design)."""
    return root / design["published"] if "published" in design else HERE / "data" / "published"


def find_run(design: dict[str, Any], name: str) -> dict[str, Any]:
    runs = {r["name"]: r for r in plan(design["runs"], first_run=design["first_run"])}
    if name not in runs:
        raise ValueError(f"no run {name!r} in the design; its runs: {', '.join(runs)}")
    return runs[name]


def run_config(design: dict[str, Any], run: dict[str, Any], *, experiment: Path = HERE / "band_value.yaml"):
    """The band-value experiment config that trains and measures exactly this run: its arm (and configs), its
    run number as the only draw and seed, the design's item count and held-out source, no OOD; the
    experiment's ``grpo`` block, with ``max_groups_per_step`` x its steps for a signal-gated arm (the cap on
    groups drawn; the gate stops at the steps)."""
    from bandvalue.experiment import ExperimentConfig
    from pipeline.config import parse_options

    raw = yaml.safe_load(experiment.read_text(encoding="utf-8"))
    arm, r = run["arm"], run["run"]
    raw.update({"arms": {arm: design["arms"][arm]}, "online_arms": [], "arm_size": design["arm_size"],
                "draws": [r], "seeds": [r], "heldout_source": design["heldout_source"], "ood_source": None})
    if arm in design.get("signal_gated", []):
        raw["grpo"] = {**raw["grpo"], "steps": raw["grpo"]["steps"] * design["max_groups_per_step"]}
    return parse_options(ExperimentConfig, raw, where=f"{experiment} for run {run['name']}")


def write_run_arms(configs: dict[str, list[dict[str, Any]]], design: dict[str, Any], *, root: Path = PREREG) -> int:
    """Every run's draw into ``<root>/<arms_dir>/d<run>/<arm>.jsonl``, as the band-value training reads it."""
    from bandvalue.experiment import arm_path
    from pipeline.io import atomic_write_text

    runs = plan(design["runs"], first_run=design["first_run"])
    levels = design.get("levels")
    mixes = {arm: level_mix((r for name in design["arms"][like] for r in configs[name]), levels)
             for arm, like in design.get("level_matched", {}).items()}
    for run in runs:
        rows = draw(configs, design["arms"][run["arm"]], size=design["arm_size"], seed=run["item_seed"],
                    levels=levels, mix=mixes.get(run["arm"]))
        cfg = run_config(design, run)
        atomic_write_text(arm_path(cfg, root=root, arm=run["arm"], draw=run["run"]),
                          "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return len(runs)


def load_published(folder: Path, names: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The published configs' train splits as a user loads them (``datasets.load_dataset``), with a fresh
    datasets cache (a cached copy of another publish could be handed back)."""
    import tempfile

    import datasets

    datasets.disable_progress_bars()
    out = {}
    with tempfile.TemporaryDirectory(prefix="passband-prereg-") as cache:
        for name in sorted(set(names)):
            ds = datasets.load_dataset(str(folder), name, split="train", cache_dir=cache, keep_in_memory=True)
            out[name] = [{k: r[k] for k in ("problem_id", "question", "answer", "band", "pass_rate", "level", "n",
                                            "n_correct")} for r in ds]
    return out


def train_run(name: str, *, root: Path = PREREG, design: dict[str, Any] | None = None,
              experiment: Path = HERE / "band_value.yaml") -> dict[str, int] | None:
    """Train one run with passband's band-value training; a signal-gated arm's training gets the gate as a
    callback, and its counts go to the run's training log. Returns the gate's counts (None: not gated).
    ``experiment``: the band-value config whose ``grpo`` block trains it (a smoke run's fewer steps)."""
    from bandvalue import experiment as bv
    from pipeline.config import load_params
    from pipeline.io import atomic_write_text

    design = design or load_design()
    run = find_run(design, name)
    cfg = run_config(design, run, experiment=experiment)
    params = load_params(root / "params.yaml")
    if run["arm"] not in design.get("signal_gated", []):
        bv.train(params, cfg, root=root, arm=run["arm"], draw=run["run"], seed=run["grpo_seed"])
        return None
    from signal_gate import SignalGate

    gate = SignalGate(cfg.grpo.steps // design["max_groups_per_step"])
    plain = bv.train_arm

    def gated(rows: Any, *, callbacks: Iterable[Any] = (), **kwargs: Any) -> Any:
        return plain(rows, callbacks=[*callbacks, gate], **kwargs)

    bv.train_arm = gated  # band-value training calls its module's train_arm: the gate joins its callbacks
    try:
        bv.train(params, cfg, root=root, arm=run["arm"], draw=run["run"], seed=run["grpo_seed"])
    finally:
        bv.train_arm = plain
    log_path = root / cfg.checkpoints_dir / name / "train_log.json"
    log = json.loads(log_path.read_text(encoding="utf-8"))
    log["signal_gate"] = gate.stats
    atomic_write_text(log_path, json.dumps(log, indent=1))
    return gate.stats


def is_trained(name: str, *, root: Path = PREREG, design: dict[str, Any] | None = None) -> bool:
    """Whether the run's checkpoint is whole: its training log is written last, and a signal-gated run's log holds
    the gate's counts (written after the checkpoint). The runner then measures it without training it again, so
    a run stopped during its measurement loses only the measurement's unfinished shards."""
    design = design or load_design()
    run = find_run(design, name)
    log_path = root / run_config(design, run).checkpoints_dir / name / "train_log.json"
    try:
        log = json.loads(log_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return run["arm"] not in design.get("signal_gated", []) or "signal_gate" in log


def measure_run(name: str, *, root: Path = PREREG, design: dict[str, Any] | None = None) -> Path:
    """Measure the base policy (``base``) or one run's checkpoint on the held-out set: ``<root>/results/<name>``."""
    from bandvalue import experiment as bv
    from pipeline.config import load_params

    design = design or load_design()
    runs = plan(design["runs"], first_run=design["first_run"])
    run = runs[0] if name == bv.BASE else find_run(design, name)
    return bv.measure(load_params(root / "params.yaml"), run_config(design, run), root=root, name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", choices=sorted(DESIGNS), default="prereg",
                    help="prereg: the first design (PREREGISTRATION.md); gated: PREREGISTRATION_GATED.md")
    ap.add_argument("what", choices=["sets", "plan", "arms", "train", "trained", "measure"])
    ap.add_argument("name", nargs="?", help="train, trained, measure: the run (as `plan` names it); measure: or base")
    args = ap.parse_args()
    root = DESIGNS[args.design]
    cfg = load_design(root / "design.yaml")
    if args.what in ("train", "trained", "measure") and not args.name:
        raise SystemExit(f"design.py {args.what}: name the run (design.py plan lists them)")
    if args.what == "plan":
        for r in plan(cfg["runs"], first_run=cfg["first_run"]):
            print(json.dumps(r))
        return
    if args.what == "arms":
        configs = load_published(published_folder(cfg, root), [c for cs in cfg["arms"].values() for c in cs])
        print(f"{write_run_arms(configs, cfg, root=root)} runs' items written under {root / 'data' / 'arms'}")
        return
    if args.what == "train":
        print(json.dumps({"run": args.name, "signal_gate": train_run(args.name, root=root, design=cfg)}))
        return
    if args.what == "trained":  # exit status 0: the run's checkpoint is whole (is_trained)
        raise SystemExit(0 if is_trained(args.name, root=root, design=cfg) else 1)
    if args.what == "measure":
        print(measure_run(args.name, root=root, design=cfg))
        return
    if args.design != "prereg":
        held = gated_sets(root, cfg)["heldout"]
        path = root / "heldout.jsonl"
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text(jsonl(held), encoding="utf-8")
        tmp.replace(path)
        print(f"{path.relative_to(HERE)}: {len(held)} items")
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
