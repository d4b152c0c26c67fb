"""The params file as the CLI loads it: :mod:`pipeline.config`'s checks, then every name a stage's registry holds.

:mod:`pipeline.config` sits below the stages, so it checks only the names it owns (policies, sources, bands). The
names that live in the stages' registries, source kinds and presets (ingest), extractors (verify) and flags
(annotate), are checked here, above the stages, with the same one-line message, when the params are loaded: before
any stage starts work. ``passband``'s subcommands load their params through :func:`load_params`
(:func:`pipeline.options.with_params`).

One real message (a typo in params.yaml's ``ingest.sources``)::

    params.yaml: ingest.sources.kind: unknown source kind 'gsm8' (did you mean gsm8k?); known: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline import config
from pipeline.annotate.detectors import DETECTORS
from pipeline.config import ConfigError, Params, unknown_name
from pipeline.ingest.presets import PRESETS
from pipeline.ingest.sources import SOURCES
from pipeline.verify.extract import EXTRACTORS


def check_names(params: Params, *, origin: str = "params") -> Params:
    """``params`` when every source kind, preset, extractor and flag it names exists; else a :class:`ConfigError`
    ``"<origin>: <key>: unknown <what> '<name>' (did you mean ...?); known: ..."``."""
    checks = [
        ("ingest.sources.kind", [s.kind for s in params.ingest.sources], SOURCES, "source kind"),
        ("ingest.sources.preset", [s.preset for s in params.ingest.sources if s.preset], PRESETS, "source preset"),
        ("verify.extractors", params.verify.extractors, EXTRACTORS, "extractor"),
        ("annotate.flags", params.annotate.flags or [], DETECTORS, "flag"),
    ]
    for key, values, known, what in checks:
        for v in values:
            if v not in known:
                raise ConfigError(f"{origin}: {key}: {unknown_name(what, v, known)}")
    return params


def parse_params(raw: dict[str, Any], *, origin: str = "params") -> Params:
    """:func:`pipeline.config.parse_params`, then :func:`check_names`."""
    return check_names(config.parse_params(raw, origin=origin), origin=origin)


def load_params(path: str | Path = "params.yaml") -> Params:
    """:func:`pipeline.config.load_params`, then :func:`check_names`."""
    return check_names(config.load_params(path), origin=str(Path(path)))


__all__ = ["check_names", "load_params", "parse_params"]
