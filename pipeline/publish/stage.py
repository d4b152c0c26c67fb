"""The publish stage's shell and helpers; :mod:`pipeline.publish` describes the stage and re-exports its public names."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.bands import LEARNABLE
from pipeline.catalog import rollout_files
from pipeline.config import ConfigError, Params
from pipeline.errors import explain
from pipeline.io import check_shards, damaged, follow_umask, path_in, swap_dirs
from pipeline.ownership import check_target, published_proof, remove_tree
from pipeline.publish import card as card_mod
from pipeline.publish import exports as ex
from pipeline.publish import manifest
from pipeline.publish import rollouts as ro
from pipeline.publish.core import (
    BANDS,
    DEFAULT_CONFIG,
    REFORMULATED_CONFIG,
    SCHEMA,
    Dataset,
    Inputs,
    PublishError,
    Spec,
    build,
)
from pipeline.publish.manifest import BUILD_FILE
from pipeline.publish.provenance import (
    SourceLicense,
    build_info,
    read_build_info,
    source_licenses,
)
from pipeline.publish.shards import ConfigWriter
from pipeline.rollout.prompts import load_template, render
from pipeline.schema import schema
from pipeline.sqltext import sql_list
from pipeline.tablesets import table_set

__all__ = ["BANDS", "BUILD_FILE", "PublishError", "PublishResult", "build", "read_build_info", "run"]


@dataclass
class PublishResult:
    folder: Path
    dataset: Dataset
    files: list[str]  # every file written, relative to the folder
    build: card_mod.BuildInfo
    rollouts: ro.RolloutsSummary | None = None  # the rollouts config (None: publish.rollouts is off)

    def load_hint(self) -> str:
        cfg = LEARNABLE if LEARNABLE in self.dataset.configs else DEFAULT_CONFIG
        return f'datasets.load_dataset("{self.folder}", "{cfg}")'


# --- provenance --------------------------------------------------------------------------------


# --- licenses ----------------------------------------------------------------------------------


# --- the shell ---------------------------------------------------------------------------------

def _renderer(name: str):
    template = load_template(name)
    if not template.chat:
        raise ConfigError(f"publish.prompt_template {name!r} is not a chat template (chat: false); the prompt column is messages")

    def to_messages(question: str) -> list[dict[str, str]]:
        return [dict(m) for m in render(template, question).messages]

    return to_messages, f"{template.name} v{template.version}"


INPUT_MEMORY_MB = 256  # DuckDB's limit for the problems' sort; it spills to the spill folder past it


def read_inputs(params: Params, *, root: Path, temp_dir: Path | None = None) -> Inputs:
    """The tables as views of a DuckDB connection (memory-limited, spilling to ``temp_dir``): nothing read yet. Every
    shard's footer and schema are checked first, and every column the schema says holds no null is checked for
    nulls (one scan of those columns), so a damaged shard is its one-line error before any work."""
    main, reform = table_set(params, "main"), table_set(params, "reformulated")
    dirs = {"problems": ("problems", [main.dir("problems", root)]),
            "difficulty": ("difficulty", [main.dir("difficulty", root)]),
            "policies": ("policies", [main.dir("policies", root), reform.dir("policies", root)]),
            "reformulated_problems": ("problems", [reform.dir("problems", root)]),
            "reformulated_difficulty": ("difficulty", [reform.dir("difficulty", root)]),
            "reformulated_rejects": ("rejects", [reform.dir("rejects", root)])}
    config = {"memory_limit": f"{INPUT_MEMORY_MB}MB"}
    if temp_dir is not None:
        config["temp_directory"] = str(temp_dir)
    con = duckdb.connect(":memory:", config=config)
    try:
        for view, (table, folders) in dirs.items():
            shards = [p for d in folders for p in check_shards(d, name=table)]
            if not shards:
                con.execute(f"CREATE VIEW {view} AS {schema(table).empty_select()}")
                continue
            cols = ", ".join(schema(table).names)
            distinct = "DISTINCT " if table == "policies" else ""  # every set records the same policy
            files = sql_list([str(p) for p in shards])
            con.execute(f"CREATE VIEW {view} AS SELECT {distinct}{cols} FROM read_parquet({files})")
            _check_nulls(con, table, files)
    except BaseException:
        con.close()
        raise
    return Inputs(con)


def _check_nulls(con: duckdb.DuckDBPyConnection, table: str, files: str) -> None:
    """A null where ``table``'s schema allows none: the shard's one-line damaged error (read_shard's check)."""
    required = [c.name for c in schema(table).columns if not c.nullable]
    if not required:
        return
    cond = " OR ".join(f"{c} IS NULL" for c in required)
    bad = con.execute(f"SELECT filename, {', '.join(required)} FROM read_parquet({files}, filename = true) "
                      f"WHERE {cond} LIMIT 1").fetchall()  # all: a result left unfetched blocks the connection
    if bad:
        bad = bad[0]
        column = next(c for c, v in zip(required, bad[1:], strict=True) if v is None)
        raise damaged(bad[0], table, f"column {column!r} has nulls")


def _write_batches(batches, schema: pa.Schema, path: Path) -> None:
    """Batches (at least one row in all) into one Parquet file, as they come (no 0-row group: see _write_parquet)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for batch in batches:
            if batch.num_rows:
                writer.write_batch(batch)


def _write_lines(lines, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def write_folder(dataset: Dataset, *, staging: Path, params: Params, licenses: list[SourceLicense],
                 template_label: str, build: card_mod.BuildInfo, rollouts: ro.RolloutsSummary | None = None) -> list[str]:
    """Write every file of the folder under ``staging`` (``rollouts``: the rollouts config, already written there);
    returns their relative paths."""
    cfg = params.publish
    written: list[str] = list(rollouts.written) if rollouts else []

    def put_bytes(rel: str, data: bytes) -> None:
        p = path_in(staging, rel)  # a name in rel (a config, a source) never leads out of the folder
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        written.append(rel)

    files: dict[str, dict[str, str]] = {}
    for config, splits in dataset.configs.items():
        if dataset.rows(config) == 0:  # 🤗 datasets cannot load a config without rows: not declared (the card says so)
            continue
        files[config] = {}
        for split, rows in splits.items():  # written by build, into staging/data/<config>/
            written += [f.relative_to(staging).as_posix() for f in rows.files]
            files[config][split] = f"data/{config}/{split}-*.parquet"
    if rollouts is not None and rollouts.total_rows:
        files[ro.CONFIG] = rollouts.files

    unknown = [c for c in cfg.exports if c not in dataset.configs]
    if unknown:
        raise ConfigError(f"publish.exports names unknown configs {unknown}; known: {', '.join(dataset.configs)}")
    for config in cfg.exports:
        for split, rows in dataset.configs[config].items():
            if rows.num_rows == 0:
                continue
            rel = f"exports/verl/{config}/{split}.parquet"
            _write_batches(ex.verl_batches(rows, split=split), ex.VERL_SCHEMA, path_in(staging, rel))
            written.append(rel)
            rel = f"exports/trl/{config}/{split}.parquet"
            _write_batches(ex.trl_batches(rows), ex.TRL_SCHEMA, path_in(staging, rel))
            written.append(rel)
            rel = f"exports/openrlhf/{config}/{split}.jsonl"
            _write_lines(ex.openrlhf_lines(rows), path_in(staging, rel))
            written.append(rel)
    if any(dataset.rows(c) for c in cfg.exports):
        put_bytes("exports/verl/reward.py", ex.VERL_REWARD.encode())
        put_bytes("exports/openrlhf/reward_func.py", ex.OPENRLHF_REWARD.encode())

    items = _items_per_source(dataset)
    rows = []
    copied: dict[bytes, str] = {}
    for s in licenses:
        rel = None
        if s.text is not None and items.get(s.source, 0):  # a source with no published item ships no license text
            data = s.text
            rel = copied.get(data)
            if rel is None:
                rel = f"licenses/{s.kind}.LICENSE.txt"
                if rel in copied.values():
                    rel = f"licenses/{s.source}.LICENSE.txt"
                put_bytes(rel, data)
                copied[data] = rel
        rows.append((s.source, s.kind, s.license, items.get(s.source, 0), rel))
    spec = card_mod.CardSpec(
        repo_id=cfg.repo_id, pretty_name=cfg.pretty_name, tags=tuple(cfg.tags),
        learnable_min=params.annotate.bands.learnable_min, learnable_max=params.annotate.bands.learnable_max,
        unsolved_max=params.annotate.bands.unsolved_max,
        prompt_template=template_label, source_licenses=tuple(rows),
    )
    put_bytes(card_mod.HISTOGRAM, card_mod.histogram_png(dataset, spec=spec))
    exported = [c for c in cfg.exports if dataset.rows(c)]
    exports = {fmt: exported for fmt in ex.FORMATS} if exported else {}
    put_bytes("README.md", card_mod.render(dataset, files=files, exports=exports, spec=spec, build=build,
                                           private=cfg.private, rollouts=rollouts).encode())
    build_json = {
        **build.as_dict(),
        "policy": {"name": dataset.primary["name"], "policy_id": dataset.primary["policy_id"]},
        "verifier_ids": dataset.verifier_ids,
        "rows": {c: dataset.rows(c) for c in dataset.configs},
        "bands": dataset.band_counts(DEFAULT_CONFIG),
        "unmeasured": dataset.unmeasured,
        "unmeasured_reformulated": dataset.unmeasured_reformulated,
        "rollouts": rollouts.as_dict() if rollouts else None,
        "files": manifest.file_manifest(staging),  # what push uploads, and nothing else
    }
    put_bytes(BUILD_FILE, (json.dumps(build_json, indent=2, sort_keys=True) + "\n").encode())
    return sorted(written)


def _items_per_source(dataset: Dataset) -> dict[str, int]:
    counts: dict[str, int] = {}
    for config in (DEFAULT_CONFIG, REFORMULATED_CONFIG):
        for rows in dataset.configs[config].values():
            for batch in rows.batches(["source"]):
                for s in batch.column(0).to_pylist():
                    counts[s] = counts.get(s, 0) + 1
    return counts


def _write_rollouts(params: Params, dataset: Dataset, *, root: Path, staging: Path) -> ro.RolloutsSummary:
    """The rollouts config, streamed from every set's rollouts, verdicts and flags into ``staging``; a failure of
    DuckDB or of a shard's read (memory, a damaged file) is one line naming it."""
    with tempfile.TemporaryDirectory(prefix="passband-publish-spill-") as spill:
        try:
            con = ro.open_tables(params, root=root, temp_dir=Path(spill))
            try:
                return ro.write(con, dataset, files=rollout_files(params, root=root), staging=staging,
                                temp_dir=Path(spill), max_per_item=params.publish.max_rollouts_per_item,
                                shard_rows=params.publish.shard_rows)
            finally:
                con.close()
        except (duckdb.Error, pa.ArrowException) as exc:
            if isinstance(exc, OSError) and explain(exc) is not None:
                raise  # a full disk: the CLI's own line for it
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PublishError(f"publish: building the rollouts config failed ({type(exc).__name__}: {first}); "
                               "publish.rollouts: false builds the folder without it") from exc


def _build(params: Params, spec: Spec, *, root: Path, staging: Path) -> Dataset:
    """The configs' shards written under ``staging/data`` as their rows are built (pipeline.publish.core.build)."""
    sink = ConfigWriter(staging / "data", schema=SCHEMA, shard_rows=params.publish.shard_rows)
    with tempfile.TemporaryDirectory(prefix="passband-publish-spill-") as spill:
        inputs = read_inputs(params, root=root, temp_dir=Path(spill))
        try:
            return build(inputs, spec=spec, sink=sink)
        except BaseException:
            sink.abort()
            raise
        finally:
            inputs.con.close()


def _swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging`` in one atomic exchange (pipeline.io.swap_dirs); the old folder is removed after."""
    old = swap_dirs(staging, target)
    if old is not None:
        remove_tree(old)


def run(params: Params, *, root: Path = Path(".")) -> PublishResult:
    """The shell: tables from params.yaml's paths in, the folder ``paths.published`` out."""
    root = Path(root).resolve()
    target = root / params.paths.published
    others = [root / v for k, v in params.paths.configured().items() if k != "published"]

    def check() -> None:
        check_target(target, owned=published_proof, what="the published folder", key="published", root=root,
                     others=others)

    check()  # before any work: a folder passband did not write is refused, untouched
    cfg = params.publish
    render, template_label = _renderer(cfg.prompt_template)
    licenses = source_licenses(params, root=root)
    spec = Spec(
        policy=cfg.policy or params.rollout.policies[0],
        bands=tuple(cfg.bands),
        reformulated_bands=tuple(cfg.reformulated_bands),
        licenses={s.source: s.license for s in licenses},
        render=render,
    )
    info = build_info(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    for kind in ("new", "old"):  # a killed run's staging or old folder (publish runs under its lock)
        for half in target.parent.glob(f".{target.name}.{kind}.*"):
            remove_tree(half)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.new."))
    follow_umask(staging, directory=True)  # mkdtemp makes it owner-only
    try:
        dataset = _build(params, spec, root=root, staging=staging)
        rollouts = _write_rollouts(params, dataset, root=root, staging=staging) if cfg.rollouts else None
        files = write_folder(dataset, staging=staging, params=params, licenses=licenses,
                             template_label=template_label, build=info, rollouts=rollouts)
        check()  # again, just before the swap: the folder may have changed while this one was written
        _swap_in(staging, target)
    except BaseException:
        remove_tree(staging)
        raise
    dataset.moved(staging, target)
    return PublishResult(folder=target, dataset=dataset, files=files, build=info, rollouts=rollouts)
