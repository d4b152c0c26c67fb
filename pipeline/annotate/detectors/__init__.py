"""The flag detectors: one file each in this folder, registered by name in :data:`DETECTORS`.

A detector is a :class:`Detector` subclass (the one plugin shape: :class:`pipeline.plugins.Plugin`) registered with
:func:`register`. Its class attributes are everything the rest of passband reads about it: ``name``, its ``kind``
(``risk``, ``shortcut`` or ``degeneracy``), the ``label`` of the labelled set it claims (docs/flags.md; None where no
reading of one completion decides it), its knobs (``Options``: a :class:`pipeline.config.Model`, set under
``annotate.options.<name>``), a SQL predicate ``where`` over the ``samples`` view (the cheap prefilter; it may use
``{opts.<knob>}``); its one method is ``detect(row) -> Hit | None``, the decision and its evidence, reading its knobs
from ``self.options``. The first line of its docstring is its row in the docs and the catalog. A whole detector::

    @register
    class LongAnswer(Detector):
        \"\"\"A completion of at least ``min_tokens`` tokens. Score: its tokens.\"\"\"

        name = "long_answer"
        kind = "degeneracy"
        where = "n_tokens >= {opts.min_tokens}"

        class Options(Model):
            min_tokens: int = Field(500, gt=0, description="fire at or above this many tokens")

        def detect(self, row: dict) -> Hit | None:
            return Hit(float(row["n_tokens"]), f"{row['n_tokens']} tokens")

and its knob in params.yaml: ``annotate: {options: {long_answer: {min_tokens: 800}}}``.

Adding a detector is adding such a file here (or listing it in params.yaml's ``plugins``: docs/operations.md); the
runner (:mod:`pipeline.annotate.flag_runner`) owns batching, counting and errors. ``score_sql``/``evidence_sql``
(optional) are the same decision as SQL, so DuckDB writes the hits; ``side`` and ``scan`` say which table's columns
decide the candidates (see the runner).

**The row.** ``detect`` gets a dict of every column of :data:`SIDE_COLUMNS` (both sides: problem_id, policy_id,
sample_idx, status, extracted, completion, n_tokens, finish_reason, question, n, n_correct, pass_rate, steps,
ref_steps, median_correct_steps; n_tokens and finish_reason may be null for imported completions). ``where`` may
use any of them; the cheap first scan runs over one side's columns only (``side``: ``rollouts`` or ``verdicts``,
the columns listed there), so ``scan`` (``where`` when not given) must name only that side's columns, and
``detect`` must also accept rows its ``where`` would drop (the runner may hand it a row another detector made a
candidate). A ``where`` or ``scan`` naming a column the side does not have is a :class:`ConfigError` when the
detector registers, naming the column and the side's columns.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from pipeline.annotate.hit import Hit
from pipeline.annotate.measured import measured
from pipeline.config import ConfigError, parse_options, unknown_name
from pipeline.plugins import NoOptions, Plugin, Registry, origin_of
from pipeline.sqltext import sql_literal

KINDS = ("risk", "shortcut", "degeneracy")

# the columns each side's scan can see (views built by pipeline.annotate.core.prepare)
SIDE_COLUMNS = {
    "rollouts": ("problem_id", "policy_id", "sample_idx", "completion", "n_tokens", "finish_reason", "question", "steps",
                 "ref_steps", "median_correct_steps"),
    "verdicts": ("problem_id", "policy_id", "sample_idx", "status", "extracted", "question", "n", "n_correct", "pass_rate"),
}

# each column's SQL type, to bind a detector's predicates at registration (their values do not matter)
_COLUMN_TYPES = {"sample_idx": "BIGINT", "n_tokens": "BIGINT", "steps": "BIGINT", "ref_steps": "BIGINT",
                 "median_correct_steps": "DOUBLE", "n": "BIGINT", "n_correct": "BIGINT", "pass_rate": "DOUBLE"}

# where a final answer can be stated: every candidate (pipeline.verify.extract.candidates) starts at one of
# these, so N candidates need N matches (case-insensitive "answer" covers "The ANSWER to the question is")
MARKERS = r"(?:answer|\\boxed|\\fbox|####)"


class Detector(Plugin):
    """Base class of a flag detector (the module's doc): class attributes, knobs, and ``detect``."""

    kind: ClassVar[str]
    where: ClassVar[str]  # SQL predicate over `samples`; may use {opts.<knob>}
    # optional: the same decision as SQL expressions over `samples`; then the runner lets DuckDB write the
    # hits (no row reaches Python) and `detect` is the reference the tests compare the SQL with
    score_sql: ClassVar[str | None] = None
    evidence_sql: ClassVar[str | None] = None
    side: ClassVar[str] = "rollouts"  # the side whose columns decide the candidates: "rollouts" or "verdicts"
    scan: ClassVar[str | None] = None  # a predicate over that side's columns only that `where` implies (default: `where`)
    label: ClassVar[str | None] = None  # the labelled set's label this flag claims (docs/flags.md); None: not measurable
    doc: ClassVar[str] = ""  # its docstring (set for each subclass)
    summary: ClassVar[str] = ""  # the docstring's first line: its row in the docs, the catalog and the card
    sql_only: ClassVar[bool] = False  # score_sql and evidence_sql both given: DuckDB writes its hits (set for each subclass)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
        cls.summary = cls.doc.splitlines()[0].replace("``", "") if cls.doc else ""
        cls.sql_only = cls.score_sql is not None and cls.evidence_sql is not None

    def __init__(self, options: BaseModel | dict[str, Any] | None = None, *, where: str | None = None) -> None:
        super().__init__(options, where=where or f"annotate.options.{self.name}")

    def detect(self, row: dict) -> Hit | None:
        """The decision on one candidate row: a :class:`Hit` (score, evidence), or None."""
        raise NotImplementedError

    def _sql(self, text: str) -> str:
        return text.format(opts=self.options)

    def where_sql(self) -> str:
        return self._sql(self.where)

    def scan_sql(self) -> str:
        return self._sql(self.scan or self.where)

    def score_expr(self) -> str:
        return self._sql(self.score_sql or "NULL")

    def evidence_expr(self) -> str:
        return self._sql(self.evidence_sql or "NULL")

    def __reduce__(self) -> tuple[Any, ...]:  # an instance is its class and its knobs (the pool ships it)
        return (type(self), (self.options.model_dump(mode="json"),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"


# The built-in detectors' order: the order of difficulty.flag_rates' entries and of every table of flags, as it was
# before the detectors were one file each. A detector not named here (a new one, a user's plugin) follows, by name.
BUILTIN_ORDER = ("rare_success", "truncated", "answer_in_question", "computation_skip", "answer_repetition",
                 "repetition_loop", "multiple_answers", "answer_flip", "unsupported_answer")

DETECTORS: Registry[type[Detector]] = Registry("flag detector", package="pipeline.annotate.detectors", order=BUILTIN_ORDER)


def register(cls: type[Detector]) -> type[Detector]:
    """Class decorator: check ``cls`` (its kind, side, and the columns its predicates name) and register it."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not (isinstance(cls, type) and issubclass(cls, Detector)):
        raise ConfigError(f"flag detector {cls!r}: a detector is a Detector subclass with a `name`")
    if cls.kind not in KINDS:
        raise ConfigError(f"flag detector {name!r}: unknown kind {cls.kind!r}; known: {', '.join(KINDS)}")
    if cls.side not in SIDE_COLUMNS:
        raise ConfigError(f"flag detector {name!r}: unknown side {cls.side!r}; known: {', '.join(SIDE_COLUMNS)}")
    check_columns(cls)
    DETECTORS.add(name, cls, origin=origin_of(cls))
    return cls


def check_columns(cls: type[Detector]) -> None:
    """A :class:`ConfigError` when the detector's scan predicate names a column its side does not have, or its
    ``where`` one no side has (bound by DuckDB over empty relations of those columns, its knobs at their defaults)."""
    import duckdb

    try:
        det = cls()
    except ConfigError:  # a knob without a default: nothing to format the predicates with here
        return
    both = tuple(dict.fromkeys(c for cols in SIDE_COLUMNS.values() for c in cols))
    for what, pred, cols in (("scan" if det.scan else "where", det.scan_sql(), SIDE_COLUMNS[det.side]),
                             ("where", det.where_sql(), both)):
        rel = ", ".join(f"NULL::{_COLUMN_TYPES.get(c, 'VARCHAR')} AS {c}" for c in cols)
        con = duckdb.connect()
        try:
            con.execute(f"SELECT * FROM (SELECT {rel}) WHERE {pred} LIMIT 0")
        except duckdb.BinderException as exc:
            first = str(exc).splitlines()[0]
            if "not found" in first or "does not have a column" in first:
                side = f"side {det.side!r}" if cols is not both else "any side"
                raise ConfigError(f"flag detector {det.name!r}: its {what} names a column of no table on {side} "
                                  f"({first.removeprefix('Binder Error: ')}); its columns: {', '.join(cols)}") from None
        except duckdb.Error:  # a type or function error is the runner's to report, with the data
            continue
        finally:
            con.close()


def get_detectors(names: Sequence[str] | None, options: Mapping[str, Any] | None = None) -> list[Detector]:
    """The detectors ``names`` (None: every registered one), each built with its knobs from ``options``
    (``annotate.options``: detector name -> its knobs; :func:`check_options` first)."""
    options = check_options(options or {})
    chosen = list(DETECTORS) if names is None else list(names)
    return [DETECTORS.lookup(name)(options.get(name), where=f"annotate.options.{name}") for name in chosen]


def check_options(options: Mapping[str, Any], *, where: str = "annotate.options") -> dict[str, Any]:
    """``annotate.options`` checked: each key a registered detector's name (else the close names), each value a
    mapping its ``Options`` validates (an unknown knob: the close ones). Returns name -> its validated knobs."""
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}: expected a mapping of detector name -> its knobs, got {type(options).__name__}")
    out: dict[str, Any] = {}
    for name, knobs in options.items():
        if name not in DETECTORS:
            raise ConfigError(f"{where}: {unknown_name('flag detector', name, DETECTORS)}")
        cls = DETECTORS[name]
        if knobs is not None and not isinstance(knobs, Mapping):
            raise ConfigError(f"{where}.{name}: expected a mapping of knobs, got {type(knobs).__name__}")
        out[name] = parse_options(cls.Options, dict(knobs or {}), where=f"{where}.{name}")
    return out


def flag_kinds_sql() -> str:
    """The registered detectors as a VALUES relation: flag, kind, description (the first line of its doc), and the
    precision and recall measured on the labelled set (``pipeline/annotate/flag_quality.yaml``; NULL if unmeasured)."""
    figures = measured()

    def num(flag: str, key: str) -> str:
        v = figures.get(flag, {}).get(key)
        return "NULL::DOUBLE" if v is None else f"{float(v)!r}::DOUBLE"

    rows = ", ".join(f"({sql_literal(d.name)}, {sql_literal(d.kind)}, {sql_literal(d.summary)}, "
                     f"{num(d.name, 'precision')}, {num(d.name, 'recall')})" for d in DETECTORS.values())
    return f"SELECT * FROM (VALUES {rows}) t(flag, kind, description, precision, recall)"


def names_of_kind(kind: str) -> list[str]:
    """The registered detectors of ``kind``, in the registry's order (the shortcut set, for one)."""
    if kind not in KINDS:
        raise ValueError(f"unknown detector kind {kind!r}; known: {', '.join(KINDS)}")
    return [n for n, d in DETECTORS.items() if d.kind == kind]


def labels() -> dict[str, str]:
    """Flag -> the label of the labelled set it claims (the flags that have one)."""
    return {n: d.label for n, d in DETECTORS.items() if d.label is not None}


__all__ = ["BUILTIN_ORDER", "DETECTORS", "KINDS", "MARKERS", "SIDE_COLUMNS", "Detector", "Hit", "NoOptions",
           "check_options", "flag_kinds_sql", "get_detectors", "labels", "names_of_kind", "register"]
