"""The params file as the CLI loads it: the user's plugins, :mod:`pipeline.config`'s checks, then every registry name.

:mod:`pipeline.config` sits below the stages, so it checks only the names it owns (policies, sources, bands). The
names that live in the plugin registries (:mod:`pipeline.plugins`): engines and their options, source kinds and
presets, prompt templates, extractors, flag detectors and their knobs, reformulation methods and their options, are
checked here, above the stages, with the same one-line message, when the params are loaded: before any stage starts
work, and after the plugins params.yaml lists are loaded (so their names count). ``passband``'s subcommands load
their params through :func:`load_params` (:func:`pipeline.cli_options.with_params`).

One real message (a typo in params.yaml's ``ingest.sources``)::

    params.yaml: ingest.sources.kind: unknown source kind 'gsm8' (did you mean gsm8k?); known: ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline import config
from pipeline.annotate.core import flag_options
from pipeline.annotate.detectors import DETECTORS
from pipeline.config import ConfigError, Params, parse_options, unknown_name
from pipeline.engines import ENGINES
from pipeline.ingest.presets import PRESETS
from pipeline.ingest.sources import SOURCES
from pipeline.plugins import load_plugins
from pipeline.reformulate import METHODS
from pipeline.rollout.layout import LAYOUTS
from pipeline.rollout.prompts import known_templates
from pipeline.verify.extract import EXTRACTORS


def _names(params: Params) -> list[tuple[str, Iterable[str], Mapping[str, Any] | list[str], str]]:
    """(key, the names params.yaml gives there, the registry, what a name there is)."""
    policies = params.policies.items()
    return [
        ("ingest.sources.kind", [s.kind for s in params.ingest.sources], SOURCES, "source kind"),
        ("ingest.sources.preset", [s.preset for s in params.ingest.sources if s.preset], PRESETS, "source preset"),
        ("policies.engine", [p.engine for _, p in policies], ENGINES, "engine"),
        ("rollout.engine_options", list(params.rollout.engine_options), ENGINES, "engine"),
        ("policies.prompt", [p.prompt for _, p in policies], known_templates(), "prompt template"),
        ("policies.dump.layout", [p.dump.layout for _, p in policies if p.dump], LAYOUTS, "dump layout"),
        ("verify.extractors", params.verify.extractors, EXTRACTORS, "extractor"),
        ("annotate.flags", params.annotate.flags or [], DETECTORS, "flag"),
        ("reformulate.methods", params.reformulate.methods, METHODS, "reformulation method"),
        ("reformulate.options", list(params.reformulate.options), METHODS, "reformulation method"),
    ]


def check_names(params: Params, *, origin: str = "params") -> Params:
    """``params`` when every plugin name it gives exists and every plugin's options are valid; else a
    :class:`ConfigError` ``"<origin>: <key>: unknown <what> '<name>' (did you mean ...?); known: ..."``."""
    for key, values, known, what in _names(params):
        for v in values:
            if v not in known:
                raise ConfigError(f"{origin}: {key}: {unknown_name(what, v, known)}")
    try:
        for src in params.ingest.sources:
            parse_options(SOURCES[src.kind].Options, src.options, where=f"ingest.sources.{src.name}.options")
        for name, options in params.rollout.engine_options.items():
            parse_options(ENGINES[name].Options, options, where=f"rollout.engine_options.{name}")
        for name, pol in params.policies.items():
            if pol.dump is not None:
                parse_options(LAYOUTS[pol.dump.layout].Options, pol.dump.options, where=f"policies.{name}.dump.options")
        flag_options(params.annotate)
        for name, options in params.reformulate.options.items():
            parse_options(METHODS[name].Options, options, where=f"reformulate.options.{name}")
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    return params


def parse_params(raw: dict[str, Any], *, origin: str = "params", root: str | Path = ".") -> Params:
    """:func:`pipeline.config.parse_params`, the plugins it lists (files relative to ``root``), :func:`check_names`."""
    params = config.parse_params(raw, origin=origin)
    _load(params, root=Path(root), origin=origin)
    return check_names(params, origin=origin)


def load_params(path: str | Path = "params.yaml") -> Params:
    """:func:`pipeline.config.load_params`, the plugins it lists (files relative to its folder), :func:`check_names`."""
    params = config.load_params(path)
    _load(params, root=Path(path).resolve().parent, origin=str(Path(path)))
    return check_names(params, origin=str(Path(path)))


def _load(params: Params, *, root: Path, origin: str) -> None:
    try:
        load_plugins(params.plugins, root=root)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from None


__all__ = ["check_names", "load_params", "parse_params"]
