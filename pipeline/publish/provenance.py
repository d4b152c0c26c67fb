"""Where a published folder comes from: how it was built (passband's version, the git commit and whether the tree was
clean, a digest of the DVC lock entries upstream of publish) and the licenses of its sources (each source's own
LICENSE file, detected).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipeline import __version__
from pipeline.config import ConfigError, Params
from pipeline.ingest.presets import get_preset
from pipeline.io import read_plain_file
from pipeline.keys import canonical_json
from pipeline.publish import card as card_mod
from pipeline.publish import manifest
from pipeline.publish.core import (
    UNKNOWN_LICENSE,
)

LOCK_STAGE = "publish"  # its own lock entry is left out of the digest (it records this stage's output)


def upstream_stages(stages: dict, root: Path) -> set[str] | None:
    """The lock's stages the publish stage is built from: those whose outputs its dvc.yaml deps name, and theirs,
    transitively (None without a dvc.yaml publish stage). Stages DVC runs after publish (drift, catalog, the
    reformulation report) are left out: at publish time their entries are not yet this run's."""
    try:
        spec = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages", {}).get(LOCK_STAGE)
        params = yaml.safe_load((root / "params.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not spec:
        return None

    def value(match: re.Match) -> str:
        v = params
        for part in match[1].split("."):
            v = v.get(part, {}) if isinstance(v, dict) else {}
        return v if isinstance(v, str) else match[0]

    def resolve(entry) -> str:
        return os.path.normpath(re.sub(r"\$\{([\w.]+)\}", value, entry if isinstance(entry, str) else next(iter(entry))))

    wanted = {resolve(d) for d in spec.get("deps", [])}
    chosen: set[str] = set()
    while True:
        new = {name for name, st in stages.items() if name not in chosen
               and any(os.path.normpath(o.get("path", "")) in wanted for o in st.get("outs") or [])}
        if not new:
            return chosen
        chosen |= new
        wanted |= {os.path.normpath(d.get("path", "")) for name in new for d in stages[name].get("deps") or []}


def dvc_lock_digest(root: Path) -> str | None:
    """sha256 of the canonical JSON of dvc.lock's entries of the stages this folder is built from (:func:`upstream_stages`;
    every stage but publish itself where dvc.yaml has no publish stage). A fresh clone's ``dvc repro`` rewrites those
    entries, identical, before publish runs, so the digest, and the folder, are the committed ones."""
    lock = root / "dvc.lock"
    if not lock.is_file():
        return None
    raw = yaml.safe_load(lock.read_text()) or {}
    every = {k: v for k, v in (raw.get("stages") or {}).items() if k != LOCK_STAGE}
    upstream = upstream_stages(every, root)
    stages = every if upstream is None else {k: v for k, v in every.items() if k in upstream}
    return hashlib.sha256(canonical_json({"schema": raw.get("schema"), "stages": stages}).encode()).hexdigest()


def code_paths(root: Path) -> list[str]:
    """The code the publish stage depends on: its dvc.yaml deps under pipeline/ and schemas/ (both folders whole
    without a dvc.yaml publish stage)."""
    try:
        spec = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages", {}).get(LOCK_STAGE) or {}
    except (OSError, yaml.YAMLError):
        spec = {}
    deps = [d if isinstance(d, str) else next(iter(d)) for d in spec.get("deps", [])]
    mine = [d for d in deps if d.split("/")[0] in ("pipeline", "schemas")]
    return mine or ["pipeline", "schemas"]


def git_state(root: Path) -> tuple[str | None, bool]:
    """(the last commit that changed the code publish depends on (:func:`code_paths`), whether that code differs
    from it); (None, False) outside a git checkout. Not HEAD, nor the last commit to pipeline/: committing the run's
    dvc.lock, docs or a module publish does not load moves those, and a card naming them would differ in a fresh
    clone's run while DVC sees nothing to re-run, changing dvc.lock again."""
    paths = code_paths(root)
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%H", "--", *paths], cwd=root,
                              capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return None, False
        diff = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root,
                              capture_output=True, text=True, timeout=30)
        return head.stdout.strip() or None, bool(diff.stdout.strip())  # None: no commit holds them
    except (OSError, subprocess.TimeoutExpired):
        return None, False


def build_info(root: Path) -> card_mod.BuildInfo:
    commit, dirty = git_state(root)
    return card_mod.BuildInfo(__version__, commit, dirty, dvc_lock_digest(root))


def read_build_info(folder: Path) -> dict:
    """build.json as an object; one line when it is missing, a link or corrupt (pipeline.publish.manifest)."""
    return manifest.read_build(folder)[1]


def detect_license(text: str) -> str | None:
    """The Hub id of a license text, for the few texts recognised with certainty (else None)."""
    head = text[:2000]
    if "MIT License" in head or "Permission is hereby granted, free of charge" in head:
        return "mit"
    if "Apache License" in head and "Version 2.0" in head:
        return "apache-2.0"
    return None


# The longest license text in common use (GPL-3.0) is 35 KB: a bigger LICENSE is not one, and is never copied.
LICENSE_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class SourceLicense:
    source: str
    kind: str
    license: str
    text_file: Path | None  # LICENSE beside the source's file, when there is one
    text: bytes | None = None  # its bytes, read once (pipeline.io.read_plain_file): what the published folder gets


def source_licenses(params: Params, *, root: Path) -> list[SourceLicense]:
    """Each source's license: its preset's own (a preset names one dataset, so its license wins), else
    publish.licenses[kind]; checked against a recognised LICENSE text beside the source's file; without either, the
    recognised text's; without any, ``unknown``.

    The LICENSE is copied into the published folder (and pushed), so it must be a regular file in the source's
    folder, not a symbolic link or a hard link (planted in a shared folder, either would publish another file),
    of at most :data:`LICENSE_MAX_BYTES`; else a one-line error before any work."""
    out = []
    for src in params.ingest.sources:
        preset = get_preset(src.preset).license if src.preset else None
        lic = preset or params.publish.licenses.get(src.kind)
        given = f"source preset {src.preset!r}'s license" if preset else f"publish.licenses for source kind {src.kind!r}"
        text_file = text = None
        if src.path:
            candidate = (root / src.path).parent / "LICENSE"
            if candidate.is_symlink() or candidate.exists():
                text_file = candidate
                text = read_plain_file(
                    candidate, max_bytes=LICENSE_MAX_BYTES, what=f"the license of source {src.name!r}",
                    fix="put the license text itself there (or remove it: the source's license is then "
                        "publish.licenses, else unknown)")
                found = detect_license(text.decode(errors="replace"))
                if found and lic is not None and lic != found:
                    raise ConfigError(f"{given} is {lic!r}, but {candidate} is the {found!r} license text")
                lic = lic or found
        out.append(SourceLicense(src.name, src.kind, lic or UNKNOWN_LICENSE, text_file, text))
    return out
