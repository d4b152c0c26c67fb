"""The import layers hold: `lint-imports` keeps every contract in pyproject.toml, and no import circle exists.

The contracts (``[tool.importlinter]``): the layers from the CLI down to the leaf modules, no circle between
siblings at any depth, and each stage's internals imported only by that stage. grimp's graph counts every import,
at the top of a file or inside a function, so a lazy import cannot hide a circle.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_lint_imports_keeps_every_contract():
    res = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in res.stdout, res.stdout


def test_the_contracts_are_the_ones_meant():
    """A layers contract over every top-level module, an acyclic one, and a protected one per stage."""
    by_type: dict[str, list[dict]] = {}
    for c in contracts():
        by_type.setdefault(c["type"], []).append(c)
    (layers,) = by_type["layers"]
    assert layers["containers"] == ["pipeline"] and layers["exhaustive"] is True
    assert by_type["acyclic_siblings"][0]["ancestors"] == ["pipeline"]
    stages = {"ingest", "rollout", "verify", "annotate", "reformulate", "publish", "train", "probe", "report"}
    protected = {m.split(".")[1] for c in by_type["protected"] for m in c["protected_modules"]}
    assert protected == stages


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the strongly connected components of the import graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def test_no_import_circle():
    graph = grimp.build_graph("pipeline", cache_dir=None)
    circles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
    assert not circles, f"import circles (imports inside functions count): {circles}"


LAZY = re.compile(r"^[ \t]+(from pipeline[. ]|import pipeline)")


def test_an_import_inside_a_function_says_why():
    """No import of pipeline inside a function to dodge a circle: each one left says why it is lazy (start-up time,
    an optional heavy package, a lean worker) in a ``# lazy:`` comment on its line."""
    silent = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
              for path in sorted((REPO / "pipeline").rglob("*.py"))
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if LAZY.match(line) and "# lazy:" not in line]
    assert not silent, "imports inside functions without a '# lazy: <why>' comment:\n" + "\n".join(silent)


def test_the_circle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert sorted(sorted(c) for c in strongly_connected(graph) if len(c) > 1) == [["p.a", "p.b"]]


def test_every_module_of_pipeline_stays_under_450_lines():
    """A module past 450 lines holds more than one idea: split it where the split shows the design (as config, catalog,
    io, arith, the card and the verify pool were split)."""
    from pathlib import Path

    pipeline = Path(__file__).resolve().parents[1] / "pipeline"
    long = {str(p.relative_to(pipeline.parent)): n for p in sorted(pipeline.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert long == {}, long
