"""The tests are where a reader looks for them (docs/operations.md, "Where the tests are").

A test file is ``tests/test_<prefix>.py`` or ``tests/test_<prefix>_<topic>.py``, its prefix the pipeline/ package
or module it tests, or one of the cross-cutting prefixes below; helpers and generators live in tests/support/, so
tests/ holds no other Python file than conftest.py.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
PIPELINE = TESTS.parent / "pipeline"

# Tests of no single pipeline/ part: what they check spans the project, or lives outside pipeline/.
CROSS_CUTTING = {
    "band_value": "the band-value experiment (experiments/band_value), a consumer of passband",
    "comments": "comments, docstrings and doc pages of the whole repository",
    "dvc": "dvc.yaml's stages: their deps, params and outputs, and `dvc repro` on a fresh clone",
    "faults": "kills, full disks and damaged inputs on every stage",
    "foundation": "the shared basics together: schemas, config, keys, atomic I/O, the CLI",
    "hostile": "hostile and careless input at every stage's inputs and outputs",
    "install": "what `pip install .` gives, with and without the extras",
    "layers": "the import layers of pipeline/ (pyproject.toml's import-linter contracts)",
    "public_api": "the names pipeline's modules publish to their consumers",
    "replay": "the whole job end to end against a replayed OpenAI-compatible server",
    "setup": ".ci/setup's targets",
    "suite": "the test suite itself: its lanes, its clocks, its layout",
}


def prefixes() -> set[str]:
    """pipeline/'s packages and public modules, and the cross-cutting prefixes."""
    parts = {p.name for p in PIPELINE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    parts |= {p.stem for p in PIPELINE.glob("*.py") if not p.name.startswith("_")}
    return parts | set(CROSS_CUTTING)


def misnamed(names: list[str], allowed: set[str]) -> list[str]:
    """The test files among ``names`` whose name starts with no allowed prefix followed by ``_`` or the end."""
    out = []
    for name in names:
        stem = name.removeprefix("test_").removesuffix(".py")
        if not any(stem == p or stem.startswith(p + "_") for p in allowed):
            out.append(name)
    return out


def test_every_test_file_is_named_after_what_it_tests():
    allowed = prefixes()
    assert {"annotate", "verify", "pass_rate_stats", "config"} <= allowed  # read from pipeline/, not listed here
    files = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert len(files) > 50
    assert misnamed(files, allowed) == [], (
        "name each test file test_<package or module of pipeline/>_<topic>.py, or add an explained cross-cutting "
        "prefix to CROSS_CUTTING")


def test_the_prefix_rule_refuses_a_file_named_after_nothing():
    allowed = prefixes()
    assert misnamed(["test_verify_extract.py", "test_verify.py", "test_suite_layout.py"], allowed) == []
    # a prefix must end at an underscore: "verifyx" is no part of pipeline/, "engine" is not "engines"
    assert misnamed(["test_verifyx.py", "test_engine_logs.py", "test_misc.py"], allowed) == [
        "test_verifyx.py", "test_engine_logs.py", "test_misc.py"]


def test_tests_holds_only_test_files_and_conftest():
    others = sorted(p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
    assert others == [], f"helpers and generators go in tests/support/: {others}"
    assert (TESTS / "support").is_dir() and any((TESTS / "support").glob("*.py"))
