"""The popular RLVR datasets by name: ``preset: <name>`` on a ``hf``, ``parquet`` or ``jsonl`` source.

A preset is one YAML file in this folder (``<name>.yaml``, found by a folder scan; a user's own is a ``.yaml`` in
params.yaml's ``plugins``): the dataset's column layout as published on the Hub: which (possibly nested) column
holds the question, the gold, the id, the subject; which of its own difficulty columns becomes
``source_difficulty`` (``mapping.source_difficulty``) and what that number measures (``difficulty_measure``); the
dataset's ``license`` (a Hub license id: what the published items of such a source carry, ahead of
``publish.licenses``); the prompt wrapper its question is stored in (stripped, so the question is the problem itself
and passband's template applies). A source's own ``mapping`` and ``options`` override the preset's, field by field.
The layouts are tested on fixtures of a few rows in each dataset's column layout and Arrow types
(``tests/support/make_preset_fixtures.py``). One whole preset::

    name: polaris-53k
    hub: POLARIS-Project/Polaris-Dataset-53K
    license: null          # unknown: publish.licenses, else the LICENSE beside the file, else "unknown"
    mapping: {question: problem, answer: answer, source_difficulty: difficulty}
    difficulty_measure: "difficulty: share of 8 DeepSeek-R1-Distill-Qwen-7B samples correct (k/8), higher = easier"

Golds follow the ingest rules (:func:`pipeline.gold.json_gold`): a list gold is a tuple answer,
its one element when it has one; except Skywork-OR1's, a list of acceptable answers (its reward
accepts any one): the first is the gold, the others are kept in ``metadata.gold_alternatives``.
NuminaMath's and OpenR1's ``proof`` / ``notfound`` answers are no gold (``missing_gold`` rejects).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from pipeline.config import ConfigError, LicenseId, Model, Name, format_error
from pipeline.plugins import YAML_LOADERS, Registry

__all__ = ["PRESETS", "PRESETS_DIR", "Preset", "get_preset", "load_preset"]

PRESETS_DIR = Path(__file__).resolve().parent


class Preset(Model):
    name: Name = Field(description="the preset's name (`preset:` on a source); its file is <name>.yaml")
    hub: str = Field(description="the Hub dataset a `kind: hf` source without a path loads")
    license: LicenseId | None = Field(None, description="the dataset's Hub license id (null: not known here)")
    mapping: dict[str, str] = Field(description="problem field -> column path (pipeline.ingest.paths)")
    split: str = Field("train", description="the Hub split loaded (options.hf_split)")
    config: str | None = Field(None, description="the Hub config (options.config); not used for a local path")
    gold_from: Literal["answer", "gsm8k", "boxed"] = "answer"
    gold_json: bool = Field(False, description="the gold column holds JSON text (Skywork: '[\"3\"]'): decoded first")
    gold_list: Literal["tuple", "alternatives"] = Field(
        "tuple", description="a list gold: tuple (the ingest rules) or alternatives (any one is right: the first is "
                             "the gold, the others go to metadata.gold_alternatives)")
    no_gold: tuple[str, ...] = Field((), description="answers that mean 'no gold' (a missing_gold reject)")
    strip_prefix: str = Field("", description="the prompt wrapper before the question, removed when present")
    strip_suffix: str = Field("", description="the prompt wrapper after the question, removed when present")
    difficulty_measure: str | None = Field(None, description="what source_difficulty measures, and which way it points")
    metadata: tuple[str, ...] = Field((), description="column paths kept in the metadata JSON (the rest is dropped)")
    about: str = ""

    @model_validator(mode="after")
    def _difficulty_described(self) -> Preset:
        if ("source_difficulty" in self.mapping) != (self.difficulty_measure is not None):
            raise ValueError("mapping.source_difficulty and difficulty_measure go together: a difficulty column needs "
                             "what it measures, and a measure needs its column")
        return self


def load_preset(path: Path) -> Preset:
    """The preset in ``path``; a bad file is one :class:`ConfigError` line naming it."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping (a preset)")
    try:
        return Preset.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_error(exc, str(path))) from None


def _add(registry: Registry[Preset], path: Path) -> None:
    preset = load_preset(path)
    if preset.name != path.stem:
        raise ConfigError(f"{path}: declares name {preset.name!r}, expected {path.stem!r} (the file name)")
    registry.add(preset.name, preset, origin=str(path))


def _scan(registry: Registry[Preset]) -> None:
    for path in sorted(PRESETS_DIR.glob("*.yaml")):
        _add(registry, path)


PRESETS: Registry[Preset] = Registry("source preset", scan=_scan)
YAML_LOADERS["source preset"] = ("hub", lambda path: _add(PRESETS, path))


def get_preset(name: str) -> Preset:
    return PRESETS.lookup(name)
