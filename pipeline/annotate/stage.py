"""The annotate stage's shell and helpers; :mod:`pipeline.annotate` describes the stage and re-exports its public names."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.annotate import incremental
from pipeline.annotate.core import HITS_SCHEMA, Annotation, annotate_tables, difficulty_batches, flag_batches, prepare
from pipeline.annotate.plots import write_plots
from pipeline.annotate.selection import selection
from pipeline.bands import BANDS
from pipeline.config import AnnotateConfig, Params
from pipeline.errors import PassbandError
from pipeline.io import (
    SHARD_GLOB,
    atomic_path,
    check_shards,
    claim_table_dir,
    is_table_shard,
    read_table,
    shard_paths,
    write_metrics,
)
from pipeline.rollout.core import select_problems
from pipeline.rollout.policy import resolve_policy
from pipeline.run_metrics import RunStats
from pipeline.schema import SchemaError, schema
from pipeline.sqltext import sql_literal, view_sql
from pipeline.tablesets import table_set
from pipeline.verify.core import verifier_id

__all__ = ["AnnotateResult", "annotate_tables", "open_inputs", "run"]


@dataclass
class AnnotateResult:
    verifier_id: str
    groups: int
    samples: int
    flags: int
    bands: dict[str, int] = field(default_factory=dict)
    mean_pass_rate: float | None = None
    flag_rates: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    paths: list[Path] = field(default_factory=list)
    detector_errors: dict[str, int] = field(default_factory=dict)  # detector -> rows it raised on (detector_error flags)
    reused_groups: int = 0  # groups whose stored flags were kept (incremental)
    rerun_detectors: list[str] = field(default_factory=list)  # detectors rerun on those too (their code or knobs changed)
    answer_keys: dict = field(default_factory=dict)  # gold_suspicion's fitted model, the suspects, the expected wrong keys

    def stats(self) -> RunStats:
        stats = RunStats.of({"verifier_id": self.verifier_id, "problems": self.groups, "rollouts": self.samples,
                             "flags": self.flags, "bands": self.bands, "mean_pass_rate": self.mean_pass_rate,
                             "flag_rates": self.flag_rates, "detector_errors": self.detector_errors,
                             "reused_groups": self.reused_groups, "rerun_detectors": self.rerun_detectors,
                             "answer_keys": self.answer_keys})
        return stats.add_time("seconds", self.seconds)

    def metrics(self) -> dict:
        return self.stats().to_dict()


def _view(con: duckdb.DuckDBPyConnection, name: str, directory: Path) -> None:
    if check_shards(directory, name=name):  # a damaged shard: one line naming it, not DuckDB's error
        cols = ", ".join(schema(name).names)
        glob = sql_literal(f"{directory}/{SHARD_GLOB}")  # a view cannot hold a bound parameter
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} FROM read_parquet({glob})")
    else:
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {schema(name).empty_select()}")


def open_inputs(params: Params, *, root: Path, set_name: str, temp_dir: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:", config={"memory_limit": f"{params.annotate.memory_limit_mb}MB",
                                             "temp_directory": temp_dir, "preserve_insertion_order": False})
    ts = table_set(params, set_name)
    for name in ("verdicts", "rollouts", "problems"):
        _view(con, name, ts.dir(name, root))
    return con


def _check_output(path: Path, name: str) -> None:
    """The written file has exactly the declared columns and types (checked on its first batch)."""
    pf = pq.ParquetFile(path)
    first = next(pf.iter_batches(batch_size=1024), None)
    table = pf.schema_arrow.empty_table() if first is None else pa.Table.from_batches([first])
    try:
        schema(name).validate(table, where=str(path))
    except SchemaError:
        path.unlink(missing_ok=True)
        raise


def _copy(con: duckdb.DuckDBPyConnection, sql: str | None, target: Path, name: str,
          batches: Iterator[pa.RecordBatch] | None = None) -> None:
    """``sql`` (DuckDB's COPY) or ``batches`` (Arrow, with the declared schema) to a temp name, checked, renamed into place."""
    with atomic_path(target) as tmp:
        if batches is None:
            con.execute(f"COPY ({sql}) TO ? (FORMAT parquet, COMPRESSION zstd)", [str(tmp)])
        else:
            with pq.ParquetWriter(tmp, schema(name).arrow, compression="zstd") as writer:
                for batch in batches:
                    writer.write_batch(batch)
        _check_output(Path(tmp), name)
    for old in shard_paths(target.parent):
        if old != target and is_table_shard(old, name=name):  # never a file passband did not write as this table
            old.unlink()


def set_config(config: AnnotateConfig, set_name: str) -> AnnotateConfig:
    """The annotate config for one table set. A reformulated child's question keeps numbers its answer does
    not use (the parent's answer stated, a step rung asking for an intermediate), so the wrong-setup check of
    ``unsupported_answer`` (``options.unsupported_answer.setup``) is off outside the main set: on the main job's
    full ladder it flagged 33.8 % of the children's rollouts, "8 + 6 = 14. The answer is 14." for gold 14
    among them (docs/reformulation.md)."""
    if set_name == "main":
        return config
    own = {**config.options.get("unsupported_answer", {}), "setup": False}
    return config.model_copy(update={"options": {**config.options, "unsupported_answer": own}})


class AnnotateError(PassbandError):
    """The stage cannot finish as configured (DuckDB out of its memory limit): one line naming the setting."""


def run(params: Params, *, root: Path = Path("."), set_name: str = "main", progress: bool = True,
        plots: bool = True) -> AnnotateResult:
    """The shell: the set's tables in; ``flags/part-0.parquet``, ``difficulty/part-0.parquet``, metrics and plots out."""
    t0 = time.perf_counter()
    ts = table_set(params, set_name)
    vid = verifier_id(params.verify)
    with tempfile.TemporaryDirectory(prefix="passband-annotate-") as tmp:
        con = open_inputs(params, root=root, set_name=set_name, temp_dir=f"{tmp}/duckdb")
        try:
            con.register("_selection", _selection(con, params, root=root, set_name=set_name, vid=vid))
            ann = prepare(con, config=set_config(params.annotate, set_name), verifier_id=vid, selection="_selection")
            flags_out = ts.dir("flags", root) / "part-0.parquet"
            # what the stored flags still hold (pipeline/annotate/incremental.py): None, all recomputed
            det_fps = incremental.detector_fingerprints(ann.detectors)
            incremental.group_fingerprints(con, verifier_id=vid, rollouts_dir=ts.dir("rollouts", root))
            rerun = incremental.load_previous(con, flags_out, det_fps) if params.annotate.incremental else None
            hits_path = Path(tmp) / "hits.parquet"
            n_hits = _write_hits(ann, hits_path, progress=progress, set_name=set_name, rerun=rerun)
            con.execute(f"CREATE OR REPLACE TEMP VIEW _hits AS SELECT * FROM read_parquet({sql_literal(str(hits_path))})")
            reused = 0 if rerun is None else con.execute("SELECT count(*) FROM _reuse").fetchone()[0]
            # part-0.parquet is replaced by name: only in folders of their own (flags' holds its fingerprints)
            claim_table_dir(ts.dir("flags", root), name="flags", subfolders=(incremental.STATE_DIR,))
            claim_table_dir(ts.dir("difficulty", root), name="difficulty")
            flag_cols = ", ".join(schema("flags").names)
            _copy(con, f"SELECT {flag_cols} FROM _hits ORDER BY {', '.join(schema('flags').key)}", flags_out, "flags")
            incremental.write_state(con, flags_out, det_fps)  # after the flags: a kill between leaves a stale digest
            diff_out = ts.dir("difficulty", root) / "part-0.parquet"
            _copy(con, None, diff_out, "difficulty", batches=difficulty_batches(ann, hits="_hits"))
            result = _summary(con, ann, diff_out, n_hits)
            result.paths = [flags_out, diff_out]
            result.reused_groups, result.rerun_detectors = reused, list(rerun or [])
            # from every row written, reused ones included (the detector a detector_error row names)
            result.detector_errors = dict(con.execute(
                f"SELECT {incremental.DETECTOR_OF_SQL}, count(*) FROM _hits WHERE flag = 'detector_error' "
                "GROUP BY 1 ORDER BY 1").fetchall())
            if plots:
                suffix = "" if set_name == "main" else f"-{set_name}"
                result.paths += write_plots(con, f"read_parquet({sql_literal(str(diff_out))})", root / params.paths.plots,
                                            suffix=suffix,
                                            names=_policy_names(ts.dir("policies", root)))
        except duckdb.OutOfMemoryException as exc:  # one line with the knob, not DuckDB's traceback
            first = str(exc).strip().splitlines()[0]
            raise AnnotateError(f"annotate: DuckDB needed more than annotate.memory_limit_mb = "
                                f"{params.annotate.memory_limit_mb} ({first}); raise it in params.yaml") from exc
        finally:
            con.close()
    result.seconds = time.perf_counter() - t0
    write_metrics(ts.metrics_file("annotate", root), result.stats(), root=root)
    return result


def _selection(con: duckdb.DuckDBPyConnection, params: Params, *, root: Path, set_name: str, vid: str) -> pa.Table:
    """The samples the run's budget selects (pipeline/annotate/selection.py): the set's selected problems, every
    policy with verdicts, priors resolved from params (only when a policy names one)."""
    cfg = params.rollout
    problems = con.sql("SELECT problem_id, source FROM problems").to_arrow_table()
    if set_name == "main":
        problems = select_problems(problems, sources=cfg.sources, limit=cfg.limit)
    measured = [r[0] for r in con.execute("SELECT DISTINCT policy_id FROM verdicts WHERE verifier_id = ?", [vid]).fetchall()]
    priors: dict[str, str | None] = dict.fromkeys(measured)
    weights: dict[str, float] = {}
    if any(params.policies[n].prior for n in cfg.policies):
        ids = {n: resolve_policy(n, params.policies[n], models_dir=root / params.paths.models, root=root).policy_id
               for n in cfg.policies}
        for name in cfg.policies:
            if (prior := params.policies[name].prior) is not None and ids[name] in priors:
                priors[ids[name]], weights[ids[name]] = ids[prior.policy], prior.weight
    return selection(con, verdicts="verdicts", verifier_id=vid, problem_ids=problems.column("problem_id").to_pylist(),
                     policies=priors, cfg=cfg, bands=params.annotate.bands, prior_weights=weights,
                     imported=_imported_ids(table_set(params, set_name).dir("policies", root)))


def _imported_ids(policies_dir: Path) -> set[str]:
    """The policies whose rollouts were imported from a dump (engine ``import``): every sample of theirs counts."""
    if not shard_paths(policies_dir):
        return set()
    t = read_table(policies_dir, name="policies", columns=["policy_id", "engine"])
    return {p for p, e in zip(t.column("policy_id").to_pylist(), t.column("engine").to_pylist(), strict=True)
            if e == "import"}


def _write_hits(ann: Annotation, path: Path, *, progress: bool, set_name: str, rerun: list[str] | None) -> int:
    """The hits computed now, then (incremental) the stored rows still valid, into one file."""
    n = 0
    with pq.ParquetWriter(path, HITS_SCHEMA, compression="zstd") as writer, \
            tqdm(desc=f"annotate[{set_name}] flags", unit=" candidates", disable=not progress, mininterval=1.0) as bar:
        for batch in flag_batches(ann, on_batch=bar.update, rerun=rerun):
            writer.write_batch(batch)
            n += batch.num_rows
        if rerun is not None:
            kept = incremental.kept_hits_sql([d.name for d in ann.detectors], rerun)
            for batch in ann.con.sql(kept).to_arrow_reader(16_384):
                writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=HITS_SCHEMA))
                n += batch.num_rows
    return n


def _policy_names(policies_dir: Path) -> dict[str, str]:
    """policy_id -> the policy's name in params.yaml, from the policies table (empty when it is not there)."""
    if not shard_paths(policies_dir):
        return {}

    t = read_table(policies_dir, name="policies")
    return dict(zip(t.column("policy_id").to_pylist(), t.column("name").to_pylist(), strict=True))


def _summary(con: duckdb.DuckDBPyConnection, ann: Annotation, diff_path: Path, n_hits: int) -> AnnotateResult:
    bands = dict(con.execute("SELECT band, count(*) FROM read_parquet(?) GROUP BY 1", [str(diff_path)]).fetchall())
    groups, samples, mean_pass = con.execute("SELECT count(*), coalesce(sum(n), 0), avg(pass_rate) FROM read_parquet(?)",
                                             [str(diff_path)]).fetchone()
    fired = dict(con.execute("SELECT flag, count(*) FROM _hits GROUP BY 1").fetchall())
    # per problem (the score is the same on each of its rows): how many suspect, how many wrong keys expected
    con.execute(f"CREATE OR REPLACE TEMP VIEW difficulty AS SELECT * FROM read_parquet({sql_literal(str(diff_path))})")
    problems, suspect, expected, expected_suspect = con.execute(f"""
        SELECT count(*), count(*) FILTER (WHERE gold_suspect), coalesce(sum(gold_suspicion), 0),
               coalesce(sum(gold_suspicion) FILTER (WHERE gold_suspect), 0)
        FROM ({view_sql("answer_keys")})""").fetchone()
    model = asdict(ann.gold_model) if ann.gold_model is not None else None
    keys = {"problems_scored": problems, "suspect": suspect, "expected_wrong_keys": round(expected, 3),
            "expected_wrong_among_suspect": round(expected_suspect, 3), "model": model}
    return AnnotateResult(
        verifier_id=ann.verifier_id, groups=groups, samples=samples, flags=n_hits,
        bands={b: bands.get(b, 0) for b in BANDS},
        mean_pass_rate=round(mean_pass, 6) if mean_pass is not None else None,
        flag_rates={d.name: round(fired.get(d.name, 0) / samples, 6) if samples else 0.0 for d in ann.detectors},
        answer_keys=keys,
    )
