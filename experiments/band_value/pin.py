"""Pin the passband code the experiment runs on: ``git archive`` of pin.yaml's ``passband_commit``.

The experiment is a consumer of passband, and a long one (50 GRPO runs, hours on a CPU box, run across
sessions from DVC's cache). Its stages depend on this pinned copy, not on the working tree's pipeline/, so
work on passband (a refactor, a new module) does not make DVC retrain every arm, while the copy is still
exactly the code the stages ran with: its tree is a commit's, and moving the pin re-runs everything.

The stages run ``passband`` with ``PYTHONPATH`` set to the copy (``data/passband``), which Python puts
before the editable install of the working tree. The copy holds ``pipeline/``, ``schemas/`` and, for a commit
older than the set's move into ``pipeline/annotate/``, the labelled flag set quality.py reads; ``PINNED`` names
the commit.

Usage (the ``pin`` stage of dvc.yaml): ``python pin.py`` from this folder.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TARGET = HERE / "data" / "passband"
MARKER = "PINNED"
# What the pinned package reads at run time (paths relative to the repository root); a commit holds some of them:
# the labelled flag set was under tests/data/ until it became package data beside pipeline/annotate/quality.py.
CONTENT = ("pipeline", "schemas", "tests/data/flag_labels.jsonl")


def resolve(rev: str, repo: Path) -> str:
    """The full commit id of ``rev`` in ``repo`` (an error naming the revision if git cannot find it)."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=repo,
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"pin: pin.yaml passband_commit {rev!r} is not a commit of {repo}")
    return out.stdout.strip()


def present(commit: str, repo: Path) -> list[str]:
    """The paths of :data:`CONTENT` that ``commit`` holds (git archive stops at a path the commit lacks)."""
    out = subprocess.run(["git", "ls-tree", "--name-only", commit, "--", *CONTENT], cwd=repo,
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"pin: git ls-tree {commit} failed: {out.stderr.strip()}")
    return [p for p in CONTENT if p in set(out.stdout.split())]


def archive(commit: str, repo: Path) -> bytes:
    out = subprocess.run(["git", "archive", "--format=tar", commit, "--", *present(commit, repo)], cwd=repo,
                         capture_output=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"pin: git archive {commit} failed: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout


def pin(rev: str, *, repo: Path, target: Path = TARGET) -> str:
    """Write the code of ``rev`` to ``target`` atomically (a sibling temp folder renamed into place). An existing
    ``target`` is replaced only if it is a pin (it holds ``PINNED``): anything else there is refused, untouched."""
    if target.is_symlink() or (target.exists() and not (target / MARKER).is_file()):
        raise SystemExit(f"pin: {target} exists and is not a pinned copy (no {MARKER} file); refusing to replace it")
    commit = resolve(rev, repo)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".passband-pin-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive(commit, repo))) as tar:
            tar.extractall(tmp, filter="data")
        (tmp / MARKER).write_text(commit + "\n")
        if target.exists():
            old = target.with_name(f".{target.name}-old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old)
        else:
            tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return commit


def main() -> None:
    config = yaml.safe_load((HERE / "pin.yaml").read_text(encoding="utf-8"))
    rev = config.get("passband_commit")
    if not rev:
        raise SystemExit("pin: pin.yaml has no passband_commit")
    repo = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=HERE, capture_output=True, text=True,
                               timeout=60, check=True).stdout.strip())
    commit = pin(str(rev), repo=repo)
    print(f"pinned passband {commit} -> {TARGET.relative_to(HERE)}", file=sys.stderr)


if __name__ == "__main__":
    main()
