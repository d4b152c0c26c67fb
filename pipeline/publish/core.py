"""Publish core: problems + difficulty (+ reformulations) in, the dataset's rows per config and split out.

Touches no files. One row is one problem, with its measured difficulty under every policy
(``difficulty``, a list keyed by policy) and the *primary* policy's numbers again as top-level
columns, which the per-band configs split on::

    problem_id    p_1c2e...        question  "What is 52 - 27?"   answer "25"
    prompt        [{"role": "user", "content": "What is 52 - 27?\\nPlease reason step by step, ..."}]
    policy_id     pol_9f...        pass_rate 0.375  ci [0.14, 0.69]  band learnable  n 8
    difficulty    [{policy: smollm2-135m-3shot, policy_id: pol_9f..., pass_rate: 0.375, ...}, ...]

Configs: ``default`` (every kept main item), one per band (kept items whose primary band is
that band) and ``reformulated`` (kept reformulations, with their parent's primary numbers).
Kept: measured by the primary policy, with a band in ``publish.bands``. The Hub split of a
row is its source's split (``train`` when the source has none), so test items never land in
a train split.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipeline.bands import BANDS, LEARNABLE
from pipeline.errors import PassbandError
from pipeline.schema import schema

DEFAULT_CONFIG = "default"
REFORMULATED_CONFIG = "reformulated"
UNKNOWN_LICENSE = "unknown"
SPLIT_KEY = "__split__"  # internal: the Hub split of a row, dropped before writing

MESSAGE = pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])
FLAG_RATE = pa.struct([pa.field("flag", pa.string()), pa.field("rate", pa.float64())])



def _declared(table: str, column: str, *, name: str | None = None) -> tuple[str, pa.DataType, bool, str]:
    """A column as schemas/<table>.yaml declares it (type, nullability, description), optionally renamed."""
    c = next(c for c in schema(table).columns if c.name == column)
    return (name or c.name, c.arrow_type, c.nullable, c.description)


# (name, type, nullable, description): one per measured quantity, shared by the per-policy struct
# and the primary policy's top-level columns. Declared in schemas/difficulty.yaml, except flag_rates:
# a map there, a list of {flag, rate} here (🤗 datasets has no map feature).
_MEASURED: list[tuple[str, pa.DataType, bool, str]] = [
    *[_declared("difficulty", c) for c in ("policy_id", "verifier_id", "n", "n_correct", "pass_rate", "ci_low",
                                           "ci_high", "band", "band_confidence", "learnability")],
    ("flag_rates", pa.list_(FLAG_RATE), False, "per shortcut/degeneracy flag, the share of rollouts it fired on"),
    _declared("difficulty", "flagged_correct_rate"),
    *[_declared("difficulty", c) for c in ("mean_thinking_chars", "unfinished_thinking_rate")],
    # so a trainer can drop the items whose answer key the rollouts doubt (docs/tables.md#suspect-golds)
    *[_declared("difficulty", c) for c in ("gold_suspicion", "gold_suspect")],
]

POLICY_DIFFICULTY = pa.struct(
    [pa.field("policy", pa.string(), nullable=False)] + [pa.field(n, t, nullable=nl) for n, t, nl, _ in _MEASURED]
)

COLUMNS: list[tuple[str, pa.DataType, bool, str]] = [
    _declared("problems", "problem_id"),
    ("prompt", pa.list_(MESSAGE), False, "chat messages to train on (publish.prompt_template rendered)"),
    *[_declared("problems", c) for c in ("question", "answer")],
    _declared("problems", "solution", name="reference_solution"),
    *[_declared("problems", c) for c in ("source", "subject", "level", "source_difficulty", "source_difficulty_measure")],
    ("license", pa.string(), False, "license of the item (of its parent, for a reformulation)"),
    *[_declared("problems", c) for c in ("parent_id", "method")],
    ("rung", pa.string(), True, "reformulations: the ladder rung kept (hint fraction, backward question kind)"),
    ("writer", pa.string(), True, "reformulations: who wrote it (rules, or the writing model)"),
    ("parent_pass_rate", pa.float64(), True, "reformulations: the parent's pass rate under the primary policy"),
    ("parent_band", pa.string(), True, "reformulations: the parent's band under the primary policy"),
    *[(n, t, nl, f"primary policy: {d}") for n, t, nl, d in _MEASURED],
    ("difficulty", pa.list_(POLICY_DIFFICULTY), False, "every policy's measurement of this item, sorted by policy name"),
]

SCHEMA = pa.schema([pa.field(n, t, nullable=nl) for n, t, nl, _ in COLUMNS])
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


class PublishError(PassbandError):
    """The tables cannot be published as configured."""


@dataclass(frozen=True)
class Inputs:
    """The tables publish reads: the main set, the reformulated set and the policies."""

    problems: pa.Table
    difficulty: pa.Table
    policies: pa.Table
    reformulated_problems: pa.Table
    reformulated_difficulty: pa.Table
    reformulated_rejects: pa.Table | None = None  # the parents a method made no child for (for the card's counts)


@dataclass(frozen=True)
class Spec:
    policy: str  # primary policy: a name in params.yaml or a policy_id
    bands: tuple[str, ...]
    licenses: Mapping[str, str]  # source name -> license id
    render: Callable[[str], list[dict[str, str]]]  # question -> chat messages
    reformulated_bands: tuple[str, ...] = (LEARNABLE,)  # a reformulation is kept only if re-measured here


@dataclass
class Dataset:
    primary: dict[str, Any]  # the primary policy's row of the policies table
    policies: list[dict[str, Any]]  # every policy with measurements, by name
    configs: dict[str, dict[str, pa.Table]]  # config -> Hub split -> rows (SCHEMA)
    unmeasured: int  # main problems the primary policy has no difficulty for
    unmeasured_reformulated: int = 0  # reformulations not (yet) measured by the primary policy
    dropped_bands: dict[str, int] = field(default_factory=dict)  # measured but band not kept
    verifier_ids: list[str] = field(default_factory=list)
    # method -> hard parents tried, and those with a published (re-measured) child
    reformulation: dict[str, dict[str, int]] = field(default_factory=dict)

    def rows(self, config: str) -> int:
        return sum(t.num_rows for t in self.configs[config].values())

    def band_counts(self, config: str = DEFAULT_CONFIG) -> dict[str, dict[str, int]]:
        """split -> band -> rows, for the primary policy."""
        out: dict[str, dict[str, int]] = {}
        for split, table in self.configs[config].items():
            out[split] = dict(Counter(table.column("band").to_pylist()))
        return out


def resolve_policy(policies: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The policies-table row named (or keyed) ``wanted``; an unknown or ambiguous name is an error."""
    by_id = [p for p in policies if p["policy_id"] == wanted]
    if by_id:
        return by_id[0]
    named = [p for p in policies if p["name"] == wanted]
    if len(named) == 1:
        return named[0]
    if not named:
        known = sorted({f"{p['name']} ({p['policy_id']})" for p in policies})
        raise PublishError(f"primary policy {wanted!r} has no measurements; measured policies: {known or 'none'}")
    ids = sorted(p["policy_id"] for p in named)
    raise PublishError(
        f"policy name {wanted!r} names several snapshots {ids} (its parameters changed between runs); "
        "set publish.policy to one policy_id"
    )


def hub_split(split: str | None) -> str:
    name = split or "train"
    if not _SPLIT_NAME.match(name):
        raise PublishError(f"split {name!r} is not a valid Hub split name (letters, digits, _ and . only)")
    return name


def _flag_rates(rates) -> list[dict[str, Any]]:
    pairs = rates.items() if isinstance(rates, dict) else (rates or [])
    return [{"flag": k, "rate": float(v)} for k, v in sorted(pairs)]


_SCALARS = tuple(name for name, *_ in _MEASURED if name != "flag_rates")


def _measured(row: dict[str, Any]) -> dict[str, Any]:
    out = {name: row[name] for name in _SCALARS}
    out["flag_rates"] = _flag_rates(row["flag_rates"])
    return out


def _license(pid: str, problems: Mapping[str, dict], licenses: Mapping[str, str]) -> str:
    """An item's license is its source's; a reformulation's is its root parent's (a derivative work)."""
    seen = set()
    row = problems.get(pid)
    while row is not None and row.get("parent_id") and row["parent_id"] not in seen:
        seen.add(row["problem_id"])
        parent = problems.get(row["parent_id"])
        if parent is None:
            return UNKNOWN_LICENSE
        row = parent
    if row is None:
        return UNKNOWN_LICENSE
    return licenses.get(row["source"], UNKNOWN_LICENSE)


def build(inputs: Inputs, *, spec: Spec) -> Dataset:
    """Join problems with their difficulty, keep the primary policy's kept items, split into configs."""
    if unknown := [b for b in (*spec.bands, *spec.reformulated_bands) if b not in BANDS]:
        raise PublishError(f"unknown bands {unknown} in publish.bands; known: {', '.join(BANDS)}")
    m = _measurements(inputs, spec=spec)
    main = {r["problem_id"]: r for r in inputs.problems.to_pylist()}
    reform = {r["problem_id"]: r for r in inputs.reformulated_problems.to_pylist()}
    everything = {**main, **reform}
    dropped: Counter[str] = Counter()  # main items measured in a band publish.bands leaves out
    kept_main, unmeasured = _kept_rows(main, m, everything=everything, bands=spec.bands, spec=spec, dropped=dropped)
    kept_reform, unmeasured_reform = _kept_rows(reform, m, everything=everything, bands=spec.reformulated_bands,
                                                spec=spec, dropped=dropped, reformulated=True)
    pol = m.primary["policy_id"]
    if not kept_main:
        raise PublishError(
            f"nothing to publish: policy {m.primary['name']} ({pol}) measured no main problem in bands {list(spec.bands)} "
            f"({unmeasured} unmeasured, dropped by band: {dict(dropped) or 'none'})"
        )

    configs = {DEFAULT_CONFIG: _by_split(kept_main)}
    for band in spec.bands:
        configs[band] = _by_split([r for r in kept_main if r["band"] == band])
    configs[REFORMULATED_CONFIG] = _by_split(kept_reform)
    return Dataset(
        primary=m.primary,
        policies=[p for p in m.policies if p["policy_id"] in m.measured_ids],
        configs=configs,
        unmeasured=unmeasured,
        unmeasured_reformulated=unmeasured_reform,
        dropped_bands=dict(dropped),
        verifier_ids=sorted({r["verifier_id"] for r in m.primary_of.values() if r is not None}),
        reformulation=_reformulation_counts(reform, inputs.reformulated_rejects, kept_reform),
    )


@dataclass(frozen=True)
class _Measurements:
    """Every policy's difficulty rows per problem, and the primary policy's own."""

    policies: list[dict[str, Any]]  # the policies table's rows, one per policy_id, by name
    measured_ids: set[str]  # policies with a difficulty row
    primary: dict[str, Any]
    per_problem: dict[str, list[dict[str, Any]]]  # problem_id -> each policy's measurement, by policy name
    primary_of: dict[str, dict[str, Any] | None]  # problem_id -> the primary policy's measurement


def _measurements(inputs: Inputs, *, spec: Spec) -> _Measurements:
    policies = sorted(inputs.policies.to_pylist(), key=lambda p: (p["name"], p["policy_id"]))
    policies = list({p["policy_id"]: p for p in policies}.values())
    names = {p["policy_id"]: p["name"] for p in policies}
    difficulty = inputs.difficulty.to_pylist() + inputs.reformulated_difficulty.to_pylist()
    measured_ids = {d["policy_id"] for d in difficulty}
    primary = resolve_policy([p for p in policies if p["policy_id"] in measured_ids], spec.policy)

    per_problem: dict[str, list[dict[str, Any]]] = {}
    for d in difficulty:
        if d["policy_id"] not in names:
            raise PublishError(f"difficulty row for {d['problem_id']} names policy {d['policy_id']}, absent from policies")
        per_problem.setdefault(d["problem_id"], []).append({"policy": names[d["policy_id"]], **_measured(d)})
    for rows in per_problem.values():
        rows.sort(key=lambda r: (r["policy"], r["policy_id"]))
    primary_of = {pid: next((r for r in rows if r["policy_id"] == primary["policy_id"]), None)
                  for pid, rows in per_problem.items()}
    return _Measurements(policies, measured_ids, primary, per_problem, primary_of)


def _kept_rows(problems: dict[str, dict], m: _Measurements, *, everything: Mapping[str, dict], bands: tuple[str, ...],
               spec: Spec, dropped: Counter[str], reformulated: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The rows of the problems the primary policy measured in ``bands``, and how many it did not measure; a main
    problem measured in another band counts in ``dropped`` (a reformulation's band only names the key)."""
    out = []
    unmeasured = 0
    for pid in sorted(problems):
        p = problems[pid]
        mine = m.primary_of.get(pid)
        if mine is None:
            unmeasured += 1
            continue
        if mine["band"] not in bands:
            dropped[mine["band"]] += 0 if reformulated else 1
            continue
        parent = everything.get(p["parent_id"]) if p["parent_id"] else None
        parent_m = m.primary_of.get(p["parent_id"]) if p["parent_id"] else None
        top = {k: v for k, v in mine.items() if k != "policy"}
        out.append({
            "problem_id": pid,
            "prompt": spec.render(p["question"]),
            "question": p["question"],
            "answer": p["answer"],
            "reference_solution": p["solution"],
            "source": p["source"],
            "subject": p["subject"],
            "level": p["level"],
            "source_difficulty": p["source_difficulty"],
            "source_difficulty_measure": p["source_difficulty_measure"],
            "license": _license(pid, everything, spec.licenses),
            "parent_id": p["parent_id"],
            "method": p["method"],
            **_rung_writer(p),
            "parent_pass_rate": parent_m["pass_rate"] if parent_m else None,
            "parent_band": parent_m["band"] if parent_m else None,
            **top,
            "difficulty": m.per_problem[pid],
            SPLIT_KEY: hub_split(p["split"] or (parent or {}).get("split")),
        })
    return out, unmeasured


def _by_split(rows: list[dict[str, Any]]) -> dict[str, pa.Table]:
    """One table per Hub split, train first then the others by name; an empty config still loads (one empty train)."""
    splits: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        splits.setdefault(r[SPLIT_KEY], []).append({k: v for k, v in r.items() if k != SPLIT_KEY})
    if not splits:
        return {"train": SCHEMA.empty_table()}
    order = sorted(splits, key=lambda s: (s != "train", s))
    return {s: pa.Table.from_pylist(splits[s], schema=SCHEMA) for s in order}


def _reformulation_counts(reform: Mapping[str, dict], rejects: pa.Table | None,
                          kept: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per method (and ``(any)``): hard parents tried, and those with a published child."""
    tried: dict[str, set[str]] = {}
    for r in reform.values():
        tried.setdefault(r["method"], set()).add(r["parent_id"])
    if rejects is not None:
        for r in rejects.to_pylist():
            if r["stage"] == "reformulate":
                tried.setdefault(r["source"], set()).add(r["source_id"])
    published: dict[str, set[str]] = {}
    for r in kept:
        published.setdefault(r["method"], set()).add(r["parent_id"])
    reformulation = {m: {"parents_tried": len(ps), "parents_with_learnable_child": len(published.get(m, ()))}
                     for m, ps in sorted(tried.items())}
    if tried:
        reformulation["(any)"] = {"parents_tried": len(set().union(*tried.values())),
                                  "parents_with_learnable_child": len(set().union(set(), *published.values()))}
    return reformulation


def _rung_writer(problem: dict[str, Any]) -> dict[str, str | None]:
    """A reformulation's rung and writer, from its metadata (None for main problems and older rows)."""
    if not problem["parent_id"] or not problem["metadata"]:
        return {"rung": None, "writer": None}
    meta = json.loads(problem["metadata"])
    return {"rung": meta.get("rung"), "writer": meta.get("writer")}
