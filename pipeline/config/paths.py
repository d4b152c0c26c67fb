"""``paths``: where every table, the catalog and the outputs live, each checked to stay inside the repository."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import Field

from pipeline.config.base import ConfigError, Model, unknown_name


class Paths(Model):
    """Where every table and artefact lives, relative to the project folder (the one holding params.yaml).

    Each path stays inside the project, unless its key is listed in ``allow_outside`` (a shared model
    folder: ``allow_outside: [models]``); none may be the project folder itself, contain it, or
    contain another configured path (:func:`check_paths`): passband replaces its output folders whole.
    """

    problems: str = Field("data/problems", description="the problems table's folder (ingest)")
    rejects: str = Field("data/rejects", description="the rejects table's folder (ingest)")
    policies: str = Field("data/policies", description="the policies table's folder (rollout)")
    rollouts: str = Field("data/rollouts", description="the rollouts table's folder (rollout)")
    verdicts: str = Field("data/verdicts", description="the verdicts table's folder (verify)")
    flags: str = Field("data/flags", description="the flags table's folder (annotate)")
    difficulty: str = Field("data/difficulty", description="the difficulty table's folder (annotate)")
    reformulated: str = Field("data/reformulated", description="the reformulated table set (a subfolder per table)")
    catalog: str = Field("data/passband.duckdb", description="the DuckDB catalog: views over every table (*.duckdb)")
    metrics: str = Field("data/metrics", description="each stage's counts (DVC metrics; timings: data/logs/timings/)")
    plots: str = Field("data/plots", description="PNG and CSV plots (annotate, drift, reformulate-report)")
    models: str = Field("data/models", description="prepared model checkpoints (prepare-model)")
    published: str = Field("data/published", description="the Hub dataset folder (publish; push uploads it)")
    report: str = Field("data/report", description="the static report site, index.html and its files (report)")
    allow_outside: list[str] = Field(
        default_factory=list,
        description="keys of the paths above that may point outside the project (absolute or ../), e.g. [models]",
    )

    def configured(self) -> dict[str, str]:
        """Every path key and its value (``allow_outside`` left out)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k != "allow_outside"}


def _outside(norm: str) -> bool:
    return os.path.isabs(norm) or norm == ".." or norm.startswith("../")


def check_paths(paths: Paths, *, root: Path | None = None) -> None:
    """Raise :class:`ConfigError` unless every configured path is a folder of its own.

    Refused: an empty path or the project folder itself (``.``); a path outside the project (absolute,
    or leading out with ``..``) whose key is not in ``paths.allow_outside``; a path that contains the
    project folder; two paths where one is, or contains, the other; a catalog not named ``*.duckdb``.

    With ``root`` (the folder holding params.yaml), each path is also resolved, symbolic links followed, and
    checked again: it must lead where its name says (``data/lnk/../pub``, with ``data/lnk`` a link to
    ``/elsewhere/sub``, is ``/elsewhere/pub``, not ``data/pub``: refused), and the containment checks hold
    on the resolved paths too (two names that are one folder through a link are refused). A folder inside the
    project may still be a link to a bigger disk: the path then leads where its name says, through the link
    the user made (each destructive operation checks its own target as well, pipeline/ownership.py).
    """
    values = paths.configured()
    if bad := [k for k in paths.allow_outside if k not in values]:
        raise ConfigError(f"paths.allow_outside: {unknown_name('path key', bad[0], values)}")
    norm: dict[str, str] = {}
    for key, value in values.items():
        if "\0" in value:
            raise ConfigError(f"paths.{key}: {value!r} holds a NUL byte, which no file name can")
        n = os.path.normpath(value) if value.strip() else ""
        if n in ("", "."):
            raise ConfigError(f"paths.{key}: {value!r} is the project folder itself; passband replaces its output "
                              f"folders whole: give it a folder of its own, such as data/{key}")
        if _outside(n):
            if key not in paths.allow_outside:
                raise ConfigError(f"paths.{key}: {value!r} is outside the project (the folder holding params.yaml): "
                                  f"use a path inside it, or list {key} in paths.allow_outside to allow it")
            if set(Path(n).parts) <= {".."} or (root is not None and _contains(_resolve(root, n), Path(root).resolve())):
                raise ConfigError(f"paths.{key}: {value!r} contains the project folder; give it a folder of its own")
        norm[key] = n
    if not norm["catalog"].endswith(".duckdb"):  # the catalog is a file passband replaces: never params.yaml or a notebook
        raise ConfigError(f"paths.catalog: {values['catalog']!r} must name a .duckdb file (passband replaces it whole), "
                          "such as data/passband.duckdb")
    keys = sorted(norm)
    for a in keys:
        for b in keys:
            if a != b and (norm[a] == norm[b] or norm[b].startswith(norm[a].rstrip("/") + "/")):
                what = "is the same path as" if norm[a] == norm[b] else "contains"
                raise ConfigError(f"paths.{a} ({values[a]!r}) {what} paths.{b} ({values[b]!r}): every configured "
                                  "path needs a folder of its own")
    if root is not None:
        _check_resolved(values, norm, Path(root))


def _check_resolved(values: dict[str, str], norm: dict[str, str], root: Path) -> None:
    """The checks of :func:`check_paths` again, on each path as the system resolves it (links followed)."""
    real: dict[str, Path] = {}
    for key, value in values.items():
        _check_walkable(root, key, value)
        # os.path.realpath follows each link before the `..` after it, as open() does; normpath drops `x/..`
        # by name. They differ exactly when a `..` comes after a link: the name then says one folder and
        # the system writes another.
        written, named = Path(os.path.realpath(root / value)), Path(os.path.realpath(root / norm[key]))
        if written != named:
            raise ConfigError(f"paths.{key}: {value!r} goes through a symbolic link before '..', so it is {written}, "
                              f"not {root / norm[key]}: write the path without '..' after a link")
        real[key] = written
    project = Path(os.path.realpath(root))
    for key, path in real.items():
        if _contains(path, project):
            raise ConfigError(f"paths.{key}: {values[key]!r} is {path} through a symbolic link, which contains the "
                              "project folder; give it a folder of its own")
    for a in sorted(real):
        for b in sorted(real):
            if a != b and _contains(real[a], real[b]):
                what = "is the same folder as" if real[a] == real[b] else "contains"
                raise ConfigError(f"paths.{a} ({values[a]!r}) {what} paths.{b} ({values[b]!r}) once symbolic links "
                                  f"are followed ({real[a]}): every configured path needs a folder of its own")


def _check_walkable(root: Path, key: str, value: str) -> None:
    """Each part of ``root/value`` that exists is a folder (the last may be a file) and resolves: a link loop or a
    file in the middle is one line here, not an OSError when a stage first creates the folder."""
    where = Path(root)
    parts = Path(value).parts
    for i, part in enumerate(parts):
        where = where / part
        try:
            st = os.stat(where)
        except FileNotFoundError:
            return  # the rest does not exist yet: the stage creates it
        except OSError as exc:  # ELOOP: a link loop; ENOTDIR, EACCES
            raise ConfigError(f"paths.{key}: {value!r} cannot be used: {where}: {exc.strerror}") from None
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"paths.{key}: {value!r} goes through {where}, which is a file, not a folder")


def _resolve(root: Path, norm: str) -> Path:
    return (Path(root) / norm).resolve()


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents
