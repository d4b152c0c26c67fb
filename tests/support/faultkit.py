"""Fault injection for the fault tests and ``benchmarks/faults.py``: a tiny repo, a stage host, faults, checks.

A tiny repository runs the whole pipeline on the fake engine (27 synthetic problems, k=4).
Stages run through the real CLI (``passband <stage>``: locks, one-line errors and all) in
children forked from a *stage host*: a helper process that imports passband once and then
forks one child per run, so a run costs its own work, not Python's start-up, and the child
is forked from a process that never started a thread. Each child leads its own process
group, so a SIGKILL takes its verify workers too, as a kill of the whole job would.

Faults a child can be given: a SIGKILL from outside after ``kill_after_s``; a SIGKILL from
inside right before or after its N-th ``os.replace`` (the moment a shard becomes visible); a
file-size limit (``RLIMIT_FSIZE`` with SIGXFSZ ignored, so every write past it fails with
EFBIG, as a full disk fails with ENOSPC) for full-disk runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PARAMS = {
    "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "split": "train",
                            "options": {"n_per_level": 3, "seed": 0}}]},
    "policies": {"tiny": {"model": "test/m", "revision": "r1", "engine": "fake", "prompt": "fewshot_arith",
                          "sampling": {"temperature": 0.8, "max_tokens": 24}}},
    "rollout": {"policies": ["tiny"], "k": 4, "shard_size": 4, "sources": ["synthetic"],
                "engine_options": {"fake": {"delay_s": 0.002}}},
    "verify": {"workers": 1},
    "reformulate": {"methods": ["fobar", "hint_prefix"]},
    "publish": {"licenses": {"synthetic": "apache-2.0"}},
}

# stage -> CLI arguments and what it writes: ("table", name, set) | ("dir", params.paths key) | ("file", key)
STAGES: dict[str, tuple[list[str], list[tuple[str, ...]]]] = {
    "ingest": (["ingest", "--no-progress"], [("table", "problems", "main"), ("table", "rejects", "main")]),
    "rollout": (["rollout", "--set", "main", "--no-progress"],
                [("table", "rollouts", "main"), ("table", "policies", "main")]),
    "verify": (["verify", "--set", "main", "--no-progress"], [("table", "verdicts", "main")]),
    "annotate": (["annotate", "--set", "main", "--no-progress"],
                 [("table", "flags", "main"), ("table", "difficulty", "main"), ("dir", "plots")]),
    "reformulate": (["reformulate", "--no-progress"],
                    [("table", "problems", "reformulated"), ("table", "rejects", "reformulated")]),
    "rollout_reformulated": (["rollout", "--set", "reformulated", "--no-progress"],
                             [("table", "rollouts", "reformulated"), ("table", "policies", "reformulated")]),
    "verify_reformulated": (["verify", "--set", "reformulated", "--no-progress"],
                            [("table", "verdicts", "reformulated")]),
    "annotate_reformulated": (["annotate", "--set", "reformulated", "--no-plots", "--no-progress"],
                              [("table", "flags", "reformulated"), ("table", "difficulty", "reformulated")]),
    "catalog": (["catalog"], [("file", "catalog")]),
    "publish": (["publish"], [("dir", "published")]),
}
ORDER = list(STAGES)
FAULT_STAGES = ["ingest", "rollout", "verify", "annotate", "reformulate", "publish", "catalog"]
KEYED = {"rollout", "verify"}  # keyed, incremental stages: a re-run must not redo finished shards


def make_repo(root: Path) -> Path:
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    return root


def _params(root: Path):
    from pipeline.config import load_params

    return load_params(root / "params.yaml")


def output_paths(root: Path, stage: str) -> list[Path]:
    from pipeline.tablesets import table_set

    params = _params(root)
    out = []
    for spec in STAGES[stage][1]:
        if spec[0] == "table":
            out.append(table_set(params, spec[2]).dir(spec[1], root))
        else:
            out.append(root / getattr(params.paths, spec[1]))
    return out


def remove_outputs(root: Path, stage: str) -> None:
    """What a first run of the stage starts from (DVC removes non-persistent outputs before a run)."""
    for p in output_paths(root, stage):
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


# --- comparing outputs ------------------------------------------------------------------------

def snapshot(root: Path, stage: str) -> dict[str, object]:
    """The stage's outputs as comparable values: tables sorted by key, files by content (parquet as rows)."""
    import pyarrow.parquet as pq

    from pipeline.io import read_table
    from pipeline.schema import schema
    from pipeline.tablesets import table_set

    params = _params(root)
    snap: dict[str, object] = {}
    for spec in STAGES[stage][1]:
        if spec[0] == "table":
            _, name, set_name = spec
            t = read_table(table_set(params, set_name).dir(name, root), name=name)
            key = list(schema(name).key)
            snap[f"{set_name}/{name}"] = t.sort_by([(k, "ascending") for k in key]).to_pylist()
        elif spec[0] == "file":  # the catalog: every view's rows, counted, read through the file itself
            snap["catalog"] = catalog_counts(root)
        else:
            base = root / getattr(params.paths, spec[1])
            for f in sorted(p for p in base.rglob("*") if p.is_file()):
                rel = str(f.relative_to(root))
                if f.suffix == ".parquet":
                    snap[rel] = pq.read_table(f).to_pylist()
                elif f.suffix != ".png":  # PNG bytes carry nothing the CSVs beside them do not
                    snap[rel] = f.read_bytes()
    return snap


def catalog_counts(root: Path) -> dict[str, int] | None:
    import duckdb

    path = root / _params(root).paths.catalog
    if not path.exists():
        return None
    cwd = os.getcwd()
    os.chdir(root)  # the catalog's views are relative to the repository root
    try:
        con = duckdb.connect(str(path), read_only=True)
        names = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        counts = {n: con.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in sorted(names)}
        con.close()
        return counts
    finally:
        os.chdir(cwd)


def rows_of(snap: dict[str, object]) -> int:
    return sum(len(v) for v in snap.values() if isinstance(v, list))


def lost_rows(reference: dict[str, object], got: dict[str, object]) -> int:
    """Rows of the reference missing from ``got`` (or whole files missing / different, counted as one row)."""
    lost = 0
    for k, ref in reference.items():
        have = got.get(k)
        if isinstance(ref, list):
            have_set = {json.dumps(r, sort_keys=True, default=str) for r in (have or [])}
            lost += sum(1 for r in ref if json.dumps(r, sort_keys=True, default=str) not in have_set)
        elif have != ref:
            lost += 1
    return lost


def visible_damage(root: Path, stage: str) -> list[str]:
    """What a reader could see that is not whole: a shard, catalog or published folder that does not read."""
    import pyarrow.parquet as pq

    from pipeline.errors import PassbandError
    from pipeline.io import read_shard, shard_paths

    bad = []
    for spec, path in zip(STAGES[stage][1], output_paths(root, stage), strict=True):
        if spec[0] == "table":
            for shard in shard_paths(path):
                try:
                    read_shard(shard, name=spec[1])
                except (PassbandError, OSError) as exc:
                    bad.append(f"{shard}: {exc}")
        elif spec[0] == "file":
            try:
                catalog_counts(root)
            except Exception as exc:
                bad.append(f"{path}: {exc}")
        elif path.exists():
            for f in path.rglob("*.parquet"):
                try:
                    pq.read_table(f)
                except Exception as exc:
                    bad.append(f"{f}: {exc}")
            if spec[1] == "published" and not (path / "build.json").exists():
                bad.append(f"{path}: a published folder without build.json (half written)")
    return bad


def shard_stamps(root: Path, stage: str) -> dict[Path, tuple[int, int]]:
    """(inode, mtime) of every file the stage wrote: a re-run that rewrites a finished shard changes it."""
    out = {}
    for p in output_paths(root, stage)[:1]:  # the keyed table (rollout rewrites its one policies row each run)
        files = [p] if p.is_file() else (sorted(p.glob("*.parquet")) if p.is_dir() else [])
        for f in files:
            st = f.stat()
            out[f] = (st.st_ino, st.st_mtime_ns)
    return out


# --- the stage host -----------------------------------------------------------------------------

@dataclass
class RunResult:
    rc: int | None  # None: killed
    stderr: str
    seconds: float
    replaces: int | None = None  # files the run made visible (os.replace calls), when it was not killed

    @property
    def killed(self) -> bool:
        return self.rc is None

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


class StageHost:
    """A process that has imported passband and forks one child per stage run (see the module docstring)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "host"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self.proc.stdout.readline()
        if ready.strip() != "ready":
            raise RuntimeError(f"stage host did not start: {ready!r}")

    def run(self, root: Path, stage: str, *, kill_after_s: float | None = None, kill_at_replace: int | None = None,
            kill_phase: str = "before", fsize_limit: int | None = None, umask: int | None = None) -> RunResult:
        """Run one stage; kill it after ``kill_after_s`` (from outside) or at its N-th ``os.replace`` (from inside)."""
        err = Path(tempfile.gettempdir()) / f"passband-faultkit-{os.getpid()}-{id(self)}.stderr"  # off a full disk
        cmd = {"root": str(root), "args": STAGES[stage][0], "stderr": str(err), "kill_at_replace": kill_at_replace,
               "kill_phase": kill_phase, "fsize_limit": fsize_limit, "umask": umask}
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        pid = int(self.proc.stdout.readline())
        if kill_after_s is not None:
            self._kill_later(pid, kill_after_s)
        status = json.loads(self.proc.stdout.readline())
        stderr = err.read_text() if err.exists() else ""
        err.unlink(missing_ok=True)
        count = Path(f"{err}.replaces")
        replaces = int(count.read_text()) if count.exists() else None
        count.unlink(missing_ok=True)
        Path(f"{count}.tmp").unlink(missing_ok=True)
        return RunResult(None if status["signal"] == signal.SIGKILL else status["rc"], stderr,
                         time.perf_counter() - t0, replaces)

    @staticmethod
    def _kill_later(pid: int, delay: float) -> None:
        import threading

        def kill():
            time.sleep(delay)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()

    def __enter__(self) -> StageHost:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _child(cmd: dict) -> None:
    """In the forked child: set the faults up, run ``passband <args>`` from the repo root, exit with its code."""
    import resource

    os.setpgid(0, 0)
    fd = os.open(cmd["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    if cmd.get("umask") is not None:
        os.umask(cmd["umask"])
    if cmd["fsize_limit"] is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cmd["fsize_limit"], cmd["fsize_limit"]))
    real, n, phase, at = os.replace, [0], cmd["kill_phase"], cmd["kill_at_replace"]

    def replace(src, dst, *a, **kw):  # counts the writes made visible; kills at the chosen one
        n[0] += 1
        if n[0] == at and phase == "before":
            os.killpg(0, signal.SIGKILL)
        real(src, dst, *a, **kw)
        if n[0] == at and phase == "after":
            os.killpg(0, signal.SIGKILL)

    os.replace = replace
    from pipeline.cli import cli

    root = Path(cmd["root"])
    os.chdir(root)
    code = 0
    try:
        cli.main(args=[*cmd["args"], "--params", str(root / "params.yaml")], prog_name="passband")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 2
    sys.stderr.flush()
    # whole or absent: a kill from outside may land while this is written, after the stage finished
    Path(cmd["stderr"] + ".replaces.tmp").write_text(str(n[0]))
    real(cmd["stderr"] + ".replaces.tmp", cmd["stderr"] + ".replaces")
    os._exit(code)


def _host() -> None:
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for module in ("matplotlib.pyplot", "pipeline.cli", "pipeline.commands.ingest", "pipeline.commands.rollout",
                   "pipeline.commands.verify", "pipeline.commands.annotate", "pipeline.commands.reformulate",
                   "pipeline.commands.publish",
                   "pipeline.commands.catalog", "pipeline.ingest", "pipeline.rollout", "pipeline.verify",
                   "pipeline.annotate", "pipeline.reformulate", "pipeline.publish", "pipeline.catalog"):
        importlib.import_module(module)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(cmd)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        print(json.dumps({"rc": rc, "signal": sig}), flush=True)


def build(host: StageHost, root: Path, *, upto: str | None = None, umask: int | None = None) -> dict[str, float]:
    """Run the whole pipeline (or up to and including ``upto``) in ``root``; seconds per stage."""
    make_repo(root)
    seconds = {}
    for stage in ORDER:
        res = host.run(root, stage, umask=umask)
        if res.rc != 0:
            raise RuntimeError(f"{stage} failed in the reference build: {res.stderr}")
        seconds[stage] = res.seconds
        if stage == upto:
            break
    return seconds


def copy_repo(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".passband"))
    return dst


if __name__ == "__main__" and sys.argv[1:] == ["host"]:
    _host()


if __name__ == "__main__" and sys.argv[1:] == ["host"]:
    _host()
