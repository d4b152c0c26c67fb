"""The band-value experiment is a consumer of passband: it uses only what pipeline's modules publish.

Its code is every Python file under experiments/: its package (experiments/band_value/bandvalue, ``python -m
bandvalue``: the arms, training, measurement and report) and its scripts. From pipeline they may import a module,
or a name that module lists in ``__all__``, and reach into an imported module only for names in its ``__all__``;
never a name that starts with ``_``. pipeline/ itself holds no experiment code (the last test).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from import_graph import REPO

# The experiments' own code, not what their stages write under data/ (the band-value pin: a copy of pipeline/).
CONSUMERS = sorted(p for p in REPO.glob("experiments/**/*.py") if "data" not in p.relative_to(REPO).parts)


@dataclass(frozen=True)
class Use:
    line: int
    module: str  # the pipeline module the name is taken from
    name: str


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[: -node.level])
    return f"{package}.{node.module}" if node.module else package


def uses(path: Path) -> list[Use]:
    """The pipeline names a file takes: ``from pipeline.x import n`` and ``alias.n`` on an imported pipeline module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}  # local name -> pipeline module
    out: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "pipeline" and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path)
            if module.split(".")[0] != "pipeline":
                continue
            for a in node.names:
                if _is_module(f"{module}.{a.name}"):
                    aliases[a.asname or a.name] = f"{module}.{a.name}"
                    if a.name.startswith("_"):
                        out.append(Use(node.lineno, module, a.name))
                else:
                    out.append(Use(node.lineno, module, a.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if not _is_module(f"{module}.{node.attr}"):
                out.append(Use(node.lineno, module, node.attr))
    return out


def not_public(use: Use) -> str | None:
    """Why a use is not of a published name, or None."""
    if use.name.startswith("_"):
        return "starts with _"
    published = getattr(importlib.import_module(use.module), "__all__", None)
    if published is None:
        return f"{use.module} has no __all__"
    if use.name not in published:
        return f"not in {use.module}.__all__"
    return None


@pytest.mark.parametrize("path", CONSUMERS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_experiment_uses_only_published_names(path):
    found = uses(path)
    imports = re.search(r"^\s*(from|import) pipeline\b", path.read_text(encoding="utf-8"), re.M)
    assert found or not imports, f"{path}: imports pipeline but no pipeline names found: the scan is broken"
    bad = [f"line {u.line}: {u.module}.{u.name} ({why})" for u in found if (why := not_public(u))]
    assert not bad, f"{path.relative_to(REPO)} uses names pipeline does not publish: " + "; ".join(bad)


def test_every_name_in_a_consumed_all_exists():
    """An ``__all__`` that names something the module lacks would pass the check above and fail at import."""
    modules = {u.module for p in CONSUMERS for u in uses(p)}
    for name in sorted(modules):
        module = importlib.import_module(name)
        missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it does not define: {missing}"


def test_the_scan_sees_private_and_unpublished_names(tmp_path):
    src = tmp_path / "consumer.py"
    src.write_text(
        "from pipeline.annotate.plots import _save_png, write_plots\n"
        "from pipeline.annotate import drift\n"
        "from pipeline.rollout import policy as pol\n"
        "def f():\n"
        "    drift.drift\n"
        "    drift._private\n"
        "    pol.resolve_policy\n"
    )
    got = {(u.module, u.name) for u in uses(src)}
    assert got == {("pipeline.annotate.plots", "_save_png"), ("pipeline.annotate.plots", "write_plots"),
                   ("pipeline.annotate.drift", "drift"), ("pipeline.annotate.drift", "_private"),
                   ("pipeline.rollout.policy", "resolve_policy")}
    assert not_public(Use(1, "pipeline.annotate.plots", "_save_png")) == "starts with _"
    assert not_public(Use(1, "pipeline.annotate", "no_such_name")) == "not in pipeline.annotate.__all__"


def test_the_experiment_package_is_a_consumer_and_pipeline_holds_no_experiment_code():
    """The scan covers the experiment's package; no module of pipeline/ imports it or names its files."""
    assert REPO / "experiments/band_value/bandvalue/experiment.py" in CONSUMERS
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) bandvalue\b", text, re.M), f"{path} imports the experiment"
        assert "band_value_report" not in text and "train.band_value" not in text, f"{path} names experiment code"
