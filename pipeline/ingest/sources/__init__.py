"""Problem sources, one class shape, looked up by name: one file a kind in this folder, registered in
:data:`SOURCES` (a user's own kind: a plugin file registering one, docs/operations.md).

A source kind is a :class:`Source` subclass (the one plugin shape, :class:`pipeline.plugins.Plugin`): a ``name``, its
knobs as ``Options`` (a source entry's ``options`` in params.yaml, checked when the params load: a kind without knobs
refuses any) and one method, ``read(cfg, *, root, limits) -> Iterator[RawRow | RawReject]``.
It reads and maps; it never validates (the core applies the same rules to every source). A row
that cannot be read or mapped is a :class:`RawReject`; a file that cannot be read at all (a
damaged Parquet file, a compressed or UTF-16 JSONL file, an empty file) is a :class:`SourceError`
naming it, raised before anything is written.

    - name: gsm8k_test
      kind: gsm8k
      path: ../shared/data/gsm8k/test.jsonl
      split: test
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.config import ConfigError, SourceConfig
from pipeline.ingest.readers import GOLD_FROM, PROBLEM_FIELDS, Record, SourceError
from pipeline.ingest.records import Limits
from pipeline.plugins import Plugin, Registry, origin_of


class Source(Plugin):
    """Base class of a source kind (the module's doc). An instance holds one source entry's validated ``options``."""

    def read(self, cfg: SourceConfig, *, root: Path, limits: Limits) -> Iterator[Record]:
        raise NotImplementedError


# the kinds of this folder (in the order the docs list them), and a user's own
SOURCES: Registry[type[Source]] = Registry("source kind", package="pipeline.ingest.sources",
                                           order=("gsm8k", "math", "jsonl", "parquet", "hf", "synthetic"))


def register(cls: type[Source]) -> type[Source]:
    """Class decorator: register the :class:`Source` subclass ``cls`` under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Source)) or not isinstance(getattr(cls, "name", None), str):
        raise ConfigError(f"source kind {cls!r}: a source kind is a Source subclass with a `name`")
    SOURCES.add(cls.name, cls, origin=origin_of(cls))
    return cls


def get_source(kind: str) -> type[Source]:
    return SOURCES.lookup(kind)


def build_source(cfg: SourceConfig) -> Source:
    """The kind ``cfg.kind`` with the entry's ``options`` checked against its ``Options``."""
    return get_source(cfg.kind)(cfg.options, where=f"source {cfg.name!r} options")


def read_source(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    return build_source(cfg).read(cfg, root=root, limits=limits)


__all__ = ["GOLD_FROM", "PROBLEM_FIELDS", "SOURCES", "Record", "Source", "SourceError", "build_source", "get_source",
           "read_source", "register"]
