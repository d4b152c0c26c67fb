"""The flag detectors by name: the one registry, built explicitly from the modules that define detectors.

:mod:`pipeline.annotate.flags` (rare_success, truncated, the shortcuts and degeneracies) and
:mod:`pipeline.annotate.unsupported` (unsupported_answer) each keep their own detectors; a new detector module is
added to :data:`DETECTORS` here, in the order the flags are reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.annotate.flags import FLAG_DETECTORS, Detector
from pipeline.annotate.measured import measured
from pipeline.annotate.unsupported import UNSUPPORTED_DETECTORS
from pipeline.config import unknown_name
from pipeline.sqltext import sql_literal


def _merge(*modules: dict[str, Detector]) -> dict[str, Detector]:
    out: dict[str, Detector] = {}
    for detectors in modules:
        if twice := sorted(set(out) & set(detectors)):
            raise ValueError(f"flag detectors defined twice: {twice}")
        out.update(detectors)
    return out


DETECTORS: dict[str, Detector] = _merge(FLAG_DETECTORS, UNSUPPORTED_DETECTORS)


def get_detectors(names: Sequence[str] | None) -> list[Detector]:
    if names is None:
        return list(DETECTORS.values())
    out = []
    for name in names:
        if name not in DETECTORS:
            raise unknown_name("flag detector", name, DETECTORS)
        out.append(DETECTORS[name])
    return out


def flag_kinds_sql() -> str:
    """The registered detectors as a VALUES relation: flag, kind, description (the first line of its doc), and the
    precision and recall measured on the labelled set (``pipeline/annotate/flag_quality.yaml``; NULL if unmeasured)."""
    figures = measured()

    def num(flag: str, key: str) -> str:
        v = figures.get(flag, {}).get(key)
        return "NULL::DOUBLE" if v is None else f"{float(v)!r}::DOUBLE"

    rows = ", ".join(f"({sql_literal(d.name)}, {sql_literal(d.kind)}, "
                     f"{sql_literal(d.doc.splitlines()[0].replace('``', '') if d.doc else '')}, "
                     f"{num(d.name, 'precision')}, {num(d.name, 'recall')})" for d in DETECTORS.values())
    return f"SELECT * FROM (VALUES {rows}) t(flag, kind, description, precision, recall)"


__all__ = ["DETECTORS", "flag_kinds_sql", "get_detectors"]
