"""dvc.lock matches the tree: every stage's command, its code and file dependencies and its params are what the lock
recorded, hashed by DVC itself (``Stage.status``, the computation behind ``dvc status``), so a change to a stage's
code without a new lock cannot land (CI runs ``python tests/test_dvc_lock.py`` before the tests, and this file).

Why that is enough for "a fresh clone's ``dvc repro`` leaves ``git status`` clean": on a fresh clone no output exists,
so every stage runs and the lock is rewritten from (a) the command, the dependencies and the params, which this check
compares, and (b) the outputs' hashes, which are the committed ones when the outputs are byte-identical from run to
run (tests/test_dvc_reproducible.py runs the pipeline twice and compares every declared output) and the committed
lock came from a from-scratch run (docs/operations.md, "Regenerating dvc.lock"). Dependencies that are another
stage's outputs (``data/problems`` for rollout) are left to (b): they are missing on a fresh clone.

The band-value experiment's lock (experiments/band_value/dvc.lock) is not checked: it records the runs as they were
made, on the code of their day, and is never re-run as a whole.

``python tests/test_dvc_lock.py [ROOT]``: exit 1, a line per stale stage, when the lock does not match.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
LOCKED = "dvc.yaml"  # the main pipeline's; DVC also indexes every other dvc.yaml of the repository


def stale(root: Path = REPO) -> list[str]:
    """One line per stage of ``root/dvc.yaml`` whose command, dependencies or params differ from ``dvc.lock``."""
    from dvc.repo import Repo

    lines = []
    with Repo(str(root)) as repo:
        main = (root / LOCKED).resolve()
        stages = [s for s in repo.index.stages if Path(s.dvcfile.path).resolve() == main]
        assert stages, f"no stage in {main}"
        produced = {str(out) for s in stages for out in s.outs}
        with repo.lock:
            for stage in stages:
                found = []
                for change in next(iter(stage.status().values()), []):
                    if isinstance(change, str):          # "changed command", "always changed", "deleted"...
                        found.append(change)
                        continue
                    for kind, what in change.items():
                        if kind == "changed outs":
                            continue                     # an output: rewritten by the run, see the docstring
                        if kind == "changed deps":
                            what = {p: s for p, s in what.items() if p not in produced}
                        found += [f"{p} {s}" for p, s in what.items()] if isinstance(what, dict) else [f"{kind}: {what}"]
                if found:
                    lines.append(f"{stage.name}: {', '.join(found)}")
    return lines


def stale_in_child(root: Path) -> list[str]:
    """:func:`stale` in a new process: DVC keeps hashes in memory, so a second look in one process misses an edit."""
    proc = subprocess.run([sys.executable, __file__, str(root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return [line.removeprefix("dvc.lock is stale: ") for line in proc.stderr.splitlines()
            if line.startswith("dvc.lock is stale: ")]


def _copy(tmp_path: Path) -> Path:
    """What DVC needs of the repository, in a fresh git repository at ``tmp_path/repo`` (``../shared`` beside it)."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in (".dvc/config", ".dvcignore", "dvc.yaml", "dvc.lock", "params.yaml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    for folder in ("pipeline", "schemas"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO.parent / "shared").exists():
        (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_the_committed_lock_matches_the_code_params_and_commands():
    assert stale() == [], "dvc.lock is stale: run `dvc repro` from scratch and commit dvc.lock (docs/operations.md)"


@pytest.mark.slow
def test_an_edit_without_a_new_lock_is_found(tmp_path):
    root = _copy(tmp_path)
    stale = stale_in_child
    assert stale(root) == []
    # bytecode beside the code (Python writes it unless told not to) is no change (.dvcignore)
    (root / "pipeline/annotate/__pycache__").mkdir()
    (root / "pipeline/annotate/__pycache__/core.cpython-311.pyc").write_bytes(b"\0")
    assert stale(root) == []
    # a stage's code: every stage that depends on it
    bands = root / "pipeline/bands.py"
    bands.write_text(bands.read_text() + "\n# an edit\n")
    found = stale(root)
    assert [line.split(":")[0] for line in found][:2] == ["ingest", "prepare_model"]
    assert all("pipeline/bands.py modified" in line for line in found) and len(found) == 14
    bands.write_text(bands.read_text().removesuffix("\n# an edit\n"))
    assert stale(root) == []
    # one detector: annotate and what reads its tables re-run, not ingest, the model, rollout or verify (the params
    # loader imports every registry to check names, which shapes no output: tests/test_dvc_deps.py)
    detector = root / "pipeline/annotate/detectors/answer_repetition.py"
    detector.write_text(detector.read_text() + "\n# an edit\n")
    rerun = {line.split(":")[0] for line in stale(root)}
    assert {"annotate", "annotate_reformulated"} <= rerun
    assert not rerun & {"ingest", "prepare_model", "rollout", "verify", "rollout_reformulated", "verify_reformulated"}
    detector.write_text(detector.read_text().removesuffix("\n# an edit\n"))
    assert stale(root) == []
    # a param a stage tracks, and a stage's command
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["rollout"]["k"] = 9
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = yaml.safe_load((root / "dvc.yaml").read_text())
    stages["stages"]["verify"]["cmd"] += " --workers 1"
    (root / "dvc.yaml").write_text(yaml.safe_dump(stages, sort_keys=False))
    found = dict(line.split(": ", 1) for line in stale(root))
    assert "'rollout': 'modified'" in found["rollout"]            # rollout tracks its whole section
    assert "'rollout.k': 'modified'" in found["annotate"]         # annotate tracks rollout.k
    assert "changed command" in found["verify"]
    assert "ingest" not in found


if __name__ == "__main__":
    lines = stale(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO)
    for line in lines:
        print(f"dvc.lock is stale: {line}", file=sys.stderr)
    if lines:
        print("run `dvc repro` from scratch and commit dvc.lock (docs/operations.md, 'Regenerating dvc.lock')",
              file=sys.stderr)
    sys.exit(1 if lines else 0)
