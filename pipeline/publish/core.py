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

Streamed: the problems come from DuckDB in problem order (a range of ids at a time), their rows are
built a chunk at a time and handed to a :class:`Sink` (the stage's sink writes each config's Parquet
shards as they come), so no table is ever whole in memory; :class:`Dataset` then names the written
shards (:class:`pipeline.publish.shards.Shards`), read back a column or a batch at a time.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from pipeline.bands import BANDS, LEARNABLE
from pipeline.errors import PassbandError
from pipeline.publish.shards import Shards
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


INPUT_TABLES = ("problems", "difficulty", "policies", "reformulated_problems", "reformulated_difficulty",
                "reformulated_rejects")


@dataclass(frozen=True)
class Inputs:
    """The tables publish reads, as relations of one DuckDB connection named :data:`INPUT_TABLES` (the main set, the
    reformulated set, the policies of both, and the parents a method made no child for): views over the tables'
    shards in the stage, tables copied from Arrow where a caller has them in memory (:meth:`of_tables`). Nothing is
    read whole: the problems stream through in problem order."""

    con: duckdb.DuckDBPyConnection

    @classmethod
    def of_tables(cls, **tables: pa.Table) -> Inputs:
        """An in-memory connection with ``tables`` under their names (those missing: empty, as declared)."""
        con = duckdb.connect(":memory:")
        for name in INPUT_TABLES:
            table = tables.get(name)
            arrow = table if table is not None else schema(_DECLARED[name]).empty()  # noqa: F841 (read by DuckDB)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")  # a table, not a registration: cursors see it
        return cls(con)


_DECLARED = {"problems": "problems", "difficulty": "difficulty", "policies": "policies",
             "reformulated_problems": "problems", "reformulated_difficulty": "difficulty",
             "reformulated_rejects": "rejects"}


@dataclass(frozen=True)
class Spec:
    policy: str  # primary policy: a name in params.yaml or a policy_id
    bands: tuple[str, ...]
    licenses: Mapping[str, str]  # source name -> license id
    render: Callable[[str], list[dict[str, str]]]  # question -> chat messages
    reformulated_bands: tuple[str, ...] = (LEARNABLE,)  # a reformulation is kept only if re-measured here


class Sink(Protocol):
    """Where the rows go (pipeline.publish.shards.ConfigWriter: Parquet shards per config and split)."""

    def add(self, config: str, split: str, row: dict[str, Any]) -> None: ...

    def finish(self, configs: list[str]) -> dict[str, dict[str, Shards]]: ...


@dataclass
class Dataset:
    primary: dict[str, Any]  # the primary policy's row of the policies table
    policies: list[dict[str, Any]]  # every policy with measurements, by name
    configs: dict[str, dict[str, Shards]]  # config -> Hub split -> its written rows (SCHEMA), train first
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
        for split, rows in self.configs[config].items():
            counts: Counter[str] = Counter()
            for batch in rows.batches(["band"]):
                counts.update(batch.column(0).to_pylist())
            out[split] = dict(counts)
        return out

    def moved(self, old: Path, new: Path) -> None:
        """Every config's files now live under ``new`` instead of ``old``."""
        for splits in self.configs.values():
            for rows in splits.values():
                rows.moved(old, new)


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


_MEASURED_NAMES = tuple(name for name, *_ in _MEASURED)
_SCALARS = tuple(name for name in _MEASURED_NAMES if name != "flag_rates")
_PROBLEM_COLUMNS = ("problem_id", "question", "answer", "solution", "source", "subject", "level", "source_difficulty",
                    "source_difficulty_measure", "parent_id", "method", "metadata", "split")


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


# One set's problems in problem order, and the measurements of them in (problem, policy name) order: two sorted
# streams merged in Python CHUNK problems at a time, a range of problem ids at a time (:func:`_ranges`). DuckDB did
# not spill these sorts reliably: the join sorted at once ran out of memory at 100,000 problems under 256 MB, the
# problems alone at 300,000; a range of PART_BYTES of text sorts in memory.
_RANGE = "($lo IS NULL OR {col} >= $lo) AND ($hi IS NULL OR {col} < $hi)"
_PROBLEMS_SQL = "SELECT {problem_cols} FROM {problems} p WHERE " + _RANGE.format(col="p.problem_id") + " ORDER BY problem_id"
_MEASURED_SQL = """
SELECT d.problem_id, n.name AS d_policy, {measured_cols}
FROM _publish_difficulty d JOIN _publish_names n ON n.policy_id = d.policy_id
WHERE """ + _RANGE.format(col="d.problem_id") + """
ORDER BY d.problem_id, n.name, d.policy_id
"""
PART_BYTES = 64 << 20  # text of a set's problems sorted at a time
CHUNK = 2048  # problems whose rows are built at a time (their parents are looked up together)


def build(inputs: Inputs, *, spec: Spec, sink: Sink) -> Dataset:
    """Join problems with their difficulty, keep the primary policy's kept items, split into configs: every row goes
    to ``sink`` as it is built (a chunk of problems at a time), so memory does not grow with the item count."""
    if unknown := [b for b in (*spec.bands, *spec.reformulated_bands) if b not in BANDS]:
        raise PublishError(f"unknown bands {unknown} in publish.bands; known: {', '.join(BANDS)}")
    con = inputs.con
    policies, measured_ids, primary = _policies(con, spec=spec)
    pol = primary["policy_id"]
    dropped: Counter[str] = Counter()  # main items measured in a band publish.bands leaves out
    published: dict[str, set[str]] = {}  # method -> parents with a kept reformulation
    kept_main = 0
    unmeasured: Counter[bool] = Counter()  # reformulated? -> problems the primary policy has no measurement for
    for table, bands, reformulated in (("problems", spec.bands, False),
                                       ("reformulated_problems", spec.reformulated_bands, True)):
        for chunk in _chunks(con, table):
            for row in _chunk_rows(con, chunk, primary=pol, bands=bands, spec=spec, dropped=dropped,
                                   reformulated=reformulated, unmeasured=unmeasured):
                kept_main += not reformulated
                split = row.pop(SPLIT_KEY)
                if reformulated:
                    sink.add(REFORMULATED_CONFIG, split, row)
                    published.setdefault(row["method"], set()).add(row["parent_id"])
                else:
                    sink.add(DEFAULT_CONFIG, split, row)
                    sink.add(row["band"], split, row)
    if not kept_main:
        raise PublishError(
            f"nothing to publish: policy {primary['name']} ({pol}) measured no main problem in bands {list(spec.bands)} "
            f"({unmeasured[False]} unmeasured, dropped by band: {dict(dropped) or 'none'})"
        )
    verifiers = con.execute("SELECT DISTINCT verifier_id FROM _publish_difficulty WHERE policy_id = ?", [pol]).fetchall()
    return Dataset(
        primary=primary,
        policies=[p for p in policies if p["policy_id"] in measured_ids],
        configs=sink.finish([DEFAULT_CONFIG, *spec.bands, REFORMULATED_CONFIG]),
        unmeasured=unmeasured[False],
        unmeasured_reformulated=unmeasured[True],
        dropped_bands=dict(dropped),
        verifier_ids=sorted(v for (v,) in verifiers),
        reformulation=_reformulation_counts(con, published),
    )


def _policies(con: duckdb.DuckDBPyConnection, *, spec: Spec) -> tuple[list[dict[str, Any]], set[str], dict[str, Any]]:
    """The policies (one per policy_id, by name), those with a measurement, the primary one; and the views the
    stream reads (``_publish_difficulty``: both sets' difficulty; ``_publish_names``; ``_publish_lineage``)."""
    policies = sorted(con.sql("SELECT * FROM policies").to_arrow_table().to_pylist(), key=lambda p: (p["name"], p["policy_id"]))
    policies = list({p["policy_id"]: p for p in policies}.values())
    con.execute("CREATE OR REPLACE VIEW _publish_difficulty AS "
                "SELECT * FROM difficulty UNION ALL BY NAME SELECT * FROM reformulated_difficulty")
    con.execute("CREATE OR REPLACE VIEW _publish_lineage AS "
                "SELECT problem_id, parent_id, source, split FROM problems UNION ALL "
                "SELECT problem_id, parent_id, source, split FROM reformulated_problems")
    names = pa.table({"policy_id": [p["policy_id"] for p in policies],  # noqa: F841 (read by DuckDB)
                      "name": [p["name"] for p in policies]})
    con.execute("CREATE OR REPLACE TABLE _publish_names AS SELECT * FROM names")
    orphan = con.execute("SELECT problem_id, policy_id FROM _publish_difficulty "
                         "WHERE policy_id NOT IN (SELECT policy_id FROM _publish_names) LIMIT 1").fetchall()
    if orphan:
        orphan = orphan[0]
        raise PublishError(f"difficulty row for {orphan[0]} names policy {orphan[1]}, absent from policies")
    measured_ids = {pid for (pid,) in con.execute("SELECT DISTINCT policy_id FROM _publish_difficulty").fetchall()}
    primary = resolve_policy([p for p in policies if p["policy_id"] in measured_ids], spec.policy)
    return policies, measured_ids, primary


def _ranges(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str | None, str | None]]:
    """Ranges [lo, hi) of problem ids (None: open) that split ``table`` into parts of about :data:`PART_BYTES` of
    text, at its ids' quantiles: one scan for the size, one of the ids for the quantiles."""
    ((size,),) = con.execute(f"SELECT coalesce(sum(strlen(question) + strlen(answer) + coalesce(strlen(solution), 0) "
                          f"+ coalesce(strlen(metadata), 0)), 0) FROM {table}").fetchall()
    parts = max(1, -(-int(size) // PART_BYTES))
    if parts == 1:
        return [(None, None)]
    ((bounds,),) = con.execute(f"SELECT quantile_disc(problem_id, {[i / parts for i in range(1, parts)]}) "
                            f"FROM {table}").fetchall()
    bounds = sorted(set(bounds))
    return list(zip([None, *bounds], [*bounds, None], strict=True))


def _chunks(con: duckdb.DuckDBPyConnection, table: str):
    """``table``'s problems in problem order, :data:`CHUNK` at a time: (problem row, its measurements by policy).
    The streams have cursors of their own, so ``con`` answers other queries (a chunk's parents) while they are open."""
    problems = _PROBLEMS_SQL.format(problems=table, problem_cols=", ".join(f"p.{c}" for c in _PROBLEM_COLUMNS))
    measured = _MEASURED_SQL.format(measured_cols=", ".join(f"d.{c} AS d_{c}" for c in _MEASURED_NAMES))
    chunk: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for lo, hi in _ranges(con, table):
        bounds = {"lo": lo, "hi": hi}
        with con.cursor() as problem_cur, con.cursor() as measured_cur:
            rows = _rows(problem_cur.sql(problems, params=bounds).to_arrow_reader(CHUNK))
            by_problem = _rows(measured_cur.sql(measured, params=bounds).to_arrow_reader(CHUNK))
            m = next(by_problem, None)
            for p in rows:
                pid = p["problem_id"]
                while m is not None and m["problem_id"] < pid:  # a measurement of a problem not in the set
                    m = next(by_problem, None)
                mine = []
                while m is not None and m["problem_id"] == pid:
                    mine.append({"policy": m["d_policy"], **_measured({c: m[f"d_{c}"] for c in _MEASURED_NAMES})})
                    m = next(by_problem, None)
                chunk.append((p, mine))
                if len(chunk) >= CHUNK:
                    yield chunk
                    chunk = []
    if chunk:
        yield chunk


def _rows(reader):
    for batch in reader:
        yield from batch.to_pylist()


def _lineage(con: duckdb.DuckDBPyConnection, rows: dict[str, dict]) -> dict[str, dict]:
    """``rows`` and every ancestor of theirs (problem_id, parent_id, source, split), looked up a generation at a time."""
    known = dict(rows)
    want = {r["parent_id"] for r in rows.values() if r["parent_id"]} - known.keys()
    while want:
        found = con.sql("SELECT problem_id, parent_id, source, split FROM _publish_lineage "
                        "WHERE problem_id IN (SELECT unnest($ids))", params={"ids": sorted(want)}).to_arrow_table().to_pylist()
        for r in found:
            known.setdefault(r["problem_id"], r)
        want = {r["parent_id"] for r in found if r["parent_id"]} - known.keys()
    return known


def _chunk_rows(con: duckdb.DuckDBPyConnection, chunk, *, primary: str, bands: tuple[str, ...], spec: Spec,
                dropped: Counter[str], reformulated: bool, unmeasured: Counter[bool]):
    """The rows of the chunk's problems the primary policy measured in ``bands``; a problem it did not measure counts
    in ``unmeasured[reformulated]``, a main problem measured in another band in ``dropped`` (a reformulation's band only names
    the key)."""
    problems = {p["problem_id"]: p for p, _ in chunk}
    everything = _lineage(con, problems) if any(p["parent_id"] for p in problems.values()) else problems
    parents = sorted({p["parent_id"] for p in problems.values() if p["parent_id"]})
    parent_m = {}
    if parents:
        parent_m = {pid: (rate, band) for pid, rate, band in con.execute(
            "SELECT problem_id, pass_rate, band FROM _publish_difficulty WHERE policy_id = ? "
            "AND problem_id IN (SELECT unnest(?))", [primary, parents]).fetchall()}
    for p, measured in chunk:
        pid = p["problem_id"]
        measured.sort(key=lambda r: (r["policy"], r["policy_id"]))
        mine = next((r for r in measured if r["policy_id"] == primary), None)
        if mine is None:
            unmeasured[reformulated] += 1
            continue
        if mine["band"] not in bands:
            dropped[mine["band"]] += 0 if reformulated else 1
            continue
        parent = everything.get(p["parent_id"]) if p["parent_id"] else None
        of_parent = parent_m.get(p["parent_id"]) if p["parent_id"] else None
        top = {k: v for k, v in mine.items() if k != "policy"}
        yield {
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
            "parent_pass_rate": of_parent[0] if of_parent else None,
            "parent_band": of_parent[1] if of_parent else None,
            **top,
            "difficulty": measured,
            SPLIT_KEY: hub_split(p["split"] or (parent or {}).get("split")),
        }


def _reformulation_counts(con: duckdb.DuckDBPyConnection, published: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """Per method (and ``(any)``): hard parents tried (a reformulation, or a reject of the reformulate stage, names
    them), and those with a published child."""
    tried_sql = ("SELECT method, parent_id FROM reformulated_problems UNION "
                 "SELECT source, source_id FROM reformulated_rejects WHERE stage = 'reformulate'")
    tried = dict(con.execute(f"SELECT method, count(DISTINCT parent_id) FROM ({tried_sql}) GROUP BY method").fetchall())
    if not tried:
        return {}
    reformulation = {m: {"parents_tried": tried[m], "parents_with_learnable_child": len(published.get(m, ()))}
                     for m in sorted(tried)}
    ((anywhere,),) = con.execute(f"SELECT count(DISTINCT parent_id) FROM ({tried_sql})").fetchall()
    reformulation["(any)"] = {"parents_tried": anywhere,
                              "parents_with_learnable_child": len(set().union(set(), *published.values()))}
    return reformulation


def _rung_writer(problem: dict[str, Any]) -> dict[str, str | None]:
    """A reformulation's rung and writer, from its metadata (None for main problems and older rows)."""
    if not problem["parent_id"] or not problem["metadata"]:
        return {"rung": None, "writer": None}
    meta = json.loads(problem["metadata"])
    return {"rung": meta.get("rung"), "writer": meta.get("writer")}
