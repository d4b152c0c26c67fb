"""Per-rollout flag detectors: one signature, one registry; the runner owns batching and counting.

A detector is a :class:`Detector`: a SQL predicate ``where`` over the ``samples`` view (one row
per verified rollout, with its problem and its group's counts) that selects the candidate rows
cheaply inside DuckDB, and a Python ``detect(row, opts) -> Hit | None`` that decides and
writes the evidence. The runner (:func:`run_detectors`) streams only candidate rows out of
DuckDB in Arrow batches, so a detector never sees the rows it cannot fire on and never
batches, counts or reports progress itself.

Joining every rollout's text to its verdict is the expensive part at scale, so each detector
also names its ``side``: ``rollouts`` (its candidates are decided by the rollout's own columns
and its problem) or ``verdicts`` (by the verdict, the group's counts and the problem). A
``scan`` predicate over that side alone (default: ``where``) must hold whenever ``where`` does;
the candidate keys come from one scan of each side (:func:`candidate_keys_sql`), and only those
rows are joined into ``samples`` rows. Columns of a ``samples`` row::

    problem_id policy_id sample_idx status extracted completion n_tokens finish_reason
    question n n_correct pass_rate steps ref_steps median_correct_steps

One real row that fires ``rare_success`` (SmolLM2-135M, 3-shot, k = 8)::

    "What is 52 - 27?"  completion "52 - 27 = 25. The answer is 25."  1 of 8 correct
    -> score 2.47 (= 7 / sqrt(8)), evidence "1 of 8 correct (pass rate 0.125): GRPO advantage 2.47 (TRL, sample std)"

Kinds: ``risk`` (rare_success: a success that GRPO amplifies), ``shortcut`` (a success
that may not come from solving: answer_repetition, computation_skip, answer_in_question,
multiple_answers; these make up ``flagged_correct_rate``), ``degeneracy`` (repetition_loop, answer_flip,
truncated).
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pydantic import Field

from pipeline.annotate.arith import LATEX_PER_TEXT, LEADING, answer_key, answer_value, computes, stated_answers
from pipeline.config import AnnotateConfig, Model, field_default
from pipeline.numbers import IN_TEXT, IN_TEXT_SQL
from pipeline.schema import schema
from pipeline.sqltext import sql_literal
from pipeline.stats import TRL_STD_EPS, grpo_advantage
from pipeline.thinking import SQL_HAS_THINKING, final_section
from pipeline.thinking import split as split_thinking
from pipeline.verify.grader import normalize_answer

KINDS = ("risk", "shortcut", "degeneracy")


class FlagOptions(Model):
    """Detector knobs (``annotate.options`` in params.yaml).

    The rare-success threshold comes from ``annotate.rare_success_max_pass_rate``.
    """

    rare_success_max_pass_rate: float = Field(field_default(AnnotateConfig, "rare_success_max_pass_rate"), ge=0, le=1)
    computation_skip_ratio: float = Field(0.67, gt=0, le=1, description="fire below this share of the reference's steps"
                                          " (chosen on the labelled set: docs/flags.md)")
    computation_skip_min_correct: int = Field(3, ge=2, description="correct samples needed when there is no reference solution")
    answer_repetition_min: int = Field(3, ge=2, description="the final answer stated at least this many times")
    line_repetition_min: int = Field(3, ge=2, description="one line (>= 3 characters) written at least this many times")
    unsupported_setup: bool = Field(True, description="unsupported_answer also fires when the working never uses a "
                                                        "number of the question (wrong setup; docs/flags.md)")
    loop_min_words: int = Field(24, ge=8)
    loop_max_distinct_ratio: float = Field(0.5, gt=0, lt=1,
                                           description="distinct word 4-grams / all 4-grams below this is a loop")
    answer_flip_min_switches: int = Field(3, ge=1, description="answer_flip: switches of the thinking's answer "
                                                                 "(returning to an earlier one) that fire")


@dataclass(frozen=True)
class Hit:
    score: float | None
    evidence: str


@dataclass(frozen=True)
class Detector:
    name: str
    kind: str
    where: str  # SQL predicate over `samples`; may use {opts.<field>}
    detect: Callable[[dict, FlagOptions], Hit | None]
    doc: str
    # optional: the same decision as SQL expressions over `samples`; then the runner lets DuckDB write the
    # hits (no row reaches Python) and `detect` is the reference the tests compare the SQL with
    score_sql: str | None = None
    evidence_sql: str | None = None
    side: str = "rollouts"  # the side whose columns decide the candidates: "rollouts" or "verdicts"
    scan: str | None = None  # a predicate over that side's columns only that `where` implies (default: `where`)

    @property
    def sql_only(self) -> bool:
        return self.score_sql is not None and self.evidence_sql is not None

    def where_sql(self, opts: FlagOptions) -> str:
        return self.where.format(opts=opts)

    def scan_sql(self, opts: FlagOptions) -> str:
        return (self.scan or self.where).format(opts=opts)


# the columns each side's scan can see (views built by pipeline.annotate.core.prepare)
SIDE_COLUMNS = {
    "rollouts": ("problem_id", "policy_id", "sample_idx", "completion", "n_tokens", "finish_reason", "question", "steps",
                 "ref_steps", "median_correct_steps"),
    "verdicts": ("problem_id", "policy_id", "sample_idx", "status", "extracted", "question", "n", "n_correct", "pass_rate"),
}


def registrar(into: dict[str, Detector]) -> Callable:
    """A ``register(name, *, kind, where, ...)`` decorator that records each detector it decorates in ``into``.

    Each detector module keeps its own dict; :mod:`pipeline.annotate.detectors` builds the registry from them.
    """

    def register(name: str, *, kind: str, where: str, score_sql: str | None = None, evidence_sql: str | None = None,
                 side: str = "rollouts", scan: str | None = None) -> Callable:
        if kind not in KINDS:
            raise ValueError(f"unknown detector kind {kind!r}; known: {KINDS}")
        if side not in SIDE_COLUMNS:
            raise ValueError(f"unknown detector side {side!r}; known: {tuple(SIDE_COLUMNS)}")

        def deco(fn: Callable[[dict, FlagOptions], Hit | None]) -> Callable:
            into[name] = Detector(name, kind, where, fn, (fn.__doc__ or "").strip(), score_sql, evidence_sql, side, scan)
            return fn

        return deco

    return register


# the detectors defined in this module, in order (pipeline.annotate.detectors.DETECTORS is the registry)
FLAG_DETECTORS: dict[str, Detector] = {}
register = registrar(FLAG_DETECTORS)


# -- steps: SQL and Python agree (tests check) ------------------------------------------------

STEPS_SQL = "(length({x}) - length(replace({x}, '=', '')))"
REF_STEPS_SQL = STEPS_SQL.format(x="regexp_replace({x}, '<<[^>]*>>', '', 'g')")


def steps(text: str) -> int:
    """Reasoning steps of a text: its '=' signs (GSM8K's <<48/2=24>> calculator notes removed)."""
    return re.sub(r"<<[^>]*>>", "", text).count("=")


# TRL's advantage of a success (pipeline.stats.grpo_advantage) over `samples` columns
ADVANTAGE_SQL = (f"CASE WHEN n_correct = n THEN 0 ELSE (1 - pass_rate) / (sqrt(n * pass_rate * (1 - pass_rate) / (n - 1))"
                 f" + {TRL_STD_EPS}) END")


# -- detectors ---------------------------------------------------------------------------------

@register("rare_success", kind="risk", side="verdicts",
          where="status = 'correct' AND pass_rate <= {opts.rare_success_max_pass_rate}",
          score_sql=ADVANTAGE_SQL,
          evidence_sql="format('{{}} of {{}} correct (pass rate {{:.3f}}): GRPO advantage {{:.2f}} (TRL, sample std)', n_correct,"
                       f" n, pass_rate, {ADVANTAGE_SQL})")
def rare_success(row: dict, opts: FlagOptions) -> Hit | None:
    """Correct in a group whose pass rate is at or below ``rare_success_max_pass_rate``.

    Score: the advantage this sample gets in TRL's GRPOTrainer (group rewards over their sample
    std + 1e-4; :func:`pipeline.stats.grpo_advantage`): 2.47 for one success in 8, the
    amplification of a possibly lucky success.
    """
    adv = grpo_advantage(row["n_correct"], row["n"])
    return Hit(adv, f"{row['n_correct']} of {row['n']} correct (pass rate {row['pass_rate']:.3f}): "
                    f"GRPO advantage {adv:.2f} (TRL, sample std)")


@register("truncated", kind="degeneracy", where="finish_reason = 'length'", score_sql="n_tokens::DOUBLE",
          evidence_sql="format('stopped at max_tokens after {{}} tokens ({{}})', n_tokens, status)")
def truncated(row: dict, opts: FlagOptions) -> Hit | None:
    """Generation stopped at max_tokens (finish_reason = length). Score: tokens generated."""
    return Hit(float(row["n_tokens"]), f"stopped at max_tokens after {row['n_tokens']} tokens ({row['status']})")


def _number(text: str) -> float | None:
    try:
        v = float(text.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@register("answer_in_question", kind="shortcut", side="verdicts",
          where="status = 'correct' AND extracted IS NOT NULL"
                " AND contains(replace(question, ',', ''),"
                " regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))"
                " AND list_contains(list_transform("
                f"regexp_extract_all(question, '{IN_TEXT_SQL}'), lambda x: replace(x, ',', '')), "
                "regexp_replace(replace(extracted, ',', ''), '^[\\s$]+|[\\s$.]+$', '', 'g'))")
def answer_in_question(row: dict, opts: FlagOptions) -> Hit | None:
    """A correct final answer that is one of the numbers in the question and that no true statement of the
    working computes (copied, not computed: "5 * 1 = 5" does not fire).

    Score: 1 / (distinct numbers in the question), the chance of guessing it by copying one.
    """
    if row["status"] != "correct" or row["extracted"] is None:
        return None
    ans = _number(normalize_answer(row["extracted"]))
    if ans is None:
        return None
    nums = [v for v in (_number(m) for m in IN_TEXT.findall(row["question"])) if v is not None]
    distinct = sorted(set(nums))
    if ans not in distinct or computes(row["completion"], ans):
        return None
    shown = ", ".join(f"{v:g}" for v in distinct[:12])
    return Hit(1.0 / len(distinct), f"answer {ans:g} is one of the question's numbers [{shown}]")


@register("computation_skip", kind="shortcut",
          where="status = 'correct' AND CASE WHEN coalesce(ref_steps, 0) > 0"
                " THEN steps < {opts.computation_skip_ratio} * ref_steps"
                " ELSE n_correct >= {opts.computation_skip_min_correct}"
                " AND steps < {opts.computation_skip_ratio} * median_correct_steps END",
          scan="steps < {opts.computation_skip_ratio}"
               " * CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END",
          score_sql="steps / CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END",
          evidence_sql="format('{{}} steps where {{}} has {{:g}}', steps,"
                       " CASE WHEN coalesce(ref_steps, 0) > 0 THEN 'the reference solution' ELSE 'the median correct sample' END,"
                       " (CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END)::DOUBLE)")
def computation_skip(row: dict, opts: FlagOptions) -> Hit | None:
    """Correct with far fewer reasoning steps ('=' signs) than the problem needs.

    Needed steps: the reference solution's, else the median of the group's correct samples
    (when there are at least ``computation_skip_min_correct``). Fires below
    ``computation_skip_ratio`` of it. Score: steps / needed.
    """
    need, basis = row.get("ref_steps"), "the reference solution"
    if not need:
        if row["n_correct"] < opts.computation_skip_min_correct or not row.get("median_correct_steps"):
            return None
        need, basis = row["median_correct_steps"], "the median correct sample"
    have = row["steps"]
    if have >= opts.computation_skip_ratio * need:
        return None
    return Hit(have / need, f"{have} steps where {basis} has {need:g}")


# where a final answer can be stated: every candidate (pipeline.verify.extract.candidates) starts at one of
# these, so N candidates need N matches (case-insensitive "answer" covers "The ANSWER to the question is")
_MARKERS = r"(?:answer|\\boxed|\\fbox|####)"


@register("answer_repetition", kind="shortcut",
          where=f"regexp_matches(completion, '(?is)(?:.*?{_MARKERS}){{{{{{opts.answer_repetition_min}}}}}}')"
                " OR length(completion) - length(replace(completion, chr(10), '')) >= {opts.line_repetition_min} - 1")
def answer_repetition(row: dict, opts: FlagOptions) -> Hit | None:
    """The final answer stated many times, or one line written many times.

    Fires when the completion states the same final answer (box, '####' line, "the answer is")
    at least ``answer_repetition_min`` times, or a line of 3+ characters appears
    ``line_repetition_min`` times. Working that merely uses the number ("6 - 4 = 2") does not
    count. After a thinking block (``<think>...</think>``) only the final section counts: a reasoning model
    restates its candidate and its "Wait, let me check" lines while it thinks (a loop there is
    ``repetition_loop``'s). Score: the count.
    """
    text = final_section(row["completion"])
    stated = Counter(normalize_answer(a) for a in stated_answers(text))
    if stated:
        ans, n = stated.most_common(1)[0]
        if n >= opts.answer_repetition_min:
            return Hit(float(n), f"final answer {ans!r} stated {n} times")
    lines = Counter(ln.strip() for ln in text.split("\n") if len(ln.strip()) >= 3)
    if lines:
        line, n = lines.most_common(1)[0]
        if n >= opts.line_repetition_min:
            return Hit(float(n), f"line {line[:60]!r} written {n} times")
    return None


def _loop_words(text: str) -> list[str]:
    """The words of ``text``, a word holding a digit as ``#``. Each distinct word is tested once: a long chain of
    thought repeats its words, and the test of every word was the largest cost of annotate on long completions."""
    words = text.split()
    mark = {w: "#" if any(ch.isdigit() for ch in w) else w for w in set(words)}
    return [mark[w] for w in words]


# prefilter: loop_min_words words need at least that many characters and a space between each two
@register("repetition_loop", kind="degeneracy", where="length(completion) >= 2 * {opts.loop_min_words} - 1")
def repetition_loop(row: dict, opts: FlagOptions) -> Hit | None:
    """The text loops: few distinct word 4-grams, or text that compresses to almost nothing.

    Fires when distinct 4-grams / all 4-grams < ``loop_max_distinct_ratio`` (with at least
    ``loop_min_words`` words; a word holding a digit counts as ``#``, so "She has 72 stickers.
    She has 720 stickers. ..." loops), or zlib shrinks 200+ characters below 15 %. Score: 1 - distinct ratio.
    """
    text = row["completion"]
    words = _loop_words(text)
    if len(words) >= opts.loop_min_words:
        grams = Counter(zip(words, words[1:], words[2:], words[3:], strict=False))
        ratio = len(grams) / sum(grams.values())
        if ratio < opts.loop_max_distinct_ratio:
            gram, n = grams.most_common(1)[0]
            return Hit(1 - ratio, f"{ratio:.0%} distinct 4-grams; {' '.join(gram)!r} x{n}")
    if len(text) >= 200:
        packed = len(zlib.compress(text.encode())) / len(text.encode())
        if packed < 0.15:
            return Hit(1 - packed, f"compresses to {packed:.0%} of {len(text)} characters")
    return None


@register("multiple_answers", kind="shortcut", where=f"regexp_matches(completion, '(?is){_MARKERS}.*{_MARKERS}')")
def multiple_answers(row: dict, opts: FlagOptions) -> Hit | None:
    """Several different final answers (boxes, '####' lines, "the answer is" phrases): hedging.

    Answers are compared as the grader normalises them, then as numbers where they are
    (``943 * 13 = 10,229`` and ``10229`` are one answer); a phrase of 4+ words that is not arithmetic is
    not an answer. After a thinking block only the final section counts (trying answers while thinking is
    not hedging: ``answer_flip`` reads the thinking). Score: the number of distinct answers. On a long chain of
    thought, the first
    ``LATEX_PER_TEXT`` distinct LaTeX answers are compared by value, the rest as normalised text.
    """
    seen: dict[str, str] = {}
    latex: set[str] = set()  # answers whose LaTeX sympy read (at most LATEX_PER_TEXT a text: long chains of thought)
    for a in stated_answers(final_section(row["completion"])):
        sympy_ok = "\\" not in a or a in latex or len(latex) < LATEX_PER_TEXT
        if "\\" in a and sympy_ok and answer_value(a, latex=False) is None:
            latex.add(a)
        if len(a.split()) > 3 and answer_value(a, latex=sympy_ok) is None:
            # "2 * 6 = 12 bolts of blue fibre, so ...": the leading arithmetic is the answer; "Ana has 17 - Ana's
            # friend's marbles now" is prose, not an answer
            if not (m := LEADING.match(a)):
                continue
            a = m.group(1)
        seen.setdefault(answer_key(a, latex=sympy_ok), a)
    if len(seen) < 2:
        return None
    shown = ", ".join(repr(a) for a in list(seen.values())[:6])
    return Hit(float(len(seen)), f"{len(seen)} different final answers: {shown}")


_MARKER = re.compile(r"(?i)\\boxed|\\fbox|####|\banswer\b")
_PIECE_END = re.compile(r"[.\n]")


def answers_in_order(text: str) -> list[str]:
    """The stated answers (:func:`stated_answers`) in text order: the text is cut at every answer marker and each
    piece read on its own (``stated_answers`` lists boxes first, then ``####`` lines, then phrases). Linear."""
    starts: list[int] = []
    for m in _MARKER.finditer(text):
        # "the answer is $\\boxed{42}$": the phrase and its box are one piece (a phrase cut before its box reads "$")
        if starts and m.group()[0] == "\\" and text[starts[-1]:starts[-1] + 1].lower() == "a" \
                and m.start() - starts[-1] <= 40 and not _PIECE_END.search(text, starts[-1], m.start()):
            continue
        starts.append(m.start())
    out: list[str] = []
    for a, b in zip(starts, [*starts[1:], len(text)][:len(starts)], strict=True):
        out.extend(stated_answers(text[a:b]))
    return out


@register("answer_flip", kind="degeneracy", where=SQL_HAS_THINKING)
def answer_flip(row: dict, opts: FlagOptions) -> Hit | None:
    """The final answer differs from the thinking's last answer, or the thinking flip-flops between answers.

    Reads a reasoning model's completion apart (:mod:`pipeline.thinking`): fires when the thinking
    closes and the final section's last answer differs by value from the last answer stated inside the
    thinking, or when the thinking switches its answer at least ``answer_flip_min_switches`` times and comes
    back to one it had left (5, 7, 5, 7). Score: the switches inside the thinking (+ 1 when the final answer
    differs).
    """
    part = split_thinking(row["completion"])
    if part.thinking is None:
        return None
    stated = answers_in_order(part.thinking)
    keys = [answer_key(a, latex=False) for a in stated]
    seq = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]  # runs of one answer collapsed
    switches = len(seq) - 1
    final = answers_in_order(part.final) if part.closed else []
    if final and stated and answer_key(final[-1], latex=False) != keys[-1]:
        return Hit(float(switches + 1), f"final answer {final[-1]!r} differs from the thinking's last answer "
                                        f"{stated[-1]!r}")
    if switches >= opts.answer_flip_min_switches and len(set(seq)) < len(seq):
        shown = " -> ".join(seq[:8]) + (" -> ..." if len(seq) > 8 else "")
        return Hit(float(switches), f"the thinking switches its answer {switches} times: {shown}")
    return None


# -- the runner --------------------------------------------------------------------------------

# the hits the runner yields: the flags table's columns, plus whether the flagged rollout was correct
HITS_SCHEMA = schema("flags").arrow.append(pa.field("correct", pa.bool_(), nullable=False))

SAMPLE_COLUMNS = ("problem_id", "policy_id", "sample_idx", "status", "extracted", "completion", "n_tokens",
                  "finish_reason", "question", "n", "n_correct", "pass_rate", "steps", "ref_steps",
                  "median_correct_steps")


def candidate_sql(detectors: Sequence[Detector], opts: FlagOptions, *, source: str = "samples") -> str:
    """One scan: every row that is a candidate of at least one detector, with a boolean column per detector."""
    preds = [f"({d.where_sql(opts)})" for d in detectors]
    marks = (f"coalesce({p}, false) AS \"c_{d.name}\"" for p, d in zip(preds, detectors, strict=True))
    cols = ", ".join([*SAMPLE_COLUMNS, *marks])
    return f"SELECT {cols} FROM {source} WHERE " + " OR ".join(preds)


def candidate_keys_sql(detectors: Sequence[Detector], opts: FlagOptions, *, rollouts: str = "rollout_samples",
                       verdicts: str = "verdict_samples") -> str:
    """The keys of every candidate row: one scan of each side with the ``scan`` predicates of its detectors."""
    parts = []
    for side, source in (("rollouts", rollouts), ("verdicts", verdicts)):
        preds = [f"({d.scan_sql(opts)})" for d in detectors if d.side == side]
        if preds:
            parts.append(f"SELECT problem_id, policy_id, sample_idx FROM {source} WHERE " + " OR ".join(preds))
    return " UNION ".join(parts)


def sql_hits_sql(detectors: Sequence[Detector], opts: FlagOptions, *, source: str) -> str:
    """The hits of the SQL-only detectors, as one UNION ALL over ``source`` (HITS_SCHEMA columns)."""
    parts = [f"SELECT problem_id, policy_id, sample_idx, {sql_literal(d.name)} AS flag, "
             f"({d.score_sql.format(opts=opts)})::DOUBLE AS score, "
             f"{d.evidence_sql.format(opts=opts)} AS evidence, status = 'correct' AS correct "
             f"FROM {source} WHERE \"c_{d.name}\"" for d in detectors if d.sql_only]
    return " UNION ALL ".join(parts)


@dataclass
class FlagCounts:
    candidates: dict[str, int]
    fired: dict[str, int]
    errors: dict[str, int] = field(default_factory=dict)  # detector -> rows where it raised (a detector_error row each)


# the flag a row gets when a detector raises on it (not a registered detector: no candidates, no rate of its own)
DETECTOR_ERROR = "detector_error"
_ERROR_MESSAGE_CHARS = 200


def error_hit(detector: str, exc: BaseException) -> Hit:
    """The record of a detector that raised on one rollout: no score, the detector and the exception as evidence."""
    message = " ".join(str(exc).split())[:_ERROR_MESSAGE_CHARS]
    return Hit(None, f"{detector}: error:{type(exc).__name__}" + (f": {message}" if message else ""))


def run_detectors(batches: Iterator[pa.RecordBatch], detectors: Sequence[Detector], opts: FlagOptions,
                  *, counts: FlagCounts | None = None, on_batch: Callable[[int], None] | None = None
                  ) -> Iterator[pa.RecordBatch]:
    """Apply each detector to its candidate rows; yield hit batches (``flags`` columns plus ``correct``, one per input batch).

    A detector that raises on a row gives that row a ``detector_error`` flag (score null, evidence
    ``"<detector>: error:<ExceptionType>: <message>"``), counted in ``counts.errors``; the other detectors and rows go on.
    """
    sch = HITS_SCHEMA
    for batch in batches:
        rows = batch.to_pylist()
        out: dict[str, list] = {c: [] for c in sch.names}
        for row in rows:
            for d in detectors:
                if not row[f"c_{d.name}"]:
                    continue
                if counts is not None:
                    counts.candidates[d.name] = counts.candidates.get(d.name, 0) + 1
                flag = d.name
                try:
                    hit = d.detect(row, opts)
                except Exception as exc:  # one detector on one rollout: a recorded row, never a crashed stage
                    hit, flag = error_hit(d.name, exc), DETECTOR_ERROR
                    if counts is not None:
                        counts.errors[d.name] = counts.errors.get(d.name, 0) + 1
                if hit is None:
                    continue
                if counts is not None and flag != DETECTOR_ERROR:
                    counts.fired[d.name] = counts.fired.get(d.name, 0) + 1
                score = hit.score if hit.score is None or math.isfinite(hit.score) else None
                for k, v in (("problem_id", row["problem_id"]), ("policy_id", row["policy_id"]),
                             ("sample_idx", row["sample_idx"]), ("flag", flag), ("score", score),
                             ("evidence", hit.evidence), ("correct", row["status"] == "correct")):
                    out[k].append(v)
        if on_batch:
            on_batch(len(rows))
        if out["flag"]:
            yield pa.RecordBatch.from_pydict(out, schema=sch)
