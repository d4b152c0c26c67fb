"""The ``rollouts`` config: every published item's completions, one row per item and policy.

A row holds the completions the item's pass rate was counted from (the first ``n`` samples,
at most ``publish.max_rollouts_per_item``), in sample order, with what passband found in each::

    problem_id p_1c2e...   problem "What is 52 - 27?"   answer "25"   source synthetic
    policy smollm2-135m-3shot   policy_id pol_9f...   verifier_id math-verify/0.8.0/cfg_...
    generations ["52 - 27 = 25. The answer is 25.", "The answer is 35.", ...]
    correctness_math_verify [true, false, ...]   verdicts ["correct", "incorrect", ...]
    extracted_answers ["25", "35", ...]   flags [[], ["unsupported_answer"], ...]   finish_reasons ["stop", ...]

The columns OpenR1-Math-220k also has (``problem``, ``solution``, ``answer``, ``source``,
``generations``, ``correctness_math_verify``, ``correctness_count``, ``finish_reasons``) have its
names, types and meaning, so code written for it selects correct generations here too.

Built streaming, never the whole rollouts table in memory, nor its text in DuckDB: DuckDB joins every set's
rollout keys to their verdicts (of the verifier the item's difficulty row names) and flags and sorts them by
(split, item, policy, sample) under a memory limit (it spills past it); the completions' sizes are read with
pyarrow, each sample is given its place in the config and a bucket of consecutive places (:data:`BUCKET_BYTES`
of text), one pass over the shards copies each completion into its bucket's file in a spill folder, and the
rows are built reading back one bucket at a time, grouped into rows and written shard by shard.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline import text_gather
from pipeline.catalog import open_views
from pipeline.config import ConfigError, Params
from pipeline.publish.core import DEFAULT_CONFIG, REFORMULATED_CONFIG, Dataset
from pipeline.publish.shards import SplitWriter
from pipeline.rollout.prompts import load_template, render
from pipeline.sqltext import sql_list, sql_literal
from pipeline.text_gather import register_keys, rows_in_order, scatter, with_text

CONFIG = "rollouts"
MEMORY_LIMIT_MB = 512  # DuckDB's limit for the keys' join and sort; it spills to the spill folder past it
SHARD_BYTES = 256 << 20  # a shard also stops at this much completion text (the Hub's viewer wants shards < ~500 MB)
ROW_GROUP = 256  # rows per Parquet row group, fixed so the files do not depend on DuckDB's batch sizes
BUCKET_BYTES = text_gather.BUCKET_BYTES  # completion text gathered per bucket (pipeline/text_gather.py)

# (name, type, nullable, description): the card's column table is read from here
COLUMNS: list[tuple[str, pa.DataType, bool, str]] = [
    ("problem_id", pa.string(), False, "problem key (the same item in every other config)"),
    ("problem", pa.string(), False, "the question, bare (as in every other config)"),
    ("prompt", pa.string(), True, "the text the policy was given: the question inside its prompt template (null: a chat "
                                  "template, which the model's tokenizer renders; see the card's Policy section)"),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])), True,
     "the conversation an SFT trainer takes: the bare question, then the first correct generation no flag fired on "
     "but rare_success (null: none)"),
    ("answer", pa.string(), False, "gold answer the verdicts were graded against"),
    ("solution", pa.string(), True, "the source's reference solution, where it has one"),
    ("source", pa.string(), False, "source name (params.yaml ingest.sources)"),
    ("policy", pa.string(), False, "policy name"),
    ("policy_id", pa.string(), False, "policy snapshot key (model, revision, prompt, sampling)"),
    ("verifier_id", pa.string(), False, "verifier whose verdicts these are (the one the item's pass rate came from)"),
    ("pass_rate", pa.float64(), False, "this policy's pass rate on the item (over all counted rollouts)"),
    ("band", pa.string(), False, "this policy's band for the item"),
    ("n_rollouts", pa.int64(), False, "rollouts the pass rate counts; `generations` holds the first of them"),
    ("generations", pa.list_(pa.string()), False, "completions, in sample order (sample_idx 0, 1, ...)"),
    ("finish_reasons", pa.list_(pa.string()), False, "per generation: stop (stop string or EOS) or length (max_tokens)"),
    ("is_reasoning_complete", pa.list_(pa.bool_()), False,
     "per generation: it stopped by itself (not at max_tokens) and closed any thinking block it opened"),
    ("generation_token_length", pa.list_(pa.int64()), False, "per generation: tokens generated"),
    ("verdicts", pa.list_(pa.string()), False, "per generation: correct | incorrect | no_answer | timeout | error"),
    ("correctness_math_verify", pa.list_(pa.bool_()), False, "per generation: verdict is correct (math-verify)"),
    ("correctness_count", pa.int64(), False, "correct generations in this row"),
    ("extracted_answers", pa.list_(pa.string()), False, "per generation: the final answer read from it (null: none)"),
    ("flags", pa.list_(pa.list_(pa.string())), False, "per generation: the flags that fired on it (empty: none)"),
]
SCHEMA = pa.schema([pa.field(n, t, nullable=nl) for n, t, nl, _ in COLUMNS])

# One row per counted sample of a published item, without its text: where the text is (shard file and row), its
# size, its place in the config (``pos``: sorted so a row of the config is a run of consecutive samples) and the
# bucket its text is gathered in (consecutive positions, about BUCKET_BYTES of text each). DuckDB reads keys and a
# few short columns only (the sizes come from pyarrow, _publish_sizes): the completions never pass through it.
SAMPLES_SQL = """
CREATE TEMP TABLE _samples AS
WITH f AS (
    SELECT problem_id, policy_id, sample_idx, list(flag ORDER BY flag) AS flags FROM flags GROUP BY ALL
), s AS (
    SELECT row_number() OVER (ORDER BY i.split_order, i.split, i.problem_id, i.policy, i.policy_id, i.item,
                              r.sample_idx) - 1
               AS pos,
           i.item, r.sample_idx, r.file, r.file_row, r.size, r.finish_reason, r.n_tokens, v.status, v.extracted,
           v.thinking_closed,
           coalesce(f.flags, []::VARCHAR[]) AS flags
    FROM _publish_items i
    JOIN _publish_keys r ON r.problem_id = i.problem_id AND r.policy_id = i.policy_id AND r.sample_idx < least(i.n, $max)
    LEFT JOIN verdicts v ON v.problem_id = r.problem_id AND v.policy_id = r.policy_id AND v.sample_idx = r.sample_idx
                        AND v.verifier_id = i.verifier_id
    LEFT JOIN f ON f.problem_id = r.problem_id AND f.policy_id = r.policy_id AND f.sample_idx = r.sample_idx
)
SELECT *, {bucket_sql}
FROM s
"""


@dataclass
class RolloutsSummary:
    """What the config holds, for the card and build.json."""

    rows: dict[str, int] = field(default_factory=dict)  # split -> rows
    generations: int = 0
    correct: int = 0
    correct_unflagged: int = 0
    truncated_rows: int = 0  # rows whose item has more counted rollouts than the bound keeps
    bytes: int = 0  # on disk
    files: dict[str, str] = field(default_factory=dict)  # split -> data_files glob
    written: list[str] = field(default_factory=list)  # every shard, relative to the folder
    max_per_item: int = 0

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def as_dict(self) -> dict:
        return {"rows": self.rows, "generations": self.generations, "correct": self.correct,
                "correct_unflagged": self.correct_unflagged, "truncated_rows": self.truncated_rows,
                "bytes": self.bytes, "max_rollouts_per_item": self.max_per_item}


# One row per published item (main and reformulated) and policy that measured it, numbered in the config's order:
# what the samples join on. DuckDB reads it from the configs' shards already written (a table of the database, not
# of the connection, so a second cursor reads it while the samples stream).
ITEMS_SQL = """
CREATE OR REPLACE TABLE _publish_items AS
SELECT *, row_number() OVER (ORDER BY split_order, split, problem_id, policy, policy_id) - 1 AS item
FROM (
    SELECT split, problem_id, question AS problem, answer, reference_solution AS solution, source, d.policy,
           d.policy_id, d.verifier_id, d.band, d.pass_rate, d.n, CASE WHEN split = 'train' THEN 0 ELSE 1 END AS split_order
    FROM (SELECT *, unnest(difficulty) AS d FROM ({shards}))
)
"""


def create_items(con: duckdb.DuckDBPyConnection, dataset: Dataset) -> None:
    """The table ``_publish_items`` (:data:`ITEMS_SQL`) from the default and reformulated configs' shards."""
    parts = [f"SELECT {sql_literal(split)} AS split, * FROM read_parquet({sql_list([str(f) for f in rows.files])})"
             for config in (DEFAULT_CONFIG, REFORMULATED_CONFIG)
             for split, rows in dataset.configs[config].items() if rows.files]
    con.execute(ITEMS_SQL.format(shards=" UNION ALL BY NAME ".join(parts)))


SFT_IGNORED_FLAGS = frozenset({"rare_success"})  # a risk for GRPO, not a fault of the text: kept for SFT


def _row(group: list[dict], prompts: dict[str, Any]) -> dict:
    first = group[0]
    verdicts = [g["status"] for g in group]
    clean = next((g["completion"] for g in group if g["status"] == "correct" and not set(g["flags"]) - SFT_IGNORED_FLAGS),
                 None)
    render = prompts.get(first["policy_id"])
    return {
        **{k: first[k] for k in ("problem_id", "problem", "answer", "solution", "source", "policy", "policy_id",
                                 "verifier_id", "pass_rate", "band", "n_rollouts")},
        "prompt": render(first["problem"]) if render else None,
        "messages": None if clean is None else [{"role": "user", "content": first["problem"]},
                                                {"role": "assistant", "content": clean}],
        "generations": [g["completion"] for g in group],
        "finish_reasons": [g["finish_reason"] for g in group],
        "is_reasoning_complete": [g["finish_reason"] == "stop" and g["thinking_closed"] is not False for g in group],
        "generation_token_length": [g["n_tokens"] for g in group],
        "verdicts": verdicts,
        "correctness_math_verify": [v == "correct" for v in verdicts],
        "correctness_count": sum(v == "correct" for v in verdicts),
        "extracted_answers": [g["extracted"] for g in group],
        "flags": [g["flags"] for g in group],
    }


def prompt_renderers(policies: list[dict[str, Any]]) -> dict[str, Any]:
    """policy_id -> a function giving the text the policy was given for a question (its template, its system prompt),
    for the policies whose template renders text; a chat template's text needs the model's tokenizer: none."""
    out: dict[str, Any] = {}
    for p in policies:
        try:
            template = load_template(p["prompt_template"])
        except ConfigError:  # a template of a plugin not loaded here
            continue
        if template.chat or template.apply_chat_template or template.version != p["prompt_version"]:
            continue
        system = p.get("system_prompt")
        out[p["policy_id"]] = lambda q, t=template, s=system: render(t, q, system=s).text
    return out


def _items(cur: duckdb.DuckDBPyConnection):
    """``_publish_items``' rows in item order: (item, its columns for the config's rows)."""
    for r in rows_in_order(cur, "SELECT * EXCLUDE (split_order) FROM _publish_items ORDER BY item"):
        item = r.pop("item")
        r["n_rollouts"] = r.pop("n")
        yield item, r


def _samples(con: duckdb.DuckDBPyConnection, spill: Path):
    """Every counted sample, in the config's order, with its item's columns and its completion: the keys from
    ``_samples`` in order, the text from one bucket file at a time (a bucket's text, never the job's, in memory), the
    item's columns from a second cursor walking ``_publish_items`` alongside (a sample's item never decreases)."""
    keys = rows_in_order(con, "SELECT pos, item, sample_idx, finish_reason, n_tokens, status, extracted, thinking_closed, "
                              "flags, bucket FROM _samples ORDER BY pos")
    cur = con.cursor()
    try:
        items = _items(cur)
        at, item = -1, {}
        for s, text in with_text(keys, spill, what="publish"):
            while at < s["item"]:
                at, item = next(items)
            yield {**item, "completion": text, "finish_reason": s["finish_reason"], "n_tokens": s["n_tokens"],
                   "status": s["status"], "extracted": s["extracted"], "thinking_closed": s["thinking_closed"],
                   "flags": s["flags"]}
    finally:
        cur.close()


def write(con: duckdb.DuckDBPyConnection, dataset: Dataset, *, files: list[str], staging: Path, temp_dir: Path,
          max_per_item: int, shard_rows: int) -> RolloutsSummary:
    """Write ``data/rollouts/<split>-*.parquet`` under ``staging`` from the rollouts shards ``files`` and ``con``'s
    ``verdicts`` and ``flags`` views; a split without rows gets no file (and the config is declared only if some split
    has rows). The samples' keys are sorted in DuckDB; their text is gathered into position-ordered buckets under
    ``temp_dir`` by one pass over the shards, then read back one bucket at a time."""
    summary = RolloutsSummary(max_per_item=max_per_item)
    if not files:
        return summary
    create_items(con, dataset)
    bucket = register_keys(con, files, name="_publish_keys", bucket=BUCKET_BYTES)
    con.execute(SAMPLES_SQL.format(bucket_sql=text_gather.BUCKET_SQL), {"max": max_per_item, "bucket": bucket})
    spill = Path(tempfile.mkdtemp(dir=temp_dir, prefix="buckets-"))
    writers: dict[str, SplitWriter] = {}
    paths: list[Path] = []
    try:
        scatter(con, "_samples", spill)
        group: list[dict] = []

        prompts = prompt_renderers(dataset.policies)

        def emit() -> None:
            row = _row(group, prompts)
            split = group[0]["split"]
            if split not in writers:
                writers[split] = SplitWriter(staging / "data" / CONFIG, split, schema=SCHEMA, shard_rows=shard_rows,
                                             row_group=ROW_GROUP, shard_bytes=SHARD_BYTES)
            writers[split].add(row, sum(len(g) for g in row["generations"]))
            summary.rows[split] = summary.rows.get(split, 0) + 1
            summary.generations += len(row["generations"])
            summary.correct += row["correctness_count"]
            summary.correct_unflagged += sum(ok and not f for ok, f in zip(row["correctness_math_verify"], row["flags"],
                                                                             strict=True))
            summary.truncated_rows += row["n_rollouts"] > len(row["generations"])

        for s in _samples(con, spill):
            if group and (s["problem_id"], s["policy_id"], s["split"]) != (
                    group[0]["problem_id"], group[0]["policy_id"], group[0]["split"]):
                emit()
                group = []
            group.append(s)
        if group:
            emit()
    finally:  # the connection is the caller's to close (it holds the items registered above)
        paths = [p for w in writers.values() for p in w.close()]
        shutil.rmtree(spill, ignore_errors=True)
    for split in writers:
        summary.files[split] = f"data/{CONFIG}/{split}-*.parquet"
    summary.written = sorted(p.relative_to(staging).as_posix() for p in paths)
    summary.bytes = sum(p.stat().st_size for p in paths)
    return summary


def open_tables(params: Params, *, root: Path, temp_dir: Path) -> duckdb.DuckDBPyConnection:
    """The catalog's views over every set's tables, under :data:`MEMORY_LIMIT_MB`."""
    return open_views(params, root=root, temp_dir=temp_dir, memory_limit_mb=MEMORY_LIMIT_MB)
