"""Every parameter a dvc.yaml stage tracks exists in the file it names (DVC stops the run otherwise).

A stage's ``params`` entry is a key of the params.yaml beside its dvc.yaml (``annotate``,
``rollout.k``) or ``{file: [keys]}``; DVC refuses to run a stage whose key is missing
("Parameters 'annotate' are missing from ..."), which the CLI-level tests of the stages never see.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DVC_FILES = sorted(p for p in [REPO / "dvc.yaml", *REPO.glob("experiments/*/dvc.yaml")] if p.exists())


def _has(tree: object, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def _tracked(dvc_file: Path) -> list[tuple[str, Path, str]]:
    """(stage, params file, key) for every tracked parameter of every stage."""
    stages = yaml.safe_load(dvc_file.read_text())["stages"]
    out = []
    for name, stage in stages.items():
        body = stage.get("do", stage)  # foreach stages keep theirs under `do`
        for entry in body.get("params", []):
            items = entry.items() if isinstance(entry, dict) else [("params.yaml", [entry])]
            for file, keys in items:
                out += [(name, dvc_file.parent / file, key) for key in keys]
    return out


@pytest.mark.parametrize("dvc_file", DVC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_tracked_parameter_exists(dvc_file):
    tracked = _tracked(dvc_file)
    assert tracked, f"{dvc_file} tracks no parameters"
    missing = [f"{stage}: {key} (in {file.relative_to(REPO)})" for stage, file, key in tracked
               if not _has(yaml.safe_load(file.read_text()), key)]
    assert not missing, "DVC would refuse these stages: " + "; ".join(missing)


def test_the_check_sees_a_missing_key(tmp_path):
    (tmp_path / "params.yaml").write_text("verify: {workers: 2}\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"a": {"cmd": "x", "params": ["verify", "annotate"]},
                                                                  "b": {"cmd": "y", "params": [{"o.yaml": ["k.j"]}]}}}))
    (tmp_path / "o.yaml").write_text("k: {i: 1}\n")
    got = [(s, f.name, k, _has(yaml.safe_load(f.read_text()), k)) for s, f, k in _tracked(tmp_path / "dvc.yaml")]
    assert got == [("a", "params.yaml", "verify", True), ("a", "params.yaml", "annotate", False),
                   ("b", "o.yaml", "k.j", False)]
