"""The whole params.yaml: :class:`Params` and its cross-section checks, and reading the file (bounded before parsing:
DVC expands every YAML alias itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from pipeline import bands as band_names
from pipeline.config.base import ConfigError, Model, Name, format_error, unknown_name
from pipeline.config.paths import Paths, check_paths
from pipeline.config.sections import (
    AnnotateConfig,
    DriftConfig,
    IngestConfig,
    PolicyConfig,
    PublishConfig,
    ReformulateConfig,
    ReportConfig,
    RolloutConfig,
    VerifyConfig,
)


class Params(Model):
    plugins: list[str] = Field(
        default_factory=list,
        description="the user's own plugins, loaded before any name is checked: module names (mypkg.my_flag) or "
                    ".py/.yaml files relative to params.yaml (a detector, engine, source, extractor, reformulator, "
                    "or a preset YAML; docs/operations.md)")
    paths: Paths = Paths()
    ingest: IngestConfig = Field(description="the sources and the caps on a row (the ingest stage)")
    policies: dict[Name, PolicyConfig] = Field(description="named policy snapshots: model, revision, engine, prompt, "
                                                          "sampling")
    rollout: RolloutConfig = Field(description="which policies sample which problems, how many times (rollout)")
    verify: VerifyConfig = Field(VerifyConfig(), description="answer extraction and the math-verify checks (verify)")
    annotate: AnnotateConfig = Field(AnnotateConfig(), description="bands, flags and their knobs (annotate)")
    reformulate: ReformulateConfig = ReformulateConfig()
    publish: PublishConfig = PublishConfig()
    drift: DriftConfig = DriftConfig()
    report: ReportConfig = ReportConfig()

    @model_validator(mode="after")
    def _paths_apart(self) -> Params:
        try:
            check_paths(self.paths)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _answer_caps_agree(self) -> Params:
        """A gold longer than the verifier reads could never be answered: ingest's cap is verify's, or below it."""
        cap, verify_cap = self.ingest.max_answer_chars, self.verify.max_answer_chars
        if cap is not None and cap > verify_cap:
            raise ValueError(f"ingest.max_answer_chars ({cap}) is above verify.max_answer_chars ({verify_cap}): a gold "
                             "longer than the verifier reads could never be answered; leave ingest.max_answer_chars "
                             "out (it follows verify's) or lower it")
        return self

    @model_validator(mode="after")
    def _names_known(self) -> Params:
        """Every value that names a band, source or policy names one that exists (the names the stages' registries
        hold, source kinds, presets, extractors and flags, are checked by :mod:`pipeline.params_loader`, above the stages)."""
        policies = sorted(self.policies)
        sources = [s.name for s in self.ingest.sources]
        checks = [
            ("rollout.policies", self.rollout.policies, policies, "policy"),
            ("reformulate.policies", self.reformulate.policies or [], policies, "policy"),
            ("rollout.sources", self.rollout.sources or [], sources, "source"),
            ("reformulate.bands", self.reformulate.bands, band_names.BANDS, "band"),
            ("reformulate.target_bands", self.reformulate.target_bands, band_names.BANDS, "band"),
            ("publish.bands", self.publish.bands, band_names.BANDS, "band"),
            ("publish.reformulated_bands", self.publish.reformulated_bands, band_names.BANDS, "band"),
        ]
        for key, values, known, what in checks:
            for v in values:
                if v not in known:
                    raise ValueError(f"{key}: {unknown_name(what, v, known)}")
        for name in self.rollout.policies:
            prior = self.policies[name].prior
            if prior is None:
                continue
            if self.rollout.budget.kind != "adaptive":
                raise ValueError(f"policies.{name}.prior needs rollout.budget.kind adaptive (a fixed budget never stops early)")
            if prior.policy not in self.rollout.policies or prior.policy == name:
                raise ValueError(f"policies.{name}.prior.policy {prior.policy!r} must be another policy in rollout.policies "
                                 f"{self.rollout.policies}")
            if self.policies[prior.policy].prior is not None:
                raise ValueError(f"policies.{name}.prior.policy {prior.policy!r} has a prior itself (one level only)")
        return self


def parse_params(raw: dict[str, Any], *, origin: str = "params") -> Params:
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_error(exc, origin, Params)) from None


# A params file is a page of settings: past these it is refused before it is parsed into values. DVC parses the
# file itself (`dvc repro`, `dvc status`) and expands every alias, so a 1 KB file of nested aliases (a "billion
# laughs") took it to 6 GB; passband refuses such a file at its first command (`passband doctor` checks it too).
MAX_PARAMS_BYTES = 1 << 20


MAX_PARAMS_NODES = 100_000  # scalars, lists and mappings, each alias counted as the whole node it repeats


def expanded_nodes(text: str) -> int:
    """How many YAML nodes ``text`` holds once every alias is expanded (as DVC's parser does), computed without
    expanding: an anchored node's size is counted once and reused at each alias."""
    from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

    sizes: dict[str, int] = {}
    stack: list[list] = []  # per open collection: [anchor, nodes so far]
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, AliasEvent):
            n = sizes.get(event.anchor, 1)
        elif isinstance(event, CollectionStartEvent):
            stack.append([event.anchor, 1])
            continue
        elif isinstance(event, CollectionEndEvent):
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n
        elif isinstance(event, NodeEvent):  # a scalar
            n = 1
            if event.anchor:
                sizes[event.anchor] = 1
        else:
            continue
        if stack:
            stack[-1][1] += n
        else:
            total += n
        if total > MAX_PARAMS_NODES or any(c[1] > MAX_PARAMS_NODES for c in stack[-1:]):
            return MAX_PARAMS_NODES + 1
    return total


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"params file not found: {path}")
    if path.stat().st_size > MAX_PARAMS_BYTES:
        raise ConfigError(f"{path}: {path.stat().st_size:,} bytes, over the {MAX_PARAMS_BYTES:,} a params file may hold: "
                          "put data in files that the params name")
    try:
        text = path.read_text()
        if expanded_nodes(text) > MAX_PARAMS_NODES:
            raise ConfigError(f"{path}: its aliases expand to over {MAX_PARAMS_NODES:,} values (DVC expands them when "
                              "it reads the file, which would take it to gigabytes): write the values out, or use fewer "
                              "nested aliases")
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    params = parse_params(raw, origin=str(path))
    try:
        check_paths(params.paths, root=path.resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return params
