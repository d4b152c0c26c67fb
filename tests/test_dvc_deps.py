"""Every DVC stage depends on the code its command loads, so editing that code re-runs the stage.

A stage's command is ``passband <subcommand>``; ``pipeline/cli.py`` maps the subcommand to a module
(``COMMANDS``, imported lazily), and the stage loads that module and, transitively, every module of
``pipeline/`` it imports, at the top of a file or inside a function (a static walk of every ``import``
and ``from`` statement, so an import that runs only on some path still counts), plus the
``"pipeline.x.y"`` names that registries import by string (pipeline/cli.py itself, the wiring every
command passes through, shapes no output and is not counted). The data files that code reads count too:
``schemas/<table>.yaml`` for each table a loaded module names in a call (``schema("flags")``,
``read_table(path, name="problems")``) or a tuple of names (all of them where it imports ``TABLES``), and the files under
``pipeline/`` that :data:`DATA_READERS` names. A ``deps`` entry covers a file when it is the file or
a folder above it. An experiment's own package run on the working tree (``python -m bandvalue report``) loads its
folder's files and what the modules of ``pipeline/`` they import load (:func:`package_files`).

Run ``python tests/test_dvc_deps.py`` to print, per stage, the smallest folder-grouped deps that
cover what it loads today (long lists: pipeline/params_loader.py, which every subcommand loads its params through,
imports the stages' registries to check each name at load), and
``python tests/test_dvc_deps.py --write`` to put them in both dvc.yaml files (data deps and comments kept);
``--check`` exits 1 naming a file that ``--write`` would change (``python -m pipeline.docs`` runs both).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest
import yaml

# run as a script (--write, --check), tests/conftest.py has not put the support modules on the path
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
from import_graph import REPO, ROOT_PACKAGE, loaded_modules, module_file

DVC_FILES = ("dvc.yaml", "experiments/band_value/dvc.yaml")
# The params loader and the CLI option that calls it: every subcommand loads params.yaml through them, and they import
# every registry (engines, source kinds, presets, extractors, detectors, methods, layouts) to check each name when the
# params load, before any work. Checking a name shapes no output, so a stage depends on these two files but not on
# the registries they import for it: editing a detector re-runs annotate and what reads its tables, not ingest.
NAME_CHECKS = frozenset(("pipeline.cli_options", "pipeline.params_loader"))

# The files under pipeline/ that are not Python, and the module that reads each (a folder: every file in it).
DATA_READERS: dict[str, tuple[str, ...]] = {
    "pipeline/rollout/prompts.py": ("pipeline/prompts",),
    "pipeline/catalog/views.py": ("pipeline/views",),
    "pipeline/annotate/stage.py": ("pipeline/views/answer_keys.sql",),  # its metrics count from the view's SELECT
    "pipeline/annotate/quality.py": ("pipeline/annotate/flag_quality.yaml", "pipeline/annotate/flag_labels.jsonl"),
    "pipeline/reformulate/methods/llm_backward.py": ("pipeline/reformulate/prompts",),
    "pipeline/ingest/presets/__init__.py": ("pipeline/ingest/presets",),
    "pipeline/report/site.py": ("pipeline/report/assets",),
}
# --- what a stage needs -------------------------------------------------------------------------

@cache
def _tables() -> frozenset[str]:
    return frozenset(p.stem for p in (REPO / "schemas").glob("*.yaml"))


@cache
def schema_files(path: Path) -> frozenset[str]:
    """``schemas/<table>.yaml`` for each table a module names as a call argument or in a tuple or list of names;
    all of them where it takes ``TABLES`` from pipeline.schema (the catalog's views)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "pipeline.schema" and "TABLES" in {a.name for a in node.names}:
            names |= _tables()
        elif isinstance(node, ast.Call | ast.Tuple | ast.List):
            args = [*node.args, *(k.value for k in node.keywords)] if isinstance(node, ast.Call) else node.elts
            names |= {a.value for a in args if isinstance(a, ast.Constant) and a.value in _tables()}
    return frozenset(f"schemas/{n}.yaml" for n in names)


@cache
def needed_files(entry: str) -> frozenset[str]:
    """Repo-relative files a stage whose command runs module ``entry`` loads or reads; ``entry`` may also be an
    experiment's own package run from the working tree (a folder: :func:`package_files`)."""
    if "/" in entry:
        return package_files(entry)
    files = {module_file(m).relative_to(REPO).as_posix() for m in loaded_modules(entry, leaves=NAME_CHECKS)}
    for f in list(files):
        files |= set(DATA_READERS.get(f, ()))
        files |= schema_files(REPO / f)
    return frozenset(files)


@cache
def package_files(folder: str) -> frozenset[str]:
    """An experiment's package (``python -m NAME`` in its folder, on the working tree): its own files and what the
    modules of pipeline/ it imports load and read."""
    files: set[str] = set()
    for path in sorted((REPO / folder).rglob("*.py")):
        files.add(path.relative_to(REPO).as_posix())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names if module_file(f"{node.module}.{a.name}")]
                if len(names) < len(node.names):  # a name defined in the module itself
                    names.append(node.module)
            else:
                continue
            for name in names:
                if name.split(".")[0] == ROOT_PACKAGE and module_file(name):
                    files |= needed_files(name)
    return frozenset(files)


def covered(file: str, deps: Iterable[str]) -> bool:
    return any(file == d or file.startswith(d.rstrip("/") + "/") for d in deps)


# --- the stages ---------------------------------------------------------------------------------

# A stage of experiments/band_value that runs on a pinned copy of passband (experiments/band_value/pin.py):
# ``PYTHONPATH=$PWD/<copy> passband ...``. The copy holds every module of a commit, so a dep on it covers them.
PINNED = re.compile(r"PYTHONPATH=\$PWD/(\S+)\s+(.*)")
PIN_COMMAND = "python pin.py"  # the stage that writes the copy
# An experiment's own script (pin.py, drift_table.py): it must depend on itself and import nothing of pipeline/.
SCRIPT = re.compile(r"python (\S+\.py)$")
# An experiment's own package run on the working tree (``python -m bandvalue report``, in the stage's folder).
PACKAGE = re.compile(r"python -m (\w+)\b")


def _repo_path(path: str) -> str:
    p = Path(path).resolve()
    return p.relative_to(REPO).as_posix() if p.is_relative_to(REPO) else str(p)


@cache
def pinned() -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """``{stage address: (its pinned copy, the pin stage's outs, its deps)}`` for the stages that run on a pinned copy
    (DVC's index read once: opening it per stage cost about 2 s a stage, over 100 stages)."""
    from dvc.repo import Repo

    out, pin_outs = {}, {}
    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            if stage.path_in_repo not in DVC_FILES:
                continue
            if stage.cmd.strip() == PIN_COMMAND:
                pin_outs[stage.path_in_repo] = tuple(_repo_path(o.fs_path) for o in stage.outs)
            elif m := PINNED.match(stage.cmd.strip()):
                copy = _repo_path(str(Path(stage.wdir) / m.group(1)))
                out[stage.addressing] = (copy, stage.path_in_repo, tuple(_repo_path(d.fs_path) for d in stage.deps))
    return {a: (copy, pin_outs.get(f, ()), deps) for a, (copy, f, deps) in out.items()}


@cache
def stages() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{stage address: (command module, deps as repo-relative paths)}`` for every stage of DVC_FILES that runs
    passband from the working tree (not the pin stage, nor the stages that run on its pinned copy)."""
    from dvc.repo import Repo

    from pipeline.cli import COMMANDS

    out = {}
    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            if stage.path_in_repo not in DVC_FILES or SCRIPT.match(stage.cmd.strip()) or PINNED.match(stage.cmd):
                continue
            words = stage.cmd.split()
            if m := PACKAGE.match(stage.cmd.strip()):  # the experiment's package: its folder stands for the module
                module = _repo_path(str(Path(stage.wdir) / m.group(1)))
            else:
                assert words[0] == "passband", f"{stage.addressing}: runs {stage.cmd!r}, not a passband subcommand"
                module = COMMANDS[words[1]].split(":")[0]
            out[stage.addressing] = (module, tuple(_repo_path(d.fs_path) for d in stage.deps))
    return out


def _ids() -> list[str]:
    return list(stages())


@pytest.mark.parametrize("stage", _ids())
def test_stage_deps_cover_the_code_it_loads(stage):
    module, deps = stages()[stage]
    missing = sorted(f for f in needed_files(module) if not covered(f, deps))
    assert not missing, f"{stage} (runs {module}) loads or reads these, which its deps do not list: {missing}"


@pytest.mark.parametrize("stage", list(pinned()))
def test_a_pinned_stage_depends_on_the_pinned_copy_and_nothing_of_the_working_tree(stage):
    """The experiment's stages run on the pin stage's copy: they must depend on that copy (the pin stage's out),
    and a dep on the working tree's code would retrain the arms for edits they never run."""
    copy, pin_outs, deps = pinned()[stage]
    assert copy in pin_outs, f"{stage} runs on {copy}, which no pin stage ({PIN_COMMAND!r}) writes: {pin_outs}"
    assert copy in deps, f"{stage} runs on {copy} but does not depend on it"
    live = [d for d in deps if d.startswith(("pipeline", "schemas"))]
    assert not live, f"{stage} runs on the pinned copy but depends on the working tree's {live}"


@cache
def scripts() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{stage address: (its script, deps)}`` for the stages that run an experiment's own Python script."""
    from dvc.repo import Repo

    out = {}
    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            if stage.path_in_repo in DVC_FILES and (m := SCRIPT.match(stage.cmd.strip())):
                out[stage.addressing] = (_repo_path(str(Path(stage.wdir) / m.group(1))),
                                         tuple(_repo_path(d.fs_path) for d in stage.deps))
    return out


@pytest.mark.parametrize("stage", list(scripts()))
def test_a_script_stage_depends_on_its_script_which_loads_no_pipeline_code(stage):
    script, deps = scripts()[stage]
    assert script in deps, f"{stage} runs {script} but does not depend on it"
    imports = re.findall(r"^\s*(?:from|import) (pipeline\S*)", (REPO / script).read_text(encoding="utf-8"), re.M)
    assert not imports, f"{stage}: {script} imports {imports}: run it as a passband subcommand or list its code deps"


def test_a_pinned_stage_runs_a_command_its_pinned_commit_has():
    """The pinned stages run ``passband <command>`` of the pin's commit, not the working tree's CLI: ``band-value``
    left passband for the experiment's own package (experiments/band_value/bandvalue) after the pinned commit, so
    moving the pin past that move must move those stages to ``python -m bandvalue`` too (and pin the package)."""
    pin = yaml.safe_load((REPO / "experiments/band_value/pin.yaml").read_text(encoding="utf-8"))["passband_commit"]
    shown = subprocess.run(["git", "show", f"{pin}:pipeline/cli.py"], cwd=REPO, capture_output=True, text=True)
    if shown.returncode:
        pytest.skip(f"the pinned commit {pin} is not in this checkout")
    stages = yaml.safe_load((REPO / "experiments/band_value/dvc.yaml").read_text(encoding="utf-8"))["stages"]
    commands = {name: m.group(2).split()[1] for name, st in stages.items()
                if (m := PINNED.match(" ".join(st.get("do", st)["cmd"].split())))}
    assert "band-value" in commands.values()
    missing = {name: c for name, c in commands.items() if f'"{c}":' not in shown.stdout}
    assert not missing, f"these pinned stages run commands the pinned commit {pin[:12]} does not have: {missing}"


def test_the_experiment_pins_its_stages():
    assert {a.split(":")[0] for a in pinned()} == {"experiments/band_value/dvc.yaml"}
    assert any("train@" in a for a in pinned())


@pytest.mark.parametrize("stage", _ids())
def test_code_deps_exist(stage):
    """A dep on code that is gone (the removed annotate/bands.py shim) makes DVC stop; none is left."""
    _, deps = stages()[stage]
    gone = [d for d in deps if d.startswith(("pipeline/", "schemas/")) and not (REPO / d).exists()]
    assert not gone, f"{stage}: deps on missing paths {gone}"


@cache
def _tracked() -> frozenset[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", "pipeline", "schemas"], cwd=REPO, capture_output=True)
    if listed.returncode:
        pytest.skip("not a git checkout")
    return frozenset(filter(None, listed.stdout.decode().split("\0")))


@pytest.mark.parametrize("stage", _ids())
def test_code_deps_are_tracked(stage):
    """A dep on a file git does not track exists here but not in a fresh clone, whose dvc repro then stops."""
    _, deps = stages()[stage]
    code = [d for d in deps if d.startswith(("pipeline/", "schemas"))]
    untracked = [d for d in code if not any(covered(f, [d]) for f in _tracked())]
    assert not untracked, f"{stage}: deps on paths git does not track: {untracked}"


def test_every_data_file_under_pipeline_has_a_reader():
    data = {p.relative_to(REPO).as_posix() for p in (REPO / "pipeline").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc")}
    claimed = [d for ds in DATA_READERS.values() for d in ds]
    assert all((REPO / r).is_file() for r in DATA_READERS), "a reader in DATA_READERS is gone"
    unclaimed = sorted(f for f in data if not covered(f, claimed))
    assert not unclaimed, f"name the module that reads these in DATA_READERS: {unclaimed}"


def test_the_walk_follows_imports_inside_functions_relative_imports_and_registry_strings(tmp_path):
    files = {
        "pipeline/__init__.py": "",
        "pipeline/stage/__init__.py": "",
        "pipeline/stage/command.py": "import json\n\ndef run():\n    from pipeline.stage import core\n",
        "pipeline/stage/core.py": "from .helpers import x\nENGINES = {'fake': 'pipeline.engines.fake:Fake'}\n",
        "pipeline/stage/helpers.py": "x = 1\n",
        "pipeline/engines/__init__.py": "",
        "pipeline/engines/fake.py": "from pipeline.errors import PassbandError\n",
        "pipeline/errors.py": "class PassbandError(Exception): ...\n",
        "pipeline/unused.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = loaded_modules("pipeline.stage.command", root=tmp_path)
    assert got == {"pipeline.stage", "pipeline.stage.command", "pipeline.stage.core", "pipeline.stage.helpers",
                   "pipeline.engines", "pipeline.engines.fake", "pipeline.errors"}


def test_a_registry_folder_named_by_string_loads_every_module_in_it(tmp_path):
    files = {
        "pipeline/__init__.py": "",
        "pipeline/stage/__init__.py": "",
        "pipeline/stage/core.py": "DETECTORS = Registry('flag detector', package='pipeline.stage.detectors')\n",
        "pipeline/stage/detectors/__init__.py": "",
        "pipeline/stage/detectors/one.py": "from pipeline.errors import PassbandError\n",
        "pipeline/stage/detectors/two.py": "",
        "pipeline/errors.py": "class PassbandError(Exception): ...\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert loaded_modules("pipeline.stage.core", root=tmp_path) == {
        "pipeline.stage", "pipeline.stage.core", "pipeline.stage.detectors", "pipeline.stage.detectors.one",
        "pipeline.stage.detectors.two", "pipeline.errors"}


def test_the_cover_check_sees_a_missing_dep():
    assert covered("pipeline/verify/grader.py", ["pipeline/verify"])
    assert not covered("pipeline/verify_more.py", ["pipeline/verify"])
    assert "pipeline/bands.py" in needed_files("pipeline.commands.annotate")
    assert "schemas/difficulty.yaml" in needed_files("pipeline.commands.annotate")


# --- a band edge edit re-runs annotate ------------------------------------------------------------

def _copy_tracked_tree(dest: Path) -> None:
    """The working tree's git-tracked files outside data/ (what `dvc status` hashes), in a fresh git repo."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if rel.startswith("data/") or not src.is_file():  # not there: deleted in the working tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # DVC wants an SCM root


def _changed_deps(root: Path, stage: str) -> dict[str, str]:
    dvc = Path(sys.executable).with_name("dvc")
    out = subprocess.run([str(dvc), "status", "--json", stage], cwd=root, capture_output=True, text=True, check=True)
    entries = json.loads(out.stdout or "{}").get(stage, [])
    return {k: v for e in entries if isinstance(e, dict) for k, v in e.get("changed deps", {}).items()}


_REFRESH = """
import sys
from dvc.repo import Repo
with Repo(".") as repo:
    (stage,) = repo.stage.collect("dvc.yaml:" + sys.argv[1])
    stage.save_deps(allow_missing=True)
    stage.dump(update_pipeline=False)
"""


def _refresh_lock(root: Path, stage: str) -> None:
    """Record ``stage``'s deps as they are now in root's dvc.lock (DVC's own hashing; missing data stays missing).

    In a child process whose working directory is ``root``: DVC resolves a stage target from the working
    directory, and this must never touch the real repository's lock.
    """
    subprocess.run([sys.executable, "-c", _REFRESH, stage], cwd=root, check=True, capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["annotate", "annotate_reformulated"])
def test_editing_a_band_edge_shows_annotate_changed(tmp_path, stage):
    """``dvc status`` in a copy of the tracked tree, after one band edge of pipeline/bands.py moves.

    The copy's dvc.lock is the real one with this stage's deps recorded afresh by DVC (the real lock is
    refreshed by a full run, not by tests), so the edit is the only code change DVC can see.
    """
    assert "pipeline/bands.py" in stages()[stage][1], f"{stage}'s deps in dvc.yaml do not list pipeline/bands.py"
    real_lock = (REPO / "dvc.lock").read_bytes()
    _copy_tracked_tree(tmp_path)
    _refresh_lock(tmp_path, stage)
    assert "pipeline/bands.py" not in _changed_deps(tmp_path, stage)
    bands = tmp_path / "pipeline" / "bands.py"
    text, n = re.subn(r'("learnable_min":\s*)0\.2\b', r"\g<1>0.25", bands.read_text(encoding="utf-8"), count=1)
    assert n == 1, "the learnable_min default edge moved out of pipeline/bands.py: point this test at its new home"
    bands.write_text(text, encoding="utf-8")
    assert _changed_deps(tmp_path, stage).get("pipeline/bands.py") == "modified"
    assert (REPO / "dvc.lock").read_bytes() == real_lock


# --- python tests/test_dvc_deps.py: the smallest grouped deps per stage ---------------------------

def grouped(files: Iterable[str]) -> list[str]:
    """``files`` with a folder in place of its files where the stage needs at least half of the folder.

    Never ``pipeline`` itself: it holds every stage, and a dep on it would re-run each stage for any edit.
    """
    files = set(files)
    out = set(files)
    parents = {p.as_posix() for f in files for p in Path(f).parents}
    folders = sorted(parents - {".", ROOT_PACKAGE}, key=lambda s: s.count("/"))
    for folder in folders:
        if covered(folder, out):
            continue
        inside = {p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts}
        if len(inside & files) * 2 >= len(inside):
            out = {f for f in out if not f.startswith(folder + "/")} | {folder}
    return sorted(f for f in out if not any(f.startswith(d + "/") for d in out))  # inside a folder listed whole


def code_deps(module: str) -> list[str]:
    """The grouped code deps of a stage that runs ``module``: folders, then files, then schemas."""
    return sorted(grouped(needed_files(module)), key=lambda f: (f.startswith("schemas"), Path(f).suffix != "", f))


def _flow(items: list[str], n_code: int, width: int = 118) -> list[str]:
    """``    deps: [a, b, ...]`` wrapped at ``width``, the data deps from a line of their own."""
    head = "    deps: ["
    lines, line = [], head
    for i, item in enumerate(items):
        text = (f'"{item}"' if re.search(r"[${}\[\],:#]", item) else item) + ("]" if i == len(items) - 1 else ",")
        if (i == n_code or len(line) + 1 + len(text) > width) and line != head:
            lines.append(line)
            line = " " * len(head) + text
        else:
            line += ("" if line == head else " ") + text
    return [*lines, line]


def rewrite(dvc_file: Path) -> str:
    """``dvc_file`` with each stage's code deps replaced by :func:`code_deps` (data deps and comments kept)."""
    from pipeline.cli import COMMANDS

    prefix = "../" * (len(dvc_file.relative_to(REPO).parts) - 1)
    text = dvc_file.read_text(encoding="utf-8")
    declared = yaml.safe_load(text)["stages"]
    lines, out, i, stage = text.split("\n"), [], 0, None
    while i < len(lines):
        if m := re.match(r"  (\w+):\s*$", lines[i]):
            stage = m.group(1)
        if not lines[i].startswith("    deps:"):
            out.append(lines[i])
            i += 1
            continue
        region, i = [lines[i]], i + 1
        if region[0].strip() == "deps:":  # block style
            while i < len(lines) and lines[i].startswith("      "):
                region.append(lines[i])
                i += 1
        else:  # flow style, maybe over several lines
            while "".join(region).count("[") > "".join(region).count("]"):
                region.append(lines[i])
                i += 1
        deps = yaml.safe_load("\n".join(r[4:] for r in region))["deps"]
        body = declared[stage].get("do", declared[stage])
        if SCRIPT.match(body["cmd"].strip()) or PINNED.match(body["cmd"].strip()):  # their deps stay as written
            out += region
            continue
        if m := PACKAGE.match(body["cmd"].strip()):  # the experiment's own package, in the dvc file's folder
            package = (dvc_file.parent / m.group(1)).relative_to(REPO).as_posix()
            code = [os.path.relpath(REPO / f, dvc_file.parent) for f in code_deps(package)]
        else:
            code = [prefix + f for f in code_deps(COMMANDS[body["cmd"].split()[1]].split(":")[0])]
        data = [d for d in deps if not d.removeprefix(prefix).startswith(("pipeline/", "schemas")) and d not in code]
        out += ["    " + r.strip() for r in region[1:] if r.strip().startswith("#")]
        out += _flow(code + data, len(code))
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:  # rewrite both dvc.yaml files' code deps
        for rel in DVC_FILES:
            (REPO / rel).write_text(rewrite(REPO / rel), encoding="utf-8")
    elif sys.argv[1:] == ["--check"]:
        if stale := [rel for rel in DVC_FILES if rewrite(REPO / rel) != (REPO / rel).read_text(encoding="utf-8")]:
            print(f"code deps out of date in {', '.join(stale)} (run: python tests/test_dvc_deps.py --write)",
                  file=sys.stderr)
            sys.exit(1)
    else:
        for address, (module, _) in stages().items():
            print(f"{address} ({module}):")
            print("".join(f"  - {f}\n" for f in code_deps(module)), end="")
