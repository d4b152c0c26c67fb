"""Dump layouts: how a file of completions that already exist is read as rollouts (``passband rollout`` imports them).

A policy with a ``dump`` in params.yaml is not generated: its completions are read from a file that another
harness wrote (an evaluation dump, a released dataset with generations, a trainer's rollout log). A layout is one
plugin file of ``pipeline/rollout/layouts`` (or a user's plugin file), a class registered in :data:`LAYOUTS`::

    @LAYOUTS.register
    class PlainJsonl(Layout):
        name = "plain"
        format = "jsonl"          # jsonl | parquet: how rows are read (streamed either way)
        grouped = True            # one row holds a problem's samples (False: one row a sample)

        class Options(Model):     # the layout's knobs, under the policy's dump.options (unknown keys refused)
            question: str = "problem"

        def read(self, row: dict) -> Iterator[DumpRecord]:
            yield DumpRecord(question=row[self.options.question], samples=[Sample(text) for text in row["completions"]])

``read`` turns one row of the file into records: the problem it is about (its question, a passband problem id
or a source id: :attr:`DumpRecord.match_value`) and its samples, each with what the file says of it (finish
reason, token count, upstream correctness), ``None`` where the file says nothing: never guessed. A row the
layout cannot read raises :class:`LayoutError` (a reject row with its reason); a row it leaves out on purpose
(another policy's, another training step's) yields nothing and is counted as skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from pipeline.config import Model
from pipeline.errors import PassbandError
from pipeline.plugins import Plugin, Registry

FORMATS = ("jsonl", "parquet")
FINISH = {"stop": "stop", "eos": "stop", "eos_token": "stop", "stop_token": "stop", "end_turn": "stop",
          "length": "length", "max_tokens": "length", "max_length": "length"}


class LayoutError(PassbandError):
    """One row a layout cannot read (its reason is the reject's ``reason``, the message its detail)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class Sample(NamedTuple):
    """One completion as the dump has it (samples are numbered in the order the dump lists them). A named tuple:
    a dump has millions, and the import reads its fields by position."""

    text: str
    finish_reason: str | None = None
    n_tokens: int | None = None
    upstream_correct: bool | None = None


@dataclass(frozen=True)
class DumpRecord:
    """A problem's samples in one row: ``question`` (matched by its normalised text), or ``problem_id`` (a passband
    key) or ``source_id`` (the ingested row's id in its source), whichever the policy's ``dump.match`` names."""

    samples: list[Sample]
    question: str | None = None
    problem_id: str | None = None
    source_id: str | None = None
    answer: str | None = None  # the dump's gold, kept for the reject's excerpt; the ingested gold is what is graded

    def match_value(self, how: str) -> str | None:
        return {"question": self.question, "problem_id": self.problem_id, "source_id": self.source_id}[how]


class Layout(Plugin):
    """A dump layout (the one plugin shape, :class:`pipeline.plugins.Plugin`): ``name``, ``format``, ``grouped``, an
    ``Options`` model and :meth:`read`."""

    name: ClassVar[str]
    format: ClassVar[str] = "jsonl"
    grouped: ClassVar[bool] = True
    upstream: ClassVar[str | None] = None  # what the dump's correctness field is (the agreement report names it)

    class Options(Model):
        pass

    def __init__(self, options: Mapping[str, Any] | None = None, *, where: str = "dump.options") -> None:
        super().__init__(dict(options or {}), where=where)

    @property
    def repeats(self) -> bool:
        """Whether a problem's samples may span several rows (its ``repeated_rows`` option, where it has one): the
        evaluation harnesses' ``amc23x8``-style datasets list each problem N times, a row each with its own samples."""
        return bool(getattr(self.options, "repeated_rows", False))

    @property
    def file_format(self) -> str:
        """How the file is read: the layout's ``format``, or its ``format`` option where it has one (openr1)."""
        return getattr(self.options, "format", self.format)

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        raise NotImplementedError


LAYOUTS: Registry[type[Layout]] = Registry("dump layout", package="pipeline.rollout.layouts")


def get_layout(name: str) -> type[Layout]:
    return LAYOUTS.lookup(name)


# --- helpers the layouts share ---------------------------------------------------------------------------

def dig(row: Mapping[str, Any], path: str) -> Any:
    """``row``'s value at a dotted path (``doc.problem``); a missing step raises a ``missing_field`` LayoutError."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise LayoutError("missing_field", f"no field {path!r} (the row has {sorted(row)[:12]})")
        value = value[part]
    return value


def first_of(row: Mapping[str, Any], paths: tuple[str, ...] | list[str]) -> Any:
    """The value at the first of ``paths`` the row has; ``missing_field`` naming them all when it has none."""
    for path in paths:
        try:
            return dig(row, path)
        except LayoutError:
            continue
    raise LayoutError("missing_field", f"none of the fields {list(paths)} (the row has {sorted(row)[:12]})")


def text_of(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise LayoutError("bad_field", f"{what} is {type(value).__name__}, not text")
    return value


def listed(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise LayoutError("bad_field", f"{what} is {type(value).__name__}, not a list")
    return value


def per_sample(value: Any, n: int, what: str) -> list[Any]:
    """A per-sample list the same length as the samples (None: the dump has none: n Nones)."""
    if value is None:
        return [None] * n
    value = listed(value, what)
    if len(value) != n:
        raise LayoutError("bad_field", f"{what} has {len(value)} entries for {n} samples")
    return value


def samples_of(row: Mapping[str, Any], texts: list[str], *, finish: str | None = None, n_tokens: str | None = None,
               upstream: str | None = None) -> list[Sample]:
    """The samples of ``texts`` with what the row's per-sample list fields say of each (a field named None, or
    missing from the row, says nothing): ``finish`` reasons, ``n_tokens`` counts, ``upstream`` correctness."""
    n = len(texts)
    fins, toks, ups = (per_sample(row.get(f) if f else None, n, f or "") for f in (finish, n_tokens, upstream))
    return [Sample(t, finish_reason=finish_reason(f), n_tokens=tokens(k), upstream_correct=correct(u))
            for t, f, k, u in zip(texts, fins, toks, ups, strict=True)]


def texts_of(row: Mapping[str, Any], field: str) -> list[str]:
    """The completions a row lists under ``field``, each checked to be text."""
    return [text_of(t, f"{field}[{i}]") for i, t in enumerate(listed(first_of(row, [field]), field))]


def finish_reason(value: Any) -> str | None:
    """``stop`` or ``length`` from a dump's finish reason (vLLM's, OpenAI's, TRL's names); None when unknown."""
    if value is None:
        return None
    return FINISH.get(str(value).strip().lower())


def correct(value: Any) -> bool | None:
    """A dump's correctness value as a bool (True/False, 1/0, "true"/"false", a score 1.0/0.0); None otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


__all__ = ["FORMATS", "LAYOUTS", "DumpRecord", "Layout", "LayoutError", "Sample", "correct", "dig", "finish_reason",
           "first_of", "get_layout", "listed", "per_sample", "samples_of", "text_of", "texts_of", "tokens"]
