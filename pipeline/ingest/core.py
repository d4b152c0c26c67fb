"""Ingest core: raw rows in, ``problems`` + ``rejects`` + counts out. Touches no files.

Every row read ends in exactly one place: a problem, a reject (with one of
:data:`REASONS`), or a duplicate folded into an earlier problem with the same question and
an equivalent gold. ``rows_read == problems + rejects + duplicates`` is checked at the end.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.errors import PassbandError
from pipeline.gold import GoldError, boxed_gold, gold_parses, golds_equivalent, gsm8k_gold, json_gold
from pipeline.ingest.records import RawReject, RawRow
from pipeline.keys import normalize_question, problem_id
from pipeline.schema import schema

REASONS: dict[str, str] = {
    "not_utf8": "the line is not valid UTF-8",
    "malformed_json": "the line is not valid JSON",
    "not_an_object": "the line is JSON but not an object",
    "missing_question": "no question field, or it is null",
    "wrong_type": "question or solution is not a string, or the answer is not a string, number, boolean or "
                  "flat list of numbers (an object, a nested or empty list...)",
    "empty_question": "the question is empty after normalisation",
    "control_characters": "the question holds NUL or other control characters (binary data)",
    "question_too_long": "the question is longer than ingest.max_question_chars",
    "missing_gold": "no answer (or solution, for boxed golds) to take the gold from",
    "unparseable_gold": "the gold cannot be extracted, or math-verify cannot parse it",
    "answer_too_long": "the gold is longer than ingest.max_answer_chars",
    "solution_too_long": "the solution is longer than ingest.max_solution_chars",
    "conflicting_gold": "the same question appears with non-equivalent golds; every such row is rejected",
}

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class InvariantError(PassbandError):
    pass


@dataclass(frozen=True)
class Limits:
    max_question_chars: int = 20_000
    max_answer_chars: int = 1_000
    max_solution_chars: int = 50_000


@dataclass
class IngestResult:
    problems: pa.Table
    rejects: pa.Table
    rows_read: int
    duplicates: int
    per_source: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)

    def metrics(self) -> dict:
        return {
            "rows_read": self.rows_read,
            "problems": self.problems.num_rows,
            "rejects": self.rejects.num_rows,
            "duplicates": self.duplicates,
            "reject_reasons": dict(sorted(self.reasons.items())),
            "sources": self.per_source,
        }


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        assert reason in REASONS, reason
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _text(value, what: str, reason_missing: str) -> str:
    if value is None:
        raise _Reject(reason_missing, f"no {what}")
    if not isinstance(value, str):
        raise _Reject("wrong_type", f"{what} is {type(value).__name__}, expected a string")
    return value


def _gold(row: RawRow, limits: Limits) -> tuple[str, str | None]:
    """Return (gold, solution) for a row, or raise _Reject."""
    solution = row.solution
    if solution is not None and not isinstance(solution, str):
        raise _Reject("wrong_type", f"solution is {type(solution).__name__}, expected a string")
    if solution is not None and len(solution) > limits.max_solution_chars:
        raise _Reject("solution_too_long", f"solution has {len(solution)} characters")
    try:
        if row.gold_from == "boxed":
            gold = boxed_gold(_text(solution, "solution", "missing_gold"))
        elif row.gold_from == "gsm8k":
            gold = gsm8k_gold(_text(row.answer, "answer", "missing_gold"))
        else:
            ans = row.answer
            if ans is not None:
                try:
                    ans = json_gold(ans)  # numbers, booleans and lists of numbers are ordinary golds
                except TypeError as exc:
                    raise _Reject("wrong_type", str(exc)) from None
            gold = _text(ans, "answer", "missing_gold").strip()
            if not gold:
                raise _Reject("missing_gold", "answer is empty")
    except GoldError as exc:
        raise _Reject("unparseable_gold", str(exc)) from None
    if len(gold) > limits.max_answer_chars:
        raise _Reject("answer_too_long", f"gold has {len(gold)} characters")
    try:
        ok = gold_parses(gold)
    except Exception as exc:  # math-verify internals: any failure means unparseable
        raise _Reject("unparseable_gold", f"math-verify failed on {gold[:80]!r}: {exc}") from None
    if not ok:
        raise _Reject("unparseable_gold", f"math-verify cannot parse {gold[:80]!r}")
    return gold, solution


def _question(row: RawRow, limits: Limits) -> str:
    q = _text(row.question, "question", "missing_question")
    if len(q) > limits.max_question_chars:
        raise _Reject("question_too_long", f"question has {len(q)} characters (limit {limits.max_question_chars})")
    if _CONTROL.search(q):
        raise _Reject("control_characters", "question holds control characters")
    q = normalize_question(q)
    if not q:
        raise _Reject("empty_question", "question is empty")
    return q


def _opt_str(v) -> str | None:
    return None if v is None else str(v)


def ingest(records: Iterable[RawRow | RawReject], *, limits: Limits = Limits()) -> IngestResult:
    """Validate, normalise, key and de-duplicate ``records`` (in order: the first row of a question wins)."""
    prob_cols: dict[str, list] = defaultdict(list)
    rejects: list[dict] = []
    index: dict[str, int] = {}  # problem_id -> row in prob_cols
    members: dict[str, list[dict]] = defaultdict(list)  # problem_id -> duplicate rows folded into it
    conflicted: set[str] = set()
    stats: dict[str, Counter] = defaultdict(Counter)
    rows_read = 0

    def reject(src: str, sid: str, reason: str, detail: str, excerpt: str) -> None:
        rejects.append({"stage": "ingest", "source": src, "source_id": sid, "reason": reason,
                        "detail": detail, "excerpt": excerpt[:200]})
        stats[src]["rejects"] += 1

    for rec in records:
        rows_read += 1
        stats[rec.source]["read"] += 1
        if isinstance(rec, RawReject):
            reject(rec.source, rec.source_id, rec.reason, rec.detail, rec.excerpt)
            continue
        try:
            question = _question(rec, limits)
            gold, solution = _gold(rec, limits)
        except _Reject as exc:
            reject(rec.source, rec.source_id, exc.reason, exc.detail, rec.excerpt)
            continue
        pid = problem_id(question)
        row = {"source": rec.source, "source_id": rec.source_id, "answer": gold, "excerpt": rec.excerpt}
        if pid in index:
            first = prob_cols["answer"][index[pid]]
            members[pid].append(row)
            if pid not in conflicted and not golds_equivalent(first, gold):
                conflicted.add(pid)
            continue
        index[pid] = len(prob_cols["problem_id"])
        for k, v in (
            ("problem_id", pid), ("source", rec.source), ("source_id", rec.source_id), ("split", rec.split),
            ("question", question), ("answer", gold), ("solution", solution),
            ("subject", _opt_str(rec.subject)), ("level", _opt_str(rec.level)),
            ("metadata", json.dumps(rec.metadata, sort_keys=True, default=str) if rec.metadata else None),
            ("excerpt", rec.excerpt),
        ):
            prob_cols[k].append(v)

    # conflicts: the first row and every folded row become rejects
    drop = sorted(index[pid] for pid in conflicted)
    for pid in conflicted:
        i = index[pid]
        golds = sorted({prob_cols["answer"][i], *(m["answer"] for m in members[pid])})
        detail = f"golds {golds} for problem {pid}"
        reject(prob_cols["source"][i], prob_cols["source_id"][i], "conflicting_gold", detail, prob_cols["excerpt"][i])
        for m in members.pop(pid):
            reject(m["source"], m["source_id"], "conflicting_gold", detail, m["excerpt"])
    n_dups = [len(members.get(pid, ())) for pid in prob_cols["problem_id"]]
    for ms in members.values():
        for m in ms:
            stats[m["source"]]["duplicates"] += 1
    dropped = set(drop)
    keep = pa.array([i not in dropped for i in range(len(n_dups))], type=pa.bool_())

    sch = schema("problems")
    n = len(prob_cols["problem_id"])
    data = {c: prob_cols.get(c, [None] * n) for c in sch.names if c != "n_duplicates"}
    data["n_duplicates"] = n_dups
    problems = pa.table({c: pa.array(data[c], type=sch.arrow.field(c).type) for c in sch.names}, schema=sch.arrow)
    problems = problems.filter(keep) if n else problems
    for src in problems.column("source").to_pylist():
        stats[src]["problems"] += 1
    rejects_table = schema("rejects").from_rows(rejects)

    duplicates = sum(len(ms) for ms in members.values())
    result = IngestResult(
        problems=problems, rejects=rejects_table, rows_read=rows_read, duplicates=duplicates,
        per_source={s: {k: c.get(k, 0) for k in ("read", "problems", "rejects", "duplicates")} for s, c in stats.items()},
        reasons=dict(Counter(r["reason"] for r in rejects)),
    )
    check_invariant(result)
    return result


def check_invariant(result: IngestResult) -> None:
    total = result.problems.num_rows + result.rejects.num_rows + result.duplicates
    if total != result.rows_read:
        raise InvariantError(
            f"rows read {result.rows_read} != problems {result.problems.num_rows} + rejects "
            f"{result.rejects.num_rows} + duplicates {result.duplicates}"
        )
    for src, c in result.per_source.items():
        if c["read"] != c["problems"] + c["rejects"] + c["duplicates"]:
            raise InvariantError(f"source {src}: {c}")
