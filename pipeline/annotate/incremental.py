"""Incremental annotate: keep the flags of the groups and detectors whose inputs did not change.

What decides a flag row is its group (problem x policy of the table set): the selected verdicts' status, extracted
answer and thinking columns, the rollouts' text, tokens and finish reason, the selection's n, budget, stop reason and
prior, the problem's question, solution and answer, and the verifier_id. A rollout's columns stand in the
fingerprint as the SHA-256 of the shard file that holds it: shards are written once (new samples go to new shards),
so hashing ~50 MB of compressed files replaces an MD5 of every completion's text (0.5 s of a rerun with nothing new
at 50,000 rollouts, 462 MB of text); a shard rewritten for any reason recomputes the groups it holds. Every detector column of a
candidate row (``samples``: the group's counts, steps, the median steps of its correct samples) is a function of
those, so a group whose fingerprint of them is the same would get the same rows again. What decides a detector's
rows is its code and knobs: a detector's fingerprint hashes the source of its module, the shared code every
detector runs through (the runner, the arithmetic and number parsers, the grader), its SQL, its knobs' values and
the DuckDB and math-verify versions. A flag row is kept when its group's and its detector's fingerprints are
both the ones stored with the flags file; everything else is recomputed. The difficulty table is not kept: it is
one SQL pass over the groups and the flags (gold suspicion pools a problem's policies; the plots and metrics read
the whole table), cheap next to the detectors, so it is rebuilt every run from the same flags.

The fingerprints live in ``<flags folder>/fingerprints/part-0.parquet`` (DVC caches it with the flags), with the
SHA-256 of the flags file they describe in its footer: a flags file written after them (a run killed between
the two writes, a checkout of the flags alone) does not match, and the run recomputes everything. Never mtimes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.annotate.detectors import Detector
from pipeline.io import SHARD_GLOB, atomic_path, shard_paths
from pipeline.sqltext import sql_literal

STATE_DIR = "fingerprints"
STATE_FILE = "part-0.parquet"
_META = b"passband.annotate.state"
_SCHEMA = pa.schema([pa.field("problem_id", pa.string()), pa.field("policy_id", pa.string()),
                     pa.field("fingerprint", pa.string())])
# the code every detector's rows go through besides its own module (a change to any: every detector reruns)
# (the answer reading the detectors share with the verifier is in pipeline.verify's answer_text and extract)
SHARED_MODULES = ("pipeline.annotate.flag_runner", "pipeline.annotate.detectors", "pipeline.annotate.hit",
                  "pipeline.annotate.unsupported", "pipeline.arith", "pipeline.numbers", "pipeline.thinking",
                  "pipeline.verify.grader", "pipeline.verify.answer_text", "pipeline.verify.extract",
                  "pipeline.annotate.incremental")
# packages whose every module is shared code: pipeline.arith is its statements reader and evaluator, not its __init__
SHARED_PACKAGES = ("pipeline.arith",)
LIBRARIES = ("duckdb", "math-verify")


def _source(module: str) -> bytes:
    """The module's source; for one of :data:`SHARED_PACKAGES`, every ``.py`` file under it, in path order, each after
    its relative path."""
    mod = sys.modules.get(module) or __import__(module, fromlist=["_"])
    if module in SHARED_PACKAGES:
        out = bytearray()
        for folder in mod.__path__:
            for path in sorted(Path(folder).rglob("*.py")):
                out += path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0"
        return bytes(out)
    try:
        return inspect.getsource(mod).encode()
    except (OSError, TypeError):  # no source (a frozen or compiled module): its name and version stand in
        return f"{module}:{getattr(mod, '__version__', '')}".encode()


def detector_fingerprints(detectors: Sequence[Detector]) -> dict[str, str]:
    """Per detector: the SHA-256 of everything besides the group that decides its rows."""
    shared = hashlib.sha256()
    for m in SHARED_MODULES:
        shared.update(_source(m))
    for lib in LIBRARIES:
        shared.update(f"{lib}=={importlib.metadata.version(lib)}".encode())
    out = {}
    for d in detectors:
        h = shared.copy()
        h.update(_source(type(d).__module__))
        own = d.options.model_dump(mode="json")
        h.update(json.dumps([d.name, d.kind, d.where, d.scan, d.side, d.score_sql, d.evidence_sql, own],
                            sort_keys=True, default=str).encode())
        out[d.name] = h.hexdigest()
    return out


def group_fingerprints(con: duckdb.DuckDBPyConnection, *, verifier_id: str, rollouts_dir: Path) -> None:
    """``_fp`` (problem_id, policy_id, fingerprint): each group's inputs (the module's doc), from ``_v``.

    Each sample's inputs are hashed on their own (MD5 of its verdict's fields and the digest of the rollouts shard
    holding it), and a group keeps only those 32-character digests, in sample order, until its own digest: a list of
    every sample's fields held per group did not fit DuckDB's memory limit at 240,000 rollouts under 256 MB."""
    paths = shard_paths(rollouts_dir)
    con.register("_shard_digests", pa.table({"file": [p.name for p in paths],
                                              "digest": [file_digest(p) for p in paths]}))
    glob = sql_literal(f"{rollouts_dir}/{SHARD_GLOB}")
    where = (f"(SELECT problem_id, policy_id, sample_idx, parse_filename(filename) AS file "
             f"FROM read_parquet({glob}, filename = true))" if paths else
             "(SELECT NULL::VARCHAR AS problem_id, NULL::VARCHAR AS policy_id, NULL::BIGINT AS sample_idx, "
             "NULL::VARCHAR AS file WHERE false)")
    try:
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _fp AS
            WITH located AS (
                SELECT w.problem_id, w.policy_id, w.sample_idx, d.digest FROM {where} w JOIN _shard_digests d USING (file)),
            samples AS (
                SELECT v.problem_id, v.policy_id, v.sample_idx, v.budget, v.stop_reason, v.prior_policy_id,
                       md5(to_json({{'i': v.sample_idx, 'st': v.status, 'x': v.extracted, 'tc': v.thinking_chars,
                                    'tk': v.thinking_closed, 'shard': l.digest}})) AS h
                FROM _v v JOIN located l USING (problem_id, policy_id, sample_idx)),
            groups AS (
                SELECT problem_id, policy_id, count(*) AS n, any_value(budget) AS budget, any_value(stop_reason) AS stop,
                       any_value(prior_policy_id) AS prior, string_agg(h, ',' ORDER BY sample_idx) AS s
                FROM samples GROUP BY problem_id, policy_id)
            SELECT g.problem_id, g.policy_id,
                   md5(to_json({{'vid': {sql_literal(verifier_id)}, 'n': g.n, 'budget': g.budget, 'stop': g.stop,
                                'prior': g.prior, 'q': p.question, 'sol': p.solution, 'gold': p.answer, 's': g.s}}))
                       AS fingerprint
            FROM groups g JOIN problems p USING (problem_id)""")
    finally:
        con.unregister("_shard_digests")


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_previous(con: duckdb.DuckDBPyConnection, flags_file: Path, detectors: dict[str, str]) -> list[str] | None:
    """Register ``_reuse`` (the groups whose fingerprint is unchanged) and ``_old_flags``; return the detectors
    whose fingerprint changed (their rows are recomputed everywhere). None: nothing to reuse."""
    state = flags_file.parent / STATE_DIR / STATE_FILE
    if not (state.is_file() and flags_file.is_file()):
        return None
    try:
        meta = json.loads((pq.read_schema(state).metadata or {})[_META])
        stored = pq.read_table(state, schema=_SCHEMA)
    except (KeyError, ValueError, pa.ArrowException, OSError):  # not a state file this version wrote: start over
        return None
    if meta.get("flags_sha256") != file_digest(flags_file):
        return None
    con.register("_stored_fp", stored)
    con.execute("CREATE OR REPLACE TEMP TABLE _reuse AS SELECT problem_id, policy_id FROM _fp JOIN _stored_fp "
                "USING (problem_id, policy_id, fingerprint)")
    con.unregister("_stored_fp")
    con.execute(f"CREATE OR REPLACE TEMP VIEW _old_flags AS SELECT * FROM read_parquet({sql_literal(str(flags_file))})")
    old = meta.get("detectors", {})
    return [name for name, fp in detectors.items() if old.get(name) != fp]


# the detector a flag row belongs to: a detector_error row names it before ": error:" (flag_runner.error_hit)
DETECTOR_OF_SQL = "CASE WHEN flag = 'detector_error' THEN split_part(evidence, ': error:', 1) ELSE flag END"


def kept_hits_sql(detectors: Sequence[str], changed: Sequence[str]) -> str:
    """The stored flag rows still valid (HITS_SCHEMA columns): of a reused group, by an unchanged detector still run."""
    keep = [d for d in detectors if d not in changed]
    names = ", ".join(sql_literal(d) for d in keep) or "NULL"
    return f"""SELECT f.problem_id, f.policy_id, f.sample_idx, f.flag, f.score, f.evidence, v.status = 'correct' AS correct
        FROM _old_flags f SEMI JOIN _reuse USING (problem_id, policy_id)
        JOIN _v v USING (problem_id, policy_id, sample_idx)
        WHERE ({DETECTOR_OF_SQL}) IN ({names})"""


def write_state(con: duckdb.DuckDBPyConnection, flags_file: Path, detectors: dict[str, str]) -> Path:
    """The groups' and detectors' fingerprints beside ``flags_file``, after it is in place (atomic)."""
    state = flags_file.parent / STATE_DIR / STATE_FILE
    state.parent.mkdir(parents=True, exist_ok=True)
    table = con.sql("SELECT problem_id, policy_id, fingerprint FROM _fp ORDER BY ALL").to_arrow_table().cast(_SCHEMA)
    meta = {"flags_sha256": file_digest(flags_file), "detectors": detectors}
    table = table.replace_schema_metadata({_META: json.dumps(meta).encode()})
    with atomic_path(state) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return state
