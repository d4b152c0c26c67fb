"""The flag detectors: one file each in this folder, registered by name in :data:`DETECTORS`.

A detector is a function decorated with :func:`register`, which takes everything the rest of passband reads about it:
its ``kind`` (``risk``, ``shortcut`` or ``degeneracy``), the ``label`` of the labelled set it claims
(docs/flags.md; None where no reading of one completion decides it), its knobs (``options``: a
:class:`pipeline.config.Model` whose fields are keys of ``annotate.options``), a SQL predicate ``where`` over the
``samples`` view (the cheap prefilter; it may use ``{opts.<knob>}``) and ``detect(row, opts) -> Hit | None``, the
decision and its evidence. The first line of its docstring is its row in the docs and the catalog. A whole detector::

    class Options(Model):
        long_min_tokens: int = Field(500, gt=0, description="fire at or above this many tokens")

    @register("long_answer", kind="degeneracy", options=Options, where="n_tokens >= {opts.long_min_tokens}")
    def long_answer(row: dict, opts) -> Hit | None:
        \"\"\"A completion of at least ``long_min_tokens`` tokens. Score: its tokens.\"\"\"
        return Hit(float(row["n_tokens"]), f"{row['n_tokens']} tokens")

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, create_model

from pipeline.annotate.hit import Hit
from pipeline.annotate.measured import measured
from pipeline.config import ConfigError, Model, parse_options
from pipeline.plugins import Registry, origin_of
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


class NoOptions(Model):
    pass


@dataclass(frozen=True)
class Detector:
    name: str
    kind: str
    where: str  # SQL predicate over `samples`; may use {opts.<field>}
    detect: Callable[[dict, Any], Hit | None]
    doc: str
    # optional: the same decision as SQL expressions over `samples`; then the runner lets DuckDB write the
    # hits (no row reaches Python) and `detect` is the reference the tests compare the SQL with
    score_sql: str | None = None
    evidence_sql: str | None = None
    side: str = "rollouts"  # the side whose columns decide the candidates: "rollouts" or "verdicts"
    scan: str | None = None  # a predicate over that side's columns only that `where` implies (default: `where`)
    label: str | None = None  # the labelled set's label this flag claims (docs/flags.md); None: not measurable
    Options: type[BaseModel] = NoOptions  # its knobs, keys of annotate.options

    @property
    def sql_only(self) -> bool:
        return self.score_sql is not None and self.evidence_sql is not None

    @property
    def summary(self) -> str:
        """The first line of its docstring: its row in the docs, the catalog and the card."""
        return self.doc.splitlines()[0].replace("``", "") if self.doc else ""

    def where_sql(self, opts: Any) -> str:
        return self.where.format(opts=opts)

    def scan_sql(self, opts: Any) -> str:
        return (self.scan or self.where).format(opts=opts)


# The built-in detectors' order: the order of difficulty.flag_rates' entries and of every table of flags, as it was
# before the detectors were one file each. A detector not named here (a new one, a user's plugin) follows, by name.
BUILTIN_ORDER = ("rare_success", "truncated", "answer_in_question", "computation_skip", "answer_repetition",
                 "repetition_loop", "multiple_answers", "answer_flip", "unsupported_answer")

DETECTORS: Registry[Detector] = Registry("flag detector", package="pipeline.annotate.detectors", order=BUILTIN_ORDER)


def register(name: str, *, kind: str, where: str, label: str | None = None, options: type[BaseModel] = NoOptions,
             score_sql: str | None = None, evidence_sql: str | None = None, side: str = "rollouts",
             scan: str | None = None) -> Callable:
    """Decorator: register ``detect(row, opts) -> Hit | None`` as the detector ``name`` (see the module's doc)."""
    if kind not in KINDS:
        raise ConfigError(f"flag detector {name!r}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if side not in SIDE_COLUMNS:
        raise ConfigError(f"flag detector {name!r}: unknown side {side!r}; known: {', '.join(SIDE_COLUMNS)}")

    def deco(fn: Callable[[dict, Any], Hit | None]) -> Callable:
        det = Detector(name, kind, where, fn, (fn.__doc__ or "").strip(), score_sql, evidence_sql, side, scan, label,
                       options)
        check_columns(det)
        DETECTORS.add(name, det, origin=origin_of(fn))
        return fn

    return deco


def check_columns(det: Detector) -> None:
    """A :class:`ConfigError` when the detector's scan predicate names a column its side does not have, or its
    ``where`` one no side has (bound by DuckDB over empty relations of those columns, its knobs at their defaults)."""
    import duckdb

    try:
        opts = det.Options()
    except ValueError:  # a knob without a default: nothing to format the predicates with here
        return
    both = tuple(dict.fromkeys(c for cols in SIDE_COLUMNS.values() for c in cols))
    for what, pred, cols in (("scan" if det.scan else "where", det.scan_sql(opts), SIDE_COLUMNS[det.side]),
                             ("where", det.where_sql(opts), both)):
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


def get_detectors(names: Sequence[str] | None) -> list[Detector]:
    if names is None:
        return list(DETECTORS.values())
    return [DETECTORS.lookup(name) for name in names]


def flag_options_model() -> type[BaseModel]:
    """``annotate.options``' model: every registered detector's knobs in one flat model (a knob's name is its own:
    two detectors declaring one name with different types is an error naming both)."""
    return _merged(tuple((d.name, d.Options) for d in DETECTORS.values()))


@cache
def _merged(options: tuple[tuple[str, type[BaseModel]], ...]) -> type[BaseModel]:
    fields: dict[str, tuple[Any, Any]] = {}
    owner: dict[str, str] = {}
    for name, model in options:
        for key, info in model.model_fields.items():
            if key in fields:
                if (fields[key][0], fields[key][1].default) != (info.annotation, info.default):
                    raise ConfigError(f"flag detectors {owner[key]!r} and {name!r} both declare the knob {key!r}, "
                                      "differently")
                continue
            fields[key], owner[key] = (info.annotation, info), name
    return create_model("FlagOptions", __base__=Model, **fields)


def flag_options(options: dict[str, Any], *, where: str = "annotate.options") -> Any:
    """The detectors' knobs from ``options`` (``annotate.options`` plus the keys the stage adds), validated."""
    return parse_options(flag_options_model(), options, where=where)


def default_flag_options() -> Any:
    return flag_options_model()()


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
           "default_flag_options", "flag_kinds_sql", "flag_options", "flag_options_model", "get_detectors", "labels",
           "names_of_kind", "register"]
