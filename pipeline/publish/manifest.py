"""What publish wrote, and the proof that a folder still holds exactly that before it is pushed.

``publish`` records every file of the folder it builds, but ``build.json`` itself, in build.json's ``files``:
``{"data/learnable/train-00000-of-00001.parquet": {"size": 24576, "sha256": "..."}, ...}``. ``push`` uploads those
files and nothing else (:func:`verified_files`): the folder is walked without following a link, and the push is
refused, with one line naming the first offence, when it holds a link (to a file or a folder), an entry publish did
not write (hidden ones included), anything but regular files and folders, or a listed file that is missing or whose
size or sha256 differs. Each file is opened without following links (``O_NOFOLLOW``), checked, and handed to the
Hub client as that open file, so what is hashed is what is uploaded.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pipeline.publish.core import PublishError

BUILD_FILE = "build.json"
_CHUNK = 1 << 20


class ManifestError(PublishError):
    """The folder is not what publish wrote: nothing is uploaded."""


@dataclass(frozen=True)
class Entry:
    path: str  # posix path in the folder and in the repo
    size: int
    sha256: str


def _digest(f: BinaryIO) -> str:
    h = hashlib.sha256()
    while chunk := f.read(_CHUNK):
        h.update(chunk)
    return h.hexdigest()


def file_manifest(folder: Path) -> dict[str, dict[str, object]]:
    """path -> {size, sha256} of every file publish wrote into ``folder`` (its staging copy), build.json excepted."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel != BUILD_FILE:
            with p.open("rb") as f:
                out[rel] = {"size": p.stat().st_size, "sha256": _digest(f)}
    return out


def listed(build: dict, *, folder: Path) -> list[Entry]:
    """The manifest of a build.json already parsed; a :class:`ManifestError` when it has none or a malformed one."""
    files = build.get("files")
    if not isinstance(files, dict) or not files:
        raise ManifestError(f"{Path(folder) / BUILD_FILE} lists no files (built by an older passband, or edited): "
                            "run `passband publish` again")
    out = []
    for path, meta in files.items():
        ok = (isinstance(path, str) and isinstance(meta, dict) and isinstance(meta.get("size"), int)
              and isinstance(meta.get("sha256"), str) and len(meta["sha256"]) == 64)
        parts = path.split("/") if isinstance(path, str) else []
        if not ok or not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in path:
            raise ManifestError(f"{Path(folder) / BUILD_FILE} has a malformed entry {str(path)[:80]!r}: "
                                "run `passband publish` again")
        out.append(Entry(path, meta["size"], meta["sha256"]))
    return sorted(out, key=lambda e: e.path)


def _walk(folder: Path, rel: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """(posix path, lstat) of every entry under ``folder``, links never followed."""
    with os.scandir(folder / rel if rel else folder) as it:
        for entry in sorted(it, key=lambda e: e.name):
            path = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            yield path, st
            if stat.S_ISDIR(st.st_mode):
                yield from _walk(folder, path)


def check_tree(folder: Path, entries: list[Entry]) -> None:
    """Refuse a folder that holds anything but the listed files, their folders and build.json."""
    folder = Path(folder)
    wanted = {e.path for e in entries}
    dirs = {"/".join(e.path.split("/")[:i]) for e in entries for i in range(1, e.path.count("/") + 1)}
    seen = set()
    if folder.is_symlink():
        raise ManifestError(f"{folder} is a link: push never follows links; point paths.published at the folder")
    try:
        for path, st in _walk(folder):
            where = folder / path
            if stat.S_ISLNK(st.st_mode):
                raise ManifestError(f"{where} is a link (to {os.readlink(where)!r}): push never follows links and "
                                    "uploads only what publish wrote; remove it, or run `passband publish` again")
            if stat.S_ISDIR(st.st_mode):
                if path not in dirs:
                    raise ManifestError(f"{where}/ was not written by publish: push uploads only what publish wrote; "
                                        "move it out, or run `passband publish` again")
                continue
            if not stat.S_ISREG(st.st_mode):
                raise ManifestError(f"{where} is not a regular file: push uploads only what publish wrote")
            if path != BUILD_FILE and path not in wanted:
                raise ManifestError(f"{where} was not written by publish (build.json does not list it): push uploads "
                                    "only what publish wrote; move it out, or run `passband publish` again")
            seen.add(path)
    except OSError as exc:
        raise ManifestError(f"cannot read {folder}: {exc.strerror or exc}") from None
    missing = sorted(wanted - seen)
    if missing:
        raise ManifestError(f"{folder / missing[0]} is listed in build.json but missing ({len(missing)} files): "
                            "run `passband publish` again")


def open_verified(folder: Path, entry: Entry) -> BinaryIO:
    """``entry`` opened without following a link, its size and sha256 checked; the file positioned at its start."""
    where = Path(folder) / entry.path
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ManifestError(f"cannot open {where} ({exc.strerror}): push never follows links; run `passband publish` "
                            "again") from None
    f = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size or _digest(f) != entry.sha256:
            raise ManifestError(f"{where} changed since publish wrote it (size or sha256 differs from build.json): "
                                "run `passband publish` again")
        f.seek(0)
        return f
    except BaseException:
        f.close()
        raise


def read_build(folder: Path) -> tuple[bytes, dict]:
    """build.json's bytes (opened without following a link) and its object; one line when it is missing or corrupt."""
    import json

    where = Path(folder) / BUILD_FILE
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ManifestError(f"{folder} holds no {BUILD_FILE}: build it with `passband publish` first") from None
    except OSError as exc:
        raise ManifestError(f"cannot open {where} ({exc.strerror}; push never follows links): run `passband publish` "
                            "again") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > 64 << 20:
            raise ManifestError(f"{where} is not a build.json publish wrote: run `passband publish` again")
        raw = f.read()
    try:
        build = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"{where} is corrupt ({type(exc).__name__}: {str(exc)[:80]}): run `passband publish` "
                            "again") from None
    if not isinstance(build, dict):
        raise ManifestError(f"{where} is corrupt (not a JSON object): run `passband publish` again")
    return raw, build


def verified_files(folder: Path, build: dict) -> list[Entry]:
    """The entries of ``build`` after :func:`check_tree` and each file's size and sha256 checked: what push will
    upload (each is opened and checked again then, and uploaded from that open file)."""
    entries = listed(build, folder=folder)
    check_tree(folder, entries)
    for entry in entries:
        open_verified(folder, entry).close()
    return entries
