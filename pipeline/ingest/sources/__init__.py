"""Problem sources behind one signature, looked up by name: one file a kind in this folder, registered in
:data:`SOURCES` (a user's own kind: a plugin file calling :func:`register`, docs/operations.md).

A source is ``fn(cfg: SourceConfig, *, root: Path, limits: Limits) -> Iterator[RawRow | RawReject]``.
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

from collections.abc import Callable, Iterator
from pathlib import Path

from pipeline.config import SourceConfig
from pipeline.ingest.readers import GOLD_FROM, PROBLEM_FIELDS, Record, SourceError
from pipeline.ingest.records import Limits
from pipeline.plugins import Registry

SourceFn = Callable[..., Iterator[Record]]
# the kinds of this folder (in the order the docs list them), and a user's own
SOURCES: Registry[SourceFn] = Registry("source kind", package="pipeline.ingest.sources",
                                       order=("gsm8k", "math", "jsonl", "parquet", "hf", "synthetic"))


def register(name: str) -> Callable[[SourceFn], SourceFn]:
    """Decorator: register ``fn(cfg, *, root, limits) -> Iterator[Record]`` as the source kind ``name``."""
    return SOURCES.register(name=name)


def get_source(kind: str) -> SourceFn:
    return SOURCES.lookup(kind)


def read_source(cfg: SourceConfig, *, root: Path, limits: Limits = Limits()) -> Iterator[Record]:
    return get_source(cfg.kind)(cfg, root=root, limits=limits)


__all__ = ["GOLD_FROM", "PROBLEM_FIELDS", "SOURCES", "Record", "SourceError", "SourceFn", "get_source", "read_source",
           "register"]
