"""What ``pip install .`` gives: every command without the optional extras (the one that needs an extra says which,
in one line), and the run-time data inside the package, so an installed wheel (no tests/, no experiments/) has it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

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


def test_the_package_folder_alone_holds_what_it_reads_at_run_time(tmp_path):
    """The wheel's content (git's files under pipeline/, schemas/ as pipeline/schemas: pyproject's force-include),
    without the checkout around it: the labelled flag set, the prompts and the schemas load from inside it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", "pipeline", "schemas"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if not (REPO / rel).is_file():  # deleted in the working tree
            continue
        dest = tmp_path / "site" / (rel.replace("schemas/", "pipeline/schemas/", 1) if rel.startswith("schemas/") else rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    code = textwrap.dedent("""
        import json, pipeline
        from pipeline.annotate.quality import LABELLED_SET, load_labels
        from pipeline.rollout.prompts import PROMPTS_DIR
        from pipeline.schema import schema
        print(json.dumps({"package": pipeline.__file__, "labels": str(LABELLED_SET), "rows": len(load_labels()),
                          "prompts": str(PROMPTS_DIR), "flags": len(schema("flags").arrow)}))
    """)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    site = str(tmp_path / "site")
    assert out["package"].startswith(site), out
    assert out["labels"].startswith(site) and out["prompts"].startswith(site), out
    assert out["rows"] > 100 and out["flags"] > 0
