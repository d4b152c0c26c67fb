"""The modules of pipeline/ a module can load: a static walk of every import, at the top of a file or inside a
function, through pipeline/ (tests/test_dvc_deps.py, tests/test_public_api.py)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The root package's __init__ (a docstring and the version string) runs for every module below it;
# it counts only where a module imports a name from it (publish writes the version into its card).
ROOT_PACKAGE = "pipeline"
# A module named by string: "pipeline.verify._preload"; a registry's folder: "pipeline.engines" (every module in it).
MODULE_STRING = re.compile(r"(pipeline(?:\.\w+)+)(?::\w+)?")
# Modules whose module strings name what *another* module imports: pipeline/stages.py declares each command's module for
# the CLI (pipeline/cli.py), which imports it only when that command runs; the locks read the same table for its
# writers and import no command. A stage's deps start at its own command, so these strings are not followed here.
DECLARES_ONLY = frozenset({"pipeline.stages"})


def module_file(name: str, root: Path = REPO) -> Path | None:
    """The file of module ``name`` under ``root`` (a package's ``__init__.py``), or None."""
    parts = name.split(".")
    if parts[0] != ROOT_PACKAGE:
        return None
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def imported_names(name: str, root: Path = REPO) -> frozenset[str]:
    """Every module name a module imports anywhere in its file (top level or inside functions)."""
    path = module_file(name, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..a import b
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            submodules = {f"{source}.{a.name}" for a in node.names if module_file(f"{source}.{a.name}", root)}
            out |= submodules
            if len(submodules) < len(node.names):  # a name defined in the module itself
                out.add(source)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and name not in DECLARES_ONLY
              and (m := MODULE_STRING.fullmatch(node.value))):
            out.add(m.group(1))
            out |= folder_modules(m.group(1), root)
    return frozenset(out)


def folder_modules(name: str, root: Path = REPO) -> set[str]:
    """A package named by string is a registry's folder (``Registry(..., package="pipeline.engines")``): the
    registry imports every module in it, so each counts as loaded."""
    path = module_file(name, root)
    if path is None or path.name != "__init__.py":
        return set()
    return {f"{name}.{p.stem}" for p in path.parent.glob("*.py") if not p.name.startswith("_")}


def with_packages(name: str) -> list[str]:
    """``pipeline.a.b`` -> ``pipeline.a``, ``pipeline.a.b`` (importing a module runs its packages' __init__)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]


def loaded_modules(entry: str, root: Path = REPO, *, leaves: frozenset[str] = frozenset()) -> set[str]:
    """The modules of pipeline/ that importing ``entry`` and calling anything in it can load; a module of ``leaves``
    counts, but what it imports is not followed (unless something else imports it too)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name == ROOT_PACKAGE and name not in seen:
            seen.add(name)
            continue
        for n in with_packages(name):
            if n not in seen and module_file(n, root):
                seen.add(n)
                if n not in leaves:
                    todo.extend(imported_names(n, root))
    return seen
