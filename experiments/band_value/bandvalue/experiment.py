"""The band-value experiment: do passband's bands predict what GRPO training is worth?

Arms of equal size, drawn from the published folder as a user loads it (``datasets.load_dataset(folder,
config)``, train split), once per item draw (``draws``): ``learnable``, ``hard`` (``too_hard`` +
``unsolved``) and ``children`` (``reformulated``: learnable rewrites of hard parents), disjoint; ``random``,
a seeded draw from the whole pool (``default``), independent of the other arms (so it holds each band in the
pool's proportions); and ``online`` (``online_arms``): the whole pool, its prompts drawn during training by
the learnability sampler (:mod:`pipeline.train.sampler`; prior: the pool's measurement, updated online
through the recorder, forgetting on). Each (arm, draw, seed) trains the base policy with TRL's
GRPOTrainer for the same steps (:mod:`pipeline.train.grpo`), its completions cut at the policy's stop
strings before the reward, as the measurement's vLLM cuts them; every GRPO group is recorded
(:mod:`pipeline.train.recorder`, ``records/`` in the checkpoint) and counted: the share of groups whose
rewards differed. Every checkpoint becomes a policy snapshot (model = its folder, revision = sha256 of its
weights) measured on the held-out and out-of-distribution sources by passband's own rollout, verify and
annotate stages, one policy at a time (the base, then each run as soon as it is trained): its samples in
``measure/<name>/`` (DVC's cache), its policies and difficulty tables and training log in ``results/<name>/``,
small and committed to git, so a lost cache costs checkpoints, never a measured result. The report
(:mod:`bandvalue.report`) turns ``results/`` into the arms' tables, the contrasts (a
permutation test over runs, Holm-corrected) and a PNG.

Configuration: ``band_value.yaml`` beside the experiment's ``params.yaml``::

    arms: {learnable: [learnable], hard: [too_hard, unsolved], random: [default], children: [reformulated],
           online: [default]}
    online_arms: [online]  # the sampler over every row of the arm's configs
    arm_size: 16           # items per drawn arm (null: the smallest drawn arm's size)
    draws: [0, 1]          # item draws; each arm is drawn once per draw
    seeds: [0, 1, 2, 3, 4] # GRPO seeds; each (arm, draw) trains once per seed
    heldout_source: heldout
    ood_source: ood
    grpo: {steps: 16, num_generations: 8, prompts_per_step: 1, max_completion_tokens: 48}
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from bandvalue import report as rep
from pipeline import annotate, rollout, verify
from pipeline.config import ConfigError, Model, Params, load_params, parse_options
from pipeline.io import atomic_write_text, read_table
from pipeline.ownership import remove_tree
from pipeline.rollout.policy import resolve_policy
from pipeline.train.grpo import GrpoConfig, newline_token_ids, train_arm, weights_digest
from pipeline.train.recorder import RolloutRecorder
from pipeline.train.sampler import LearnabilitySampler

DEFAULT_CONFIG = "default"
BASE = "base"  # the measured name of the base policy (results/base); a run's is its run_name

__all__ = ["BASE", "DEFAULT_CONFIG", "ExperimentConfig", "OnlineConfig", "arm_path", "base_name", "base_policy",
           "load_config", "measure", "measure_params", "measured_names", "read_arm", "report", "run_name", "runs",
           "select_arms", "train", "train_arm", "write_arms"]


class OnlineConfig(Model):
    """The learnability sampler of an online arm (pipeline/train/sampler.py)."""

    prior_weight: float = Field(1.0, ge=0, description="weight of the pool's measurement (n_correct, n) in the prior")
    decay: float = Field(0.9, gt=0, le=1, description="forgetting per observation of an item (MoPPS)")
    time_decay: float = Field(1.0, gt=0, le=1, description="forgetting of every item per update (1: off)")
    skip_above: float = Field(0.5, gt=0, le=1, description="skip items whose P(all k rewards equal) is above this")


class ExperimentConfig(Model):
    arms: dict[str, list[str]] = Field(description="arm name -> published configs it draws from")
    online_arms: list[str] = Field(default_factory=list, description="arms trained on every row by the sampler")
    online: OnlineConfig = OnlineConfig()
    arm_size: int | None = Field(None, gt=0, description="items per drawn arm (None: the smallest arm's size)")
    draws: list[int] = Field(min_length=1, description="item draws: each drawn arm once per draw")
    seeds: list[int] = Field(min_length=1)
    heldout_source: str
    ood_source: str | None = Field(None, description="a second measured source: out of distribution")
    base_policy: str | None = Field(None, description="policy in params.yaml (None: rollout.policies[0])")
    record_window: int = Field(8, gt=0, description="GRPO steps per recorded policy window")
    arms_dir: str = "data/arms"
    checkpoints_dir: str = "data/checkpoints"
    measure_dir: str = "data/measure"
    results_dir: str = Field("results", description="per measured policy: policies/, difficulty/, train_log.json "
                             "(small, committed to git: what the report reads)")
    report_dir: str = "data/report"
    grpo: GrpoConfig = GrpoConfig()


def load_config(path: str | Path) -> ExperimentConfig:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the experiment config ({exc}); restore it from git") from None
    cfg = parse_options(ExperimentConfig, raw or {}, where=str(path))
    if unknown := [a for a in cfg.online_arms if a not in cfg.arms]:
        raise ConfigError(f"{path}: online_arms {unknown} are not in arms ({', '.join(cfg.arms)}); add them to arms")
    return cfg


def run_name(arm: str, draw: int, seed: int) -> str:
    return f"{arm}-d{draw}-s{seed}"


def runs(cfg: ExperimentConfig) -> dict[str, tuple[str, int, int]]:
    """Every trained policy's name -> (arm, draw, seed), in arm, draw, seed order."""
    return {run_name(a, d, s): (a, d, s) for a in cfg.arms for d in cfg.draws for s in cfg.seeds}


def measured_names(cfg: ExperimentConfig) -> list[str]:
    """Every measured policy's name: ``base``, then the runs."""
    return [BASE, *runs(cfg)]


def arm_path(cfg: ExperimentConfig, *, root: Path, arm: str, draw: int) -> Path:
    return root / cfg.arms_dir / f"d{draw}" / f"{arm}.jsonl"


# --- arms ----------------------------------------------------------------------------------------

def select_arms(configs: dict[str, list[dict[str, Any]]], *, arms: dict[str, list[str]], size: int | None,
                seed: int, online: tuple[str, ...] | list[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """One draw of the arms. Band arms: disjoint, equal size, each a seeded draw from its configs' rows. An arm
    that draws from ``default`` (the whole pool): the same size, drawn from every row of its configs,
    independent of the other arms (it may share items with them). An ``online`` arm: every row, sorted."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for arm, names in arms.items():
        rows = {r["problem_id"]: r for name in names for r in configs[name]}
        pools[arm] = [rows[k] for k in sorted(rows)]
    drawn = [a for a in arms if a not in online]
    if not drawn:
        raise ConfigError("every arm is online: name at least one drawn arm to size the comparison")
    smallest = min(len(pools[a]) for a in drawn)
    n = min(size, smallest) if size else smallest
    if n == 0:
        raise ConfigError(f"an arm has no items: {({a: len(p) for a, p in pools.items()})}; publish more problems")
    out: dict[str, list[dict[str, Any]]] = {}
    used: set[str] = set()
    for arm in drawn:
        whole = DEFAULT_CONFIG in arms[arm]
        pool = pools[arm] if whole else [r for r in pools[arm] if r["problem_id"] not in used]
        if len(pool) < n:
            raise ConfigError(f"arm {arm!r} has {len(pool)} items left, needs {n}")
        out[arm] = random.Random(f"{seed}:{arm}").sample(pool, n)
        if not whole:
            used |= {r["problem_id"] for r in out[arm]}
    for arm in online:
        if not pools[arm]:
            raise ConfigError(f"online arm {arm!r} has no items; publish more problems")
        out[arm] = pools[arm]
    return {arm: out[arm] for arm in arms}


def write_arms(params: Params, cfg: ExperimentConfig, *, root: Path) -> dict[int, dict[str, int]]:
    """The shell: each config loaded with ``datasets.load_dataset(<published folder>, <config>)``; one folder per draw.

    datasets' cache is a fresh temporary folder: its key for a local folder can match an earlier publish's
    (publish writes reproducible files), and a cached copy of another pool would be drawn from."""
    import tempfile

    import datasets
    from datasets import load_dataset

    datasets.disable_progress_bars()
    folder = root / params.paths.published
    names = sorted({n for ns in cfg.arms.values() for n in ns})
    configs = {}
    with tempfile.TemporaryDirectory(prefix="passband-arms-") as cache:
        for name in names:
            try:
                ds = load_dataset(str(folder), name, split="train", cache_dir=cache, keep_in_memory=True)
            except ValueError as exc:
                raise ConfigError(f"{folder}: no config {name!r} with a train split ({exc}); check publish.bands") from None
            configs[name] = [{k: r[k] for k in ("problem_id", "question", "answer", "band", "pass_rate", "level", "n",
                                                "n_correct")} for r in ds]
    sizes = {}
    for draw in cfg.draws:
        arms = select_arms(configs, arms=cfg.arms, size=cfg.arm_size, seed=draw, online=cfg.online_arms)
        for arm, rows in arms.items():
            atomic_write_text(arm_path(cfg, root=root, arm=arm, draw=draw),
                              "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        sizes[draw] = {arm: len(rows) for arm, rows in arms.items()}
    return sizes


def read_arm(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable arm file ({exc}); re-run the arms stage") from None


# --- training ------------------------------------------------------------------------------------

def signal_counter() -> tuple[list[int], Any]:
    """``[groups, groups with a signal]`` and a recorder listener that counts them (a group's rewards differ)."""
    counts = [0, 0]

    def count(observations) -> None:
        for _pid, c, n in observations:
            counts[0] += 1
            counts[1] += 0 < c < n

    return counts, count


def train(params: Params, cfg: ExperimentConfig, *, root: Path, arm: str, draw: int, seed: int):
    """Train one (arm, draw, seed) from the base policy's model with its own prompt template and stop strings;
    record its groups into the checkpoint's ``records/`` and count those with a reward signal."""
    from transformers import AutoTokenizer

    if arm not in cfg.arms:
        raise ConfigError(f"unknown arm {arm!r}; known: {', '.join(cfg.arms)}")
    if draw not in cfg.draws:
        raise ConfigError(f"unknown draw {draw}; band_value.yaml's draws: {cfg.draws}")
    base = base_policy(params, cfg, root=root)
    sampling = base.sampling
    if sampling.max_tokens != cfg.grpo.max_completion_tokens or sampling.temperature != cfg.grpo.temperature:
        raise ConfigError(f"policy {base.name!r} samples max_tokens={sampling.max_tokens}, temperature="
                          f"{sampling.temperature} but grpo has max_completion_tokens={cfg.grpo.max_completion_tokens}, "
                          f"temperature={cfg.grpo.temperature}: train and measure must generate alike; make them equal")
    rows = read_arm(arm_path(cfg, root=root, arm=arm, draw=draw))
    name = run_name(arm, draw, seed)
    out = root / cfg.checkpoints_dir / name
    records = out.with_name(f".{name}.records-tmp")  # passband's own staging name: a killed run's is removed
    remove_tree(records)
    counts, count = signal_counter()
    core = None
    if arm in cfg.online_arms:
        o = cfg.online
        core = LearnabilitySampler([r["problem_id"] for r in rows], successes=[o.prior_weight * r["n_correct"] for r in rows],
                                   failures=[o.prior_weight * (r["n"] - r["n_correct"]) for r in rows], decay=o.decay,
                                   time_decay=o.time_decay, skip_above=o.skip_above, seed=1000 * draw + seed)
    eos = newline_token_ids(AutoTokenizer.from_pretrained(base.model.path)) if "\n" in sampling.stop else None
    rec = RolloutRecorder(records, base_policy=base.row(), run=name, window_steps=cfg.record_window, eos_ids=eos,
                          sampling={**sampling.model_dump(), "top_p": 1.0, "top_k": -1}, verify_options=params.verify,
                          listeners=[count, *([core.update] if core else [])])
    grpo = cfg.grpo.model_copy(update={"seed": seed})
    res = train_arm(rows, model_dir=base.model.path, out_dir=out, config=grpo, render=lambda q: base.render(q).text,
                    reward=rec.reward(), callbacks=[rec.callback()], sampler=core, stop=sampling.stop)
    log = json.loads((out / "train_log.json").read_text(encoding="utf-8"))
    log.update({"groups": counts[0], "groups_with_signal": counts[1], "recorder": {
        "shards": rec.stats.shards, "grading_seconds": round(rec.stats.grading_seconds, 3),
        "recording_seconds": round(rec.stats.recording_seconds, 3)}})
    if core is not None:
        log["sampler"] = core.stats
    atomic_write_text(out / "train_log.json", json.dumps(log, indent=1))
    if records.exists():
        os.replace(records, out / "records")
    return res, counts


def base_name(params: Params, cfg: ExperimentConfig) -> str:
    """The base policy's name in params.yaml: band_value.yaml's ``base_policy``, else rollout.policies[0]."""
    return cfg.base_policy or params.rollout.policies[0]


def base_policy(params: Params, cfg: ExperimentConfig, *, root: Path):
    name = base_name(params, cfg)
    if name not in params.policies:
        raise ConfigError(f"base_policy {name!r} is not in params.yaml's policies")
    return resolve_policy(name, params.policies[name], models_dir=root / params.paths.models)


# --- measurement ---------------------------------------------------------------------------------

def measure_params(params: Params, cfg: ExperimentConfig, *, root: Path, name: str) -> dict[str, Any]:
    """The params that measure one policy, ``base`` or a run's checkpoint, on the held-out (and OOD) source: its
    samples, verdicts and flags in measure/<name>/, its policies and difficulty tables in results/<name>/."""
    if name not in measured_names(cfg):
        raise ConfigError(f"unknown policy {name!r} to measure: {BASE!r} or a run (arm-d<draw>-s<seed>) of "
                          f"band_value.yaml's arms, draws and seeds")
    raw = params.model_dump(mode="json")
    base_key = base_name(params, cfg)
    base = raw["policies"][base_key]
    if name == BASE:
        policies = {base_key: base}
    else:
        folder = Path(cfg.checkpoints_dir) / name
        if not (root / folder).is_dir():
            raise ConfigError(f"{root / folder}: no checkpoint of {name}; train it first (the train stage)")
        policies = {name: {**base, "model": folder.as_posix(), "revision": weights_digest(root / folder)}}
    m, r = f"{cfg.measure_dir}/{name}", f"{cfg.results_dir}/{name}"
    raw["paths"].update({t: f"{m}/{t}" for t in ("rollouts", "verdicts", "flags", "metrics", "plots")})
    raw["paths"].update({"policies": f"{r}/policies", "difficulty": f"{r}/difficulty", "catalog": f"{m}/passband.duckdb"})
    raw["policies"] = policies
    sources = [cfg.heldout_source, *([cfg.ood_source] if cfg.ood_source else [])]
    raw["rollout"].update({"policies": list(policies), "sources": sources, "limit": None})
    return raw


def measure(params: Params, cfg: ExperimentConfig, *, root: Path, name: str, progress: bool = False) -> Path:
    """Measure one policy: write measure/<name>/params.yaml, run passband's rollout, verify and annotate stages
    with it, and copy a run's training log into results/<name>/ beside its tables. Returns results/<name>."""
    path = root / cfg.measure_dir / name / "params.yaml"
    atomic_write_text(path, f"# written by `passband band-value measure --policy {name}`: its held-out measurement\n"
                      + yaml.safe_dump(measure_params(params, cfg, root=root, name=name), sort_keys=False))
    mp = load_params(path)
    with contextlib.chdir(root):  # the checkpoints' model paths are relative to the experiment's folder
        rollout.run(mp, root=root, progress=progress)
        verify.run(mp, root=root, progress=progress)
        annotate.run(mp, root=root, progress=progress)
    out = root / cfg.results_dir / name
    if name != BASE:
        log = root / cfg.checkpoints_dir / name / "train_log.json"
        atomic_write_text(out / "train_log.json", log.read_text(encoding="utf-8"))
    return out


# --- report --------------------------------------------------------------------------------------

def report(params: Params, cfg: ExperimentConfig, *, root: Path) -> Path:
    """report/band_value.{md,json,png} (and band_value_arms.md) from results/: each measured policy's tables and
    each run's training log; one section per measured set (held-out, then OOD)."""
    difficulty, policies, logs, seconds, signal = [], {}, {}, {}, {}
    for name in measured_names(cfg):
        folder = root / cfg.results_dir / name
        pols = read_table(folder / "policies", name="policies").to_pylist()
        if not pols:
            raise ConfigError(f"{folder}: no measurement of {name}; run its measure stage "
                              f"(`dvc repro -s experiments/band_value/dvc.yaml:{_stage(cfg, name)}`)")
        policies.update({r["name"]: r["policy_id"] for r in pols})
        difficulty += read_table(folder / "difficulty", name="difficulty").to_pylist()
        if name == BASE:
            continue
        try:
            saved = json.loads((folder / "train_log.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{folder}/train_log.json: unreadable training log ({exc}); re-run {_stage(cfg, name)}") from None
        logs[name], seconds[name] = saved["log"], saved["seconds"]
        if "groups" in saved:
            signal[name] = (saved["groups"], saved["groups_with_signal"])
    source = {r["problem_id"]: r["source"] for r in read_table(root / params.paths.problems, name="problems").to_pylist()}
    base = base_name(params, cfg)
    trained = runs(cfg)
    out = root / cfg.report_dir
    md, arms_md, sets = [], [], {}
    for name in [cfg.heldout_source, *([cfg.ood_source] if cfg.ood_source else [])]:
        rows_ = [d for d in difficulty if source.get(d["problem_id"]) == name]
        rows = rep.summarize(rows_, policies, base=base, runs=trained, signal=signal)
        cs = rep.contrasts(rows_, policies, base=base, runs=trained)
        md.append(f"## {name}\n\n" + rep.markdown(rows, logs))
        arms_md.append(f"## {name}\n\n" + rep.markdown_arms(rep.by_arm(rows)) + "\n" + rep.markdown_contrasts(cs))
        sets[name] = json.loads(rep.to_json(rows, logs, seconds, cs))
        if name == cfg.heldout_source:
            rep.plot(rows, logs, out / "band_value.png")
    atomic_write_text(out / "band_value.md", "\n".join(md))
    atomic_write_text(out / "band_value_arms.md", "\n".join(arms_md))
    atomic_write_text(out / "band_value.json", json.dumps({"sets": sets}, indent=1, sort_keys=True))
    return out


def _stage(cfg: ExperimentConfig, name: str) -> str:
    """The dvc.yaml stage that measures ``name`` (experiments/band_value/dvc.yaml)."""
    if name == BASE:
        return "measure_base"
    arm, draw, seed = runs(cfg)[name]
    return f"measure@{arm}-{draw}-{seed}"
