"""The fold: checked rows spooled to disk, duplicates folded in DuckDB, shards streamed out.

Memory stays bounded whatever the number of rows: checked rows are spooled to Parquet files in
a work folder (at most :data:`SPOOL_ROWS` rows or :data:`SPOOL_BYTES` of text per file); DuckDB
folds duplicates over their narrow columns only (ids, gold, excerpt), under a memory limit,
spilling to the work folder past it; the outputs then come back one spool file at a time, in
order of first appearance, cut into shards of at most ``shard_rows`` rows and
:data:`SHARD_BYTES` of text. Where a shard is cut depends only on the rows, so the same input
gives the same shards, byte for byte.

Folding: the first row of a ``problem_id`` is the problem; a later row with an equivalent gold
is a duplicate (counted in ``n_duplicates``); if any row's gold is not equivalent to the first
row's, every row of that ``problem_id`` is a ``conflicting_gold`` reject. Only the distinct
golds of repeated ids come back to Python (for math-verify's equivalence).

Grading: before the fold, each distinct gold is graded once by ``grade_golds`` (the stage passes
:func:`pipeline.verify.gold_check.ungradable_golds` under the verify settings); every row whose gold the
verifier could never grade is an ``ungradable_gold`` reject, and the fold goes on without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import IngestConfig, field_default
from pipeline.ingest.gold_lint import CHECKS
from pipeline.ingest.summary import IngestSummary, check_invariant
from pipeline.schema import schema
from pipeline.verify.gold_check import golds_equivalent

SPOOL_ROWS = 10_000
SPOOL_BYTES = 16 << 20
FETCH_ROWS = 1_024
SHARD_BYTES = 16 << 20
MAX_GOLDS_SHOWN = 10

_ROW_COLS = ("seq", "problem_id", "source", "source_id", "split", "question", "answer", "gold_issues", "solution",
             "subject", "level", "metadata", "excerpt", "source_difficulty", "source_difficulty_measure")
# what DuckDB folds over (and counts the gold lint's findings of the kept problems from)
_NARROW_COLS = ("seq", "problem_id", "source", "source_id", "answer", "gold_issues", "excerpt")
_REJECT_COLS = ("seq", "source", "source_id", "reason", "detail", "excerpt")
_KEPT = "problem_id NOT IN (SELECT problem_id FROM conflicted)"


_TYPES = {"seq": pa.int64(), "source_difficulty": pa.float64(), "gold_issues": pa.list_(pa.string())}
_SQL_TYPES = {"seq": "BIGINT", "gold_issues": "VARCHAR[]"}


def _arrow_schema(cols: tuple[str, ...]) -> pa.Schema:
    return pa.schema([(c, _TYPES.get(c, pa.string())) for c in cols])


def _ddl(table: str, cols: tuple[str, ...]) -> str:
    columns = ", ".join(f"{c} {_SQL_TYPES.get(c, 'VARCHAR')}" for c in cols)
    return f"CREATE TABLE {table} ({columns})"


class Fold:
    """Add checked rows with :meth:`add`, then :meth:`finish`, then stream :meth:`problem_shards` and
    :meth:`reject_shards` (each a lazy iterable of ``(shard_name, table)``, for :func:`pipeline.io.replace_dir`)."""

    def __init__(self, workdir: Path, *, memory_limit_mb: int = field_default(IngestConfig, "memory_limit_mb"),
                 grade_golds: Callable[[Sequence[str]], list[str | None]] | None = None):
        """``grade_golds``: for a list of golds, why each can never be graded (None: it can); None grades none."""
        self.dir = Path(workdir)
        self.grade_golds = grade_golds
        self.con = duckdb.connect(str(self.dir / "fold.duckdb"), config={
            "memory_limit": f"{memory_limit_mb}MB", "temp_directory": str(self.dir / "spill"),
            "preserve_insertion_order": False})
        self._spool: dict[bool, list[dict]] = {True: [], False: []}
        self._spool_bytes = 0
        self._files: dict[bool, list[Path]] = {True: [], False: []}
        self.seq = 0
        self.read: Counter = Counter()
        self.read_rejects: Counter = Counter()
        self.reasons: Counter = Counter()
        self.garbled: dict[str, Counter] = {}  # source -> unusable gold defect -> rows rejected for it
        self.summary: IngestSummary | None = None

    def __enter__(self) -> Fold:
        return self

    def __exit__(self, *exc) -> None:
        self.con.close()

    def add(self, source: str, ok: bool, row: dict) -> None:
        """One checked row (:func:`pipeline.ingest.core.check`'s answer), in input order."""
        self.read[source] += 1
        row["seq"] = self.seq
        self.seq += 1
        if ok:
            self._spool_bytes += len(row["question"]) + len(row["solution"] or "") + len(row["metadata"] or "")
        else:
            self.read_rejects[source] += 1
            self.reasons[row["reason"]] += 1
            if row["reason"] in ("garbled_gold", "unparseable_gold"):  # "check: evidence; check: evidence"
                names = (n for part in row["detail"].split("; ") if (n := part.split(":", 1)[0]) in CHECKS)
                self.garbled.setdefault(source, Counter()).update(names)
        self._spool[ok].append(row)
        if len(self._spool[ok]) >= SPOOL_ROWS or self._spool_bytes >= SPOOL_BYTES:
            self._flush()

    def _flush(self) -> None:
        for ok, kind, cols in ((True, "rows", _ROW_COLS), (False, "rejects", _REJECT_COLS)):
            if rows := self._spool[ok]:
                path = self.dir / f"{kind}-{len(self._files[ok]):06d}.parquet"
                pq.write_table(pa.Table.from_pylist(rows, schema=_arrow_schema(cols)), path, compression="snappy")
                self._files[ok].append(path)
                rows.clear()
        self._spool_bytes = 0

    def _load(self, table: str, ok: bool, cols: tuple[str, ...]) -> None:
        """Table ``table`` in DuckDB: columns ``cols`` of the spool files (only those columns are read)."""
        if self._files[ok]:
            files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in self._files[ok])
            self.con.execute(f"CREATE TABLE {table} AS SELECT {', '.join(cols)} FROM read_parquet([{files}])")
        else:
            self.con.execute(_ddl(table, cols))

    def finish(self) -> IngestSummary:
        """Fold duplicates and conflicts; the counts (the invariant is checked here)."""
        self._flush()
        con = self.con
        self._load("rows", True, _NARROW_COLS)
        self._load("rejects", False, _REJECT_COLS)
        ungradable = self._reject_ungradable()
        con.execute("CREATE TABLE conflicted (problem_id VARCHAR, detail VARCHAR)")
        con.execute("CREATE TABLE firsts AS SELECT problem_id, min(seq) AS seq, count(*) - 1 AS n_dup "
                    "FROM rows GROUP BY problem_id ORDER BY seq")
        self._find_conflicts()
        per_source = {s: {"read": n, "problems": 0, "rejects": self.read_rejects[s] + ungradable[s], "duplicates": 0}
                      for s, n in self.read.items()}
        for src, n_problems, n_dups in con.execute(
                "SELECT r.source, count(f.seq), count(*) - count(f.seq) FROM rows r LEFT JOIN firsts f ON r.seq = f.seq "
                f"WHERE r.{_KEPT} GROUP BY r.source").fetchall():
            per_source[src]["problems"], per_source[src]["duplicates"] = n_problems, n_dups
        n_conflicts = 0
        for src, n in con.execute(f"SELECT source, count(*) FROM rows WHERE NOT {_KEPT} GROUP BY source").fetchall():
            per_source[src]["rejects"] += n
            n_conflicts += n
        reasons = Counter(self.reasons)
        if ungradable:
            reasons["ungradable_gold"] += ungradable.total()
        if n_conflicts:
            reasons["conflicting_gold"] += n_conflicts
        self.summary = IngestSummary(
            rows_read=self.seq, problems=sum(c["problems"] for c in per_source.values()),
            rejects=sum(c["rejects"] for c in per_source.values()),
            duplicates=sum(c["duplicates"] for c in per_source.values()),
            per_source=per_source, reasons=dict(reasons), gold_issues=self._gold_issue_counts())
        check_invariant(self.summary)
        return self.summary

    def _reject_ungradable(self) -> Counter:
        """Grade each distinct gold once; move the rows whose gold can never be graded to the rejects (in their
        input place). The count of such rows per source."""
        con = self.con
        con.execute("CREATE TABLE ungradable (answer VARCHAR, detail VARCHAR)")
        if self.grade_golds is None:
            return Counter()
        cur = con.cursor()
        cur.execute("SELECT DISTINCT answer FROM rows ORDER BY answer")
        while chunk := cur.fetchmany(FETCH_ROWS):
            golds = [g for (g,) in chunk]
            found = [{"answer": g, "detail": d} for g, d in zip(golds, self.grade_golds(golds), strict=True) if d]
            if found:
                batch = pa.Table.from_pylist(found, schema=pa.schema([("answer", pa.string()), ("detail", pa.string())]))
                con.register("found", batch)
                con.execute("INSERT INTO ungradable SELECT * FROM found")
                con.unregister("found")
        cur.close()
        con.execute("INSERT INTO rejects SELECT r.seq, r.source, r.source_id, 'ungradable_gold', u.detail, r.excerpt "
                    "FROM rows r JOIN ungradable u ON r.answer = u.answer")
        counts = Counter(dict(con.execute("SELECT r.source, count(*) FROM rows r JOIN ungradable u "
                                          "ON r.answer = u.answer GROUP BY r.source").fetchall()))
        con.execute("DELETE FROM rows WHERE answer IN (SELECT answer FROM ungradable)")
        return counts

    def _gold_issue_counts(self) -> dict[str, dict[str, int]]:
        """Per source, each gold defect's count: over the kept problems, and (unusable defects) the rows rejected
        as ``garbled_gold``; every source read appears, with an empty dict when its golds are clean."""
        out: dict[str, Counter] = {s: Counter(self.garbled.get(s, {})) for s in self.read}
        for src, issue, n in self.con.execute(
                "SELECT r.source, i.issue, count(*) FROM rows r JOIN firsts f ON r.seq = f.seq, "
                f"unnest(r.gold_issues) AS i(issue) WHERE r.{_KEPT} GROUP BY ALL").fetchall():
            out[src][issue] += n
        return {s: dict(sorted(c.items())) for s, c in sorted(out.items())}

    def _find_conflicts(self) -> None:
        """Compare each repeated problem's distinct golds with its first row's; write the conflicting ids."""
        cur = self.con.cursor()
        cur.execute(
            "SELECT f.problem_id, a.answer, d.answer FROM firsts f JOIN rows a ON a.seq = f.seq "
            "JOIN (SELECT DISTINCT problem_id, answer FROM rows) d ON d.problem_id = f.problem_id "
            "WHERE f.n_dup > 0 AND d.answer <> a.answer ORDER BY f.problem_id, d.answer")
        found: list[dict] = []
        group: list = [None, None, [], 0, False]  # problem_id, first gold, golds shown, other golds, conflicting

        def close() -> None:
            pid, first, shown, n_other, bad = group
            if bad:
                golds = sorted({first, *shown})
                more = f" (+{1 + n_other - len(golds)} more)" if 1 + n_other > len(golds) else ""
                found.append({"problem_id": pid, "detail": f"golds {golds}{more} for problem {pid}"})
            if len(found) >= SPOOL_ROWS:
                self._insert_conflicts(found)

        while chunk := cur.fetchmany(FETCH_ROWS):
            for pid, first, other in chunk:
                if pid != group[0]:
                    if group[0] is not None:
                        close()
                    group[:] = [pid, first, [], 0, False]
                group[3] += 1
                if len(group[2]) < MAX_GOLDS_SHOWN:
                    group[2].append(other[:100])
                if not group[4]:
                    try:
                        group[4] = not golds_equivalent(first, other)
                    except Exception:  # math-verify failed on the pair: not shown equivalent, so a conflict
                        group[4] = True
        if group[0] is not None:
            close()
        self._insert_conflicts(found)
        cur.close()

    def _insert_conflicts(self, found: list[dict]) -> None:
        if found:
            batch = pa.Table.from_pylist(found, schema=pa.schema([("problem_id", pa.string()), ("detail", pa.string())]))
            self.con.register("found", batch)
            self.con.execute("INSERT INTO conflicted SELECT * FROM found")
            self.con.unregister("found")
            found.clear()

    def problem_shards(self, shard_rows: int = field_default(IngestConfig, "shard_rows")) -> Iterator[tuple[str, pa.Table]]:
        """The ``problems`` table in order of first appearance, in shards ``part-00000``, ``part-00001``..."""
        return _cut(self._problem_tables(), schema("problems"), "part", shard_rows)

    def _problem_tables(self) -> Iterator[pa.Table]:
        """Each spool file's kept rows (first of their problem_id, not conflicting), with ``n_duplicates``."""
        assert self.summary is not None, "finish() first"
        sch = schema("problems")
        for path in self._files[True]:
            t = pq.read_table(path)
            seqs = t.column("seq")
            kept = self.con.sql(f"SELECT seq, n_dup FROM firsts WHERE seq BETWEEN $lo AND $hi AND {_KEPT} ORDER BY seq",
                                params={"lo": seqs[0].as_py(), "hi": seqs[-1].as_py()}).to_arrow_table()
            t = t.filter(pc.is_in(seqs, value_set=kept.column("seq")))
            cols = {c: t.column(c) for c in t.column_names}
            cols["n_duplicates"] = kept.column("n_dup")
            yield pa.table({c: cols[c] if c in cols else pa.nulls(t.num_rows, pa.string()) for c in sch.names})

    def reject_shards(self, shard_rows: int = field_default(IngestConfig, "shard_rows")) -> Iterator[tuple[str, pa.Table]]:
        """The ``rejects`` table in input order (conflicts where their rows were), in shards ``ingest-00000``..."""
        assert self.summary is not None, "finish() first"
        sql = ("SELECT 'ingest' AS stage, source, source_id, reason, detail, excerpt FROM ("
               "SELECT seq, source, source_id, reason, detail, excerpt FROM rejects UNION ALL "
               "SELECT r.seq, r.source, r.source_id, 'conflicting_gold', c.detail, r.excerpt "
               "FROM rows r JOIN conflicted c ON r.problem_id = c.problem_id) ORDER BY seq")
        cur = self.con.cursor()
        reader = cur.sql(sql).to_arrow_reader(FETCH_ROWS)
        yield from _cut((pa.Table.from_batches([b]) for b in reader), schema("rejects"), "ingest", shard_rows)
        cur.close()


def _cut(tables: Iterable[pa.Table], sch, prefix: str, shard_rows: int) -> Iterator[tuple[str, pa.Table]]:
    """Re-cut a stream of tables into shards of at most ``shard_rows`` rows and :data:`SHARD_BYTES` of text
    (a single larger row is a shard of its own); at least one shard, empty when there are no rows."""
    pending: list[pa.Table] = []
    rows = size = shards = 0

    def emit() -> tuple[str, pa.Table]:
        nonlocal rows, size, shards
        table = pa.concat_tables(pending).combine_chunks() if pending else sch.empty()
        out = (f"{prefix}-{shards:05d}", sch.validate(table, where=f"{sch.name} shard {shards}"))
        pending.clear()
        rows = size = 0
        shards += 1
        return out

    for t in tables:
        sizes = _row_bytes(t)
        start = 0
        while start < t.num_rows:
            take, acc = 0, size
            while (start + take < t.num_rows and rows + take < shard_rows
                   and (rows + take == 0 or acc + sizes[start + take] <= SHARD_BYTES)):
                acc += sizes[start + take]
                take += 1
            if take:
                pending.append(t.slice(start, take))
                rows, size, start = rows + take, acc, start + take
            if start < t.num_rows:  # this shard is full
                yield emit()
    if rows or not shards:
        yield emit()


def _row_bytes(table: pa.Table) -> list[int]:
    """Each row's text size in bytes (the sum of its string columns)."""
    total = pa.array([0] * table.num_rows, type=pa.int64())
    for col in table.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            total = pc.add(total, pc.fill_null(pc.binary_length(col), 0).cast(pa.int64()))
    return total.to_pylist()
