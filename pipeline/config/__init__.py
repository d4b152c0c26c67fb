"""params.yaml → typed, frozen models that forbid unknown keys.

Every knob's default is its field default here, and only here (docs/configuration.md's key table is
generated from these models); params.yaml holds what the main job sets and the keys dvc.yaml tracks or
interpolates with ``${...}``; code receives the values as arguments, and a module that needs a default
outside a config takes it with :func:`field_default`. A bad key or value is a :class:`ConfigError` that
names it and says what is allowed::

    >>> load_params("params.yaml").rollout.k
    8
"""

from __future__ import annotations

from pipeline.config.base import (
    MAX_K,
    NAME_PATTERN,
    NAME_RULE,
    CardLine,
    ConfigError,
    LicenseId,
    Model,
    Name,
    RepoId,
    Tag,
    check_name,
    field_default,
    format_error,
    parse_options,
    unknown_name,
)
from pipeline.config.params import MAX_PARAMS_BYTES, MAX_PARAMS_NODES, Params, expanded_nodes, load_params, parse_params
from pipeline.config.paths import Paths, check_paths
from pipeline.config.sections import (
    AdaptiveBudget,
    AnnotateConfig,
    BandsConfig,
    DriftConfig,
    DumpConfig,
    FixedBudget,
    IngestConfig,
    PolicyConfig,
    PriorConfig,
    PublishConfig,
    ReformulateConfig,
    ReportConfig,
    RolloutConfig,
    SamplingConfig,
    SourceConfig,
    VerifyConfig,
)

__all__ = [
    "MAX_K",
    "MAX_PARAMS_BYTES",
    "MAX_PARAMS_NODES",
    "NAME_PATTERN",
    "NAME_RULE",
    "AdaptiveBudget",
    "AnnotateConfig",
    "BandsConfig",
    "CardLine",
    "ConfigError",
    "DriftConfig",
    "DumpConfig",
    "FixedBudget",
    "IngestConfig",
    "LicenseId",
    "Model",
    "Name",
    "Params",
    "Paths",
    "PolicyConfig",
    "PriorConfig",
    "PublishConfig",
    "ReformulateConfig",
    "RepoId",
    "ReportConfig",
    "RolloutConfig",
    "SamplingConfig",
    "SourceConfig",
    "Tag",
    "VerifyConfig",
    "check_name",
    "check_paths",
    "expanded_nodes",
    "field_default",
    "format_error",
    "load_params",
    "parse_options",
    "parse_params",
    "unknown_name",
]
