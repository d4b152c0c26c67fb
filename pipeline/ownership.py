"""What passband may delete or replace: only folders it can prove it wrote.

Every destructive operation (a table folder's stale shards removed by :func:`pipeline.io.replace_dir`,
the published folder swapped and the old one removed, the prepared model folder and a GRPO checkpoint
replaced) first calls :func:`check_target`. The target passes when it does not exist, is an empty
folder, or carries passband's proof of ownership for its kind:

==================  ==================================================================================
kind                proof
==================  ==================================================================================
table folder        the marker file ``.passband-table`` naming the table (written by ``replace_dir``)
published folder    its ``build.json``, a JSON object with ``passband_version`` (written by publish)
report folder       its ``report.json``, a JSON object with ``passband_version`` (written by report)
model folder        its ``passband_model.json`` (written by ``prepare-model``)
GRPO checkpoint     its ``train_log.json``, a JSON object with ``config`` and ``log`` (written by training)
catalog file        views only, each with passband's comment (written by ``passband catalog``; a file, so
                    :func:`check_file_target`)
==================  ==================================================================================

It is refused, with a one-line :class:`NotOwnedError` naming the path and what to do, when it exists
without the proof, is a file, is a symbolic link (passband never replaces a folder through a link: the
link would be swapped out, or the folder it points to, possibly outside the project, emptied), or when
it contains the project folder or another configured path (``paths.published: .``, ``paths.published: data``).

Table folders made by earlier versions carry no marker. Such a folder counts as owned (and gets the
marker) when everything in it is a shard of that very table, recognised by the ``passband.table``
entry every shard passband ever wrote carries in its Parquet footer, or a temp file of passband's own
(``.<name>.parquet.<random>.tmp``); a folder holding anything else (``mydata/source.parquet``, notes, a
subfolder) is refused, and nothing in it is touched.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.errors import PassbandError

TABLE_MARKER = ".passband-table"


class NotOwnedError(PassbandError):
    """A destructive operation's target is not provably passband's own output."""


def _json_object(path: Path) -> dict | None:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def published_proof(folder: Path) -> bool:
    """The folder holds the ``build.json`` publish writes (a JSON object with ``passband_version``)."""
    data = _json_object(Path(folder) / "build.json")
    return data is not None and "passband_version" in data


def report_proof(folder: Path) -> bool:
    """The folder holds the ``report.json`` ``passband report`` writes (a JSON object with ``passband_version``)."""
    data = _json_object(Path(folder) / "report.json")
    return data is not None and "passband_version" in data


def model_proof(folder: Path) -> bool:
    """The folder holds the ``passband_model.json`` ``prepare-model`` writes (with ``model_id`` and ``revision``)."""
    data = _json_object(Path(folder) / "passband_model.json")
    return data is not None and "model_id" in data and "revision" in data


def checkpoint_proof(folder: Path) -> bool:
    """The folder holds the ``train_log.json`` GRPO training writes (with ``config`` and ``log``)."""
    data = _json_object(Path(folder) / "train_log.json")
    return data is not None and "config" in data and "log" in data


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_target(target: str | Path, *, owned: Callable[[Path], bool], what: str, key: str | None = None,
                 root: str | Path | None = None, others: Iterable[str | Path] = ()) -> bool:
    """Raise :class:`NotOwnedError` unless passband may replace or remove ``target``; whether it exists.

    ``owned(folder)`` is the kind's proof (:func:`published_proof`, ...); ``what`` names the folder in the
    error (``"the published folder"``) and ``key`` the params.yaml key that points at it. ``root`` (the
    project folder) and ``others`` (every other configured path) must not be inside ``target``.
    """
    target = Path(target)
    where = f" (paths.{key})" if key else ""
    fix = f"point paths.{key} at a folder of its own inside the project" if key else "choose a folder of its own"
    if target.is_symlink():
        raise NotOwnedError(f"{target}{where} is a symbolic link (to {os.readlink(target)}): passband replaces "
                            f"{what} whole and never through a link; remove the link (what it points to is kept) or {fix}")
    resolved = target.resolve()
    for other in ([Path(root)] if root is not None else []) + [Path(o) for o in others]:
        if _contains(resolved, other.resolve()):
            name = "the project folder" if root is not None and other == Path(root) else str(other)
            raise NotOwnedError(f"{target}{where} contains {name}: passband would replace it whole; {fix}")
    if not target.exists():
        return False
    if not target.is_dir():
        raise NotOwnedError(f"{target}{where} is a file, not {what}: passband replaces that folder whole; "
                            f"move the file away or {fix}")
    if owned(target) or not any(target.iterdir()):
        return True
    raise NotOwnedError(f"{target}{where} exists but passband did not write it (no {_proof_name(owned)}): "
                        f"nothing in it was touched; {fix}, or move its files away")


def check_file_target(target: str | Path, *, owned: Callable[[Path], bool], what: str, proof: str,
                      key: str | None = None) -> bool:
    """Raise :class:`NotOwnedError` unless passband may replace the file ``target``; whether it exists.

    The file kind of :func:`check_target`: it passes when it does not exist, is empty, or ``owned(file)``
    (``proof`` says what that proof is, in the error). Refused: a symbolic link (replacing it would drop the user's
    link), anything but a regular file, and a file without the proof, which is left as it is.
    """
    target = Path(target)
    where = f" (paths.{key})" if key else ""
    fix = f"point paths.{key} at a file of its own inside the project" if key else "choose a file of its own"
    if target.is_symlink():
        raise NotOwnedError(f"{target}{where} is a symbolic link (to {os.readlink(target)}): passband replaces "
                            f"{what} whole and never through a link; remove the link or {fix}")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise NotOwnedError(f"{target}{where} is not a file, so not {what}: nothing was touched; move it away or {fix}")
    if st.st_size == 0 or owned(target):
        return True
    raise NotOwnedError(f"{target}{where} exists but passband did not write it ({proof}): it was left as it is; "
                        f"{fix}, or move the file away")


def _proof_name(owned: Callable[[Path], bool]) -> str:
    return {published_proof: "build.json", report_proof: "report.json", model_proof: "passband_model.json",
            checkpoint_proof: "train_log.json"}.get(owned, "passband marker")


def remove_tree(path: str | Path) -> None:
    """Remove a folder passband made (a staging or swapped-out folder); a symbolic link is unlinked, never followed."""
    import shutil

    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


__all__ = ["TABLE_MARKER", "NotOwnedError", "check_file_target", "check_target", "checkpoint_proof", "model_proof",
           "published_proof", "remove_tree", "report_proof"]
