"""Every parameter a dvc.yaml stage tracks exists in the file it names (DVC stops the run otherwise).

A stage's ``params`` entry is a key of the params.yaml beside its dvc.yaml (``annotate``,
``rollout.k``) or ``{file: [keys]}``; DVC refuses to run a stage whose key is missing
("Parameters 'annotate' are missing from ..."), which the CLI-level tests of the stages never see.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError, VerifyConfig, field_default, parse_params

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


# --- params.yaml holds no second copy of a default ----------------------------------------------------

def _leaves(tree: dict, prefix: str = "") -> list[str]:
    """The dotted key of every leaf: a value that is not a mapping, or an empty mapping."""
    out = []
    for k, v in tree.items():
        key = f"{prefix}{k}"
        out += _leaves(v, f"{key}.") if isinstance(v, dict) and v else [key]
    return out


def _without(tree: dict, dotted: str) -> dict:
    tree = copy.deepcopy(tree)
    *parents, last = dotted.split(".")
    node = tree
    for part in parents:
        node = node[part]
    del node[last]
    return tree


def _needed(dvc_file: Path) -> list[str]:
    """Keys of the params.yaml beside ``dvc_file`` that DVC needs: the tracked ones and the interpolated ones."""
    tracked = [key for _, file, key in _tracked(dvc_file) if file == dvc_file.parent / "params.yaml"]
    interpolated = [m.split("[")[0] for m in re.findall(r"\$\{([^}]+)\}", dvc_file.read_text())]
    return tracked + interpolated


def test_params_yaml_repeats_a_default_only_where_dvc_needs_the_key():
    """Each default has one home, pipeline/config/: a key of params.yaml whose value is its default is there
    only because dvc.yaml interpolates or tracks it (without it DVC stops), never as a second copy."""
    path = REPO / "params.yaml"
    raw = yaml.safe_load(path.read_text())
    needed = _needed(REPO / "dvc.yaml")
    effective = parse_params(raw).model_dump()
    copies = []
    for key in _leaves(raw):
        smaller = _without(raw, key)
        try:
            same = parse_params(smaller).model_dump() == effective
        except ConfigError:  # a required key (or one whose absence means something else)
            continue
        if same and all(_has(smaller, n) for n in needed):
            copies.append(key)
    assert not copies, f"params.yaml repeats the code's defaults (drop them; dvc.yaml does not need them): {copies}"


def test_the_copy_check_sees_a_repeated_default():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["verify"] = {**raw["verify"], "workers": VerifyConfig().workers}
    smaller = _without(raw, "verify.workers")
    assert parse_params(smaller).model_dump() == parse_params(raw).model_dump()
    assert all(_has(smaller, n) for n in _needed(REPO / "dvc.yaml"))  # `verify` stays: DVC is content
    assert not all(_has(_without(raw, "paths.problems"), n) for n in _needed(REPO / "dvc.yaml"))


def test_params_yaml_sets_no_pluggable_option_to_its_default():
    """The same for the options each engine, reformulation method and the flag detectors validate themselves."""
    import pipeline.reformulate  # noqa: F401  (registers the methods)
    from pipeline.annotate.detectors import DETECTORS
    from pipeline.engines import get_engine
    from pipeline.reformulate.registry import get_method

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    groups = [(f"rollout.engine_options.{e}", get_engine(e).Options, o)
              for e, o in raw["rollout"].get("engine_options", {}).items()]
    groups += [(f"reformulate.options.{m}", get_method(m).Options, o)
               for m, o in raw.get("reformulate", {}).get("options", {}).items()]
    groups += [(f"annotate.options.{d}", DETECTORS[d].Options, o)
               for d, o in raw.get("annotate", {}).get("options", {}).items()]
    copies = [f"{where}.{k}" for where, model, opts in groups for k, v in opts.items()
              if k in model.model_fields and field_default(model, k) == v]
    assert not copies, f"params.yaml repeats these options' defaults: {copies}"
