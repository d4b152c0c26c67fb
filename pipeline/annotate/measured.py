"""The precision and recall of each flag as last measured on the labelled set (``flag_quality.yaml``, beside this file).

Written by ``benchmarks/flag_quality.py --write`` (:mod:`pipeline.annotate.quality` measures them); read here, below
the detectors and the measuring, by whatever shows a flag's rate: the ``flag_kinds`` view, ``passband summary``, the
dataset card. tests/test_annotate_flag_quality.py holds them as floors.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.errors import PassbandError

MEASURED = Path(__file__).with_name("flag_quality.yaml")


class LabelsError(PassbandError):
    """The labelled set is damaged or incomplete."""


def measured(path: Path = MEASURED) -> dict[str, dict]:
    """flag -> {label, flagged, labelled, both, precision, recall} as last measured; {} when never measured."""
    if not path.is_file():
        return {}
    try:
        return yaml.safe_load(path.read_text())["flags"]
    except (yaml.YAMLError, KeyError, TypeError) as exc:
        raise LabelsError(f"{path} is damaged ({exc}); rewrite it with: python benchmarks/flag_quality.py --write") from None


__all__ = ["MEASURED", "LabelsError", "measured"]
