"""Table sets: where each stage reads and writes, for the main problems and for reformulations.

The same stages (rollout, verify, annotate) run once per set; DVC stages never share
outputs, so each set has its own directories, and the catalog's views union them:

    main          data/problems, data/rollouts, ...            (paths.*)
    reformulated  data/reformulated/problems, .../rollouts, ...  (paths.reformulated/*)
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import ConfigError, Params

SETS = ("main", "reformulated")
SET_TABLES = ("problems", "rejects", "policies", "rollouts", "verdicts", "flags", "difficulty")
UPSTREAM = "upstream"  # the rollouts folder's subfolder of imported dumps' own verdicts (pipeline/rollout/importer.py)


@dataclass(frozen=True)
class TableSet:
    name: str
    problems: str
    rejects: str
    policies: str
    rollouts: str
    verdicts: str
    flags: str
    difficulty: str
    metrics: str

    @property
    def rollout_rejects(self) -> str:
        """Rejects rows of the rollout stage (problems a policy's engine could not take), beside the rollouts."""
        return f"{self.rollouts}/rejects"

    @property
    def upstream(self) -> str:
        """What an imported dump said of each completion (its own grader), beside the rollouts."""
        return f"{self.rollouts}/{UPSTREAM}"

    def dir(self, table: str, root: Path) -> Path:
        return root / getattr(self, table)

    def metrics_file(self, stage: str, root: Path) -> Path:
        suffix = "" if self.name == "main" else f"-{self.name}"
        return root / self.metrics / f"{stage}{suffix}.json"


def table_set(params: Params, name: str = "main") -> TableSet:
    p = params.paths
    if name == "main":
        dirs = {t: getattr(p, t) for t in SET_TABLES}
    elif name == "reformulated":
        dirs = {t: f"{p.reformulated}/{t}" for t in SET_TABLES}
    else:
        raise ConfigError(f"unknown table set {name!r}; known: {', '.join(SETS)}")
    return TableSet(name=name, metrics=p.metrics, **dirs)


def features_dir(params: Params) -> str:
    """The probe's ``features`` table (``passband probe``, main set only): ``features/`` beside ``paths.difficulty``
    (``data/features``); params.yaml has no key of its own for it yet."""
    return posixpath.join(posixpath.dirname(params.paths.difficulty.rstrip("/")) or ".", "features")
