"""Ingest core: each raw row checked on its own (:func:`check`, pure), then folded (:mod:`pipeline.ingest.fold`).

Every row read ends in exactly one place: a problem, a reject (with one of
:data:`REASONS`), or a duplicate folded into an earlier problem with the same question and
an equivalent gold. ``rows_read == problems + rejects + duplicates`` is checked at the end.
A row that breaks any rule, or whose check raises, is that row's reject: the file and the
stage go on.
"""

from __future__ import annotations

import functools
import json
import math
import re
import reprlib
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.config import IngestConfig, VerifyConfig, field_default
from pipeline.gold import GoldError, boxed_gold, gsm8k_gold, json_gold
from pipeline.ingest.fold import Fold
from pipeline.ingest.gold_lint import lint_gold, unusable
from pipeline.ingest.records import Limits, RawReject, RawRow
from pipeline.ingest.summary import IngestSummary, check_invariant
from pipeline.keys import normalize_question, problem_id
from pipeline.verify.gold_check import GoldBudgetSpent, gold_budget, ungradable_golds

__all__ = ["REASONS", "IngestResult", "IngestSummary", "Limits", "check", "check_invariant", "ingest"]

REASONS: dict[str, str] = {
    "not_utf8": "the line is not valid UTF-8, or a text field holds what UTF-8 cannot encode (a lone surrogate "
                "such as the JSON escape \\ud800)",
    "malformed_json": "the line is not valid JSON (or holds a number Python will not convert, over 4,300 digits)",
    "too_deep": "the line's JSON nests deeper than the parser's recursion limit (about 1,000 levels)",
    "line_too_long": "the line is longer than ingest.max_line_bytes; it is skipped in bounded reads, never parsed",
    "row_too_long": "a Parquet or 🤗 datasets row whose columns hold more than ingest.max_line_bytes bytes (the line "
                    "cap); measured on the Arrow data, never decoded",
    "not_an_object": "the line is JSON but not an object",
    "missing_question": "no question field, or it is null",
    "wrong_type": "question or solution is not a string, or the answer is not a string, number, boolean or "
                  "flat list of numbers (an object, a nested or empty list...)",
    "empty_question": "the question is empty after normalisation",
    "control_characters": "the question holds NUL or other control characters (binary data)",
    "question_too_long": "the question is longer than ingest.max_question_chars (Parquet and 🤗 datasets: measured on "
                         "the Arrow data, before the row is decoded)",
    "missing_gold": "no answer (or solution, for boxed golds) to take the gold from",
    "unparseable_gold": "the gold cannot be extracted, or math-verify cannot parse it",
    "answer_too_long": "the gold is longer than ingest.max_answer_chars (by default verify.max_answer_chars: the "
                       "verifier reads no longer answer, so such a gold could never be answered)",
    "ungradable_gold": "the verifier cannot grade answers against the gold within its bounds (verify.timeout_s, "
                       "verify.memory_mb): graded once against itself and against 0, it times out, errs or is not "
                       "equal to itself; every sample would end the same way",
    "garbled_gold": "the gold lint found a defect that leaves no answer to grade (empty braces, unbalanced "
                    "delimiters: pipeline/ingest/gold_lint.py), named in the detail",
    "solution_too_long": "the solution is longer than ingest.max_solution_chars",
    "field_too_long": "the id, subject or level is longer than ingest.max_field_chars, or the extra columns "
                      "(metadata, as JSON) longer than ingest.max_metadata_chars",
    "bad_source_difficulty": "the source's difficulty value is not a finite number, a fraction such as 3/8 or a "
                             "label such as 'Level 3'",
    "bad_row": "reading or checking the row raised an unexpected error (named in the detail)",
    "conflicting_gold": "the same question appears with non-equivalent golds; every such row is rejected",
}

# A reject row stores at most this much of the row's id, detail and excerpt (a 5 MB id is never stored).
MAX_REJECT_ID = 200
MAX_DETAIL = 500
MAX_EXCERPT = 200

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass
class IngestResult:
    """:func:`ingest`'s answer: the two tables in memory, and the counts."""

    problems: pa.Table
    rejects: pa.Table
    summary: IngestSummary

    @property
    def rows_read(self) -> int:
        return self.summary.rows_read

    @property
    def duplicates(self) -> int:
        return self.summary.duplicates

    @property
    def reasons(self) -> dict[str, int]:
        return self.summary.reasons

    @property
    def per_source(self) -> dict[str, dict[str, int]]:
        return self.summary.per_source

    def metrics(self) -> dict:
        return self.summary.metrics()


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        assert reason in REASONS, reason
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _encodable(text: str, what: str) -> str:
    """``text`` when UTF-8 can encode it (every table is UTF-8); else a ``not_utf8`` reject naming the field.
    JSON's ``\\ud800`` escape decodes to a lone surrogate, which no Parquet file can hold: every text field a row
    keeps passes through here, so such a row is its own reject and never reaches the writer."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Reject("not_utf8", f"{what} holds {text[exc.start:exc.end]!r} at character {exc.start}, which UTF-8 "
                                  "cannot encode (a lone surrogate)") from None
    return text


def _text(value, what: str, reason_missing: str) -> str:
    if value is None:
        raise _Reject(reason_missing, f"no {what}")
    if not isinstance(value, str):
        raise _Reject("wrong_type", f"{what} is {type(value).__name__}, expected a string")
    return _encodable(value, what)


def _gold(row: RawRow, limits: Limits) -> tuple[str, str | None]:
    """Return (gold, solution) for a row, or raise _Reject."""
    solution = row.solution
    if solution is not None and not isinstance(solution, str):
        raise _Reject("wrong_type", f"solution is {type(solution).__name__}, expected a string")
    if solution is not None and len(solution) > limits.max_solution_chars:
        raise _Reject("solution_too_long", f"solution has {len(solution)} characters")
    if solution is not None:
        _encodable(solution, "solution")
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
    return gold, solution


def _linted(gold: str, question: str) -> list:
    """The gold lint's findings (pipeline/ingest/gold_lint.py), the parse check among them: every defect is named,
    also on a gold that one of them makes unusable; an unusable one rejects the row (``unparseable_gold`` when
    math-verify's is the only one, else ``garbled_gold``), its detail naming every finding."""
    try:
        findings = lint_gold(gold, question=question)
    except GoldBudgetSpent as exc:
        raise _Reject("ungradable_gold", str(exc)) from None
    except Exception as exc:  # math-verify internals: any failure means unparseable
        raise _Reject("unparseable_gold", f"unparseable: math-verify failed on {gold[:80]!r}: {exc}") from None
    if bad := unusable(findings):
        reason = "unparseable_gold" if {f.name for f in bad} == {"unparseable"} else "garbled_gold"
        raise _Reject(reason, "; ".join(f"{f.name}: {f.evidence}" for f in findings))
    return findings


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


def _capped(value, what: str, limit: int, knob: str) -> str | None:
    text = None if value is None else str(value)
    if text is not None and len(text) > limit:
        raise _Reject("field_too_long", f"{what} has {len(text)} characters (limit ingest.{knob} = {limit})")
    return None if text is None else _encodable(text, what)


def _fields(row: RawRow, limits: Limits) -> tuple[str | None, str | None, str | None]:
    """(subject, level, metadata JSON), each within its cap, or raise _Reject."""
    _capped(row.source_id, "id", limits.max_field_chars, "max_field_chars")
    subject = _capped(row.subject, "subject", limits.max_field_chars, "max_field_chars")
    level = _capped(row.level, "level", limits.max_field_chars, "max_field_chars")
    meta = json.dumps(row.metadata, sort_keys=True, default=str) if row.metadata else None
    meta = _capped(meta, "the extra columns (metadata)", limits.max_metadata_chars, "max_metadata_chars")
    return subject, level, meta


_LEVEL = re.compile(r"(?i)level\s*([0-9]+)")


def source_difficulty(value) -> float | None:
    """The source's difficulty value as a number, or raise _Reject.

    A number as it is; a string holding a number, a fraction ``"3/8"`` (POLARIS: 3 of 8 samples
    correct -> 0.375) or a label ``"Level 3"`` (MATH -> 3); ``None`` and ``""`` are no value.
        >>> source_difficulty("3/8"), source_difficulty("Level 5"), source_difficulty(0.25)
        (0.375, 5.0, 0.25)
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and len(value) <= 40:
        text = value.strip()
        num, slash, den = text.partition("/")
        try:
            number = float(num) / float(den) if slash else float(text)
        except (ValueError, ZeroDivisionError):
            m = _LEVEL.fullmatch(text)
            number = float(m.group(1)) if m else None
    if number is None or not math.isfinite(number):
        raise _Reject("bad_source_difficulty", f"source difficulty {_excerpt_of(value)} is not a number, a fraction "
                                               "(3/8) or a level (Level 3)")
    return number


def _excerpt_of(value) -> str:
    return repr(value[:60]) if isinstance(value, str) else f"{type(value).__name__} {reprlib.repr(value)}"


def _writable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate) replaced, so a reject row can always be written."""
    return text.encode("utf-8", "replace").decode("utf-8")


def reject_row(rec: RawRow | RawReject, reason: str, detail: str) -> dict:
    """A ``rejects`` row (less its stage) for ``rec``, with the id, detail and excerpt cut to their caps (and any
    lone surrogate in them replaced: the row that held one is rejected for it, its reject must still be written)."""
    sid = str(rec.source_id)
    if len(sid) > MAX_REJECT_ID:
        sid = f"{sid[:MAX_REJECT_ID - 40]}... ({len(sid)} characters)"
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL - 3] + "..."
    return {"source": rec.source, "source_id": _writable(sid), "reason": reason, "detail": _writable(detail),
            "excerpt": _writable(rec.excerpt[:MAX_EXCERPT])}


def check(rec: RawRow | RawReject, limits: Limits = Limits()) -> tuple[bool, dict]:
    """``(True, problem row)`` or ``(False, reject row)`` for one raw row; never raises for a bad row.

    A problem row holds ``problem_id`` and the ``problems`` columns a source fills (no
    ``n_duplicates``: that is the fold's); a reject row is :func:`reject_row`'s.
    """
    if isinstance(rec, RawReject):
        return False, reject_row(rec, rec.reason, rec.detail)
    try:
        question = _question(rec, limits)
        gold, solution = _gold(rec, limits)
        findings = _linted(gold, question)
        subject, level, meta = _fields(rec, limits)
        difficulty = source_difficulty(rec.source_difficulty)
        measure = _capped(rec.source_difficulty_measure, "source_difficulty_measure", limits.max_field_chars,
                          "max_field_chars") if difficulty is not None else None
        pid = problem_id(question)
    except _Reject as exc:
        return False, reject_row(rec, exc.reason, exc.detail)
    except Exception as exc:  # RecursionError, a library's bug...: that row's reject, never the stage's end
        return False, reject_row(rec, "bad_row", f"{type(exc).__name__}: {exc}")
    return True, {
        "problem_id": pid, "source": rec.source, "source_id": rec.source_id, "split": rec.split,
        "question": question, "answer": gold, "gold_issues": [f.name for f in findings],
        "solution": solution, "subject": subject, "level": level,
        "metadata": meta, "excerpt": _writable(rec.excerpt[:MAX_EXCERPT]),
        "source_difficulty": difficulty, "source_difficulty_measure": measure,
    }


def ingest(records: Iterable[RawRow | RawReject], *, limits: Limits = Limits(),
           memory_limit_mb: int = field_default(IngestConfig, "memory_limit_mb"),
           verify: VerifyConfig | None = None, gold_budget_s: float | None = None) -> IngestResult:
    """Check, key and fold ``records`` (in order: the first row of a question wins) into two in-memory tables;
    each distinct gold is graded once under ``verify``'s bounds (None: the defaults) and one the verifier could
    never grade is an ``ungradable_gold`` reject (``gold_budget_s``: the pool's total time for them, None: unbounded).

    For tests and small inputs; the stage (:func:`pipeline.ingest.run`) streams the same fold
    into shards instead. The fold's working storage is a temp folder, removed on return.
    """
    with tempfile.TemporaryDirectory(prefix="passband-ingest-") as tmp, \
            Fold(Path(tmp), memory_limit_mb=memory_limit_mb,
                 grade_golds=functools.partial(ungradable_golds, config=verify or VerifyConfig())) as fold, \
            gold_budget(gold_budget_s):
        for rec in records:
            fold.add(rec.source, *check(rec, limits))
        summary = fold.finish()
        problems = [t for _, t in fold.problem_shards()]
        rejects = [t for _, t in fold.reject_shards()]
    return IngestResult(pa.concat_tables(problems), pa.concat_tables(rejects), summary)
