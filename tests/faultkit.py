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

REPO = Path(__file__).resolve().parent.parent

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
    Path(cmd["stderr"] + ".replaces").write_text(str(n[0]))
    os._exit(code)


def _host() -> None:
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for module in ("matplotlib.pyplot", "pipeline.cli", "pipeline.ingest.command", "pipeline.rollout.command",
                   "pipeline.verify.command", "pipeline.annotate.command", "pipeline.reformulate.command",
                   "pipeline.publish.command",
                   "pipeline.catalog_command", "pipeline.ingest", "pipeline.rollout", "pipeline.verify",
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


# --- the experiments (shared by tests/test_faults.py and benchmarks/faults.py) -------------------

@dataclass
class Tally:
    """One row of the benchmark's table: a stage and a fault kind."""

    stage: str
    fault: str
    injected: int = 0          # faults that actually hit a run (a kill that came after the end does not count)
    survived: int = 0          # re-run (or the clean error + re-run) ended equal to the uninterrupted run
    rows_lost: int = 0         # reference rows missing after the re-run
    partial_reads: int = 0     # reads that failed or saw half a write / a half-written file visible to readers
    redone: int = 0            # finished shards a keyed stage rewrote on re-run (target 0)
    notes: list[str] = None

    def __post_init__(self):
        self.notes = self.notes or []


def temps_left(root: Path, stage: str) -> list[Path]:
    out = []
    for p in output_paths(root, stage):
        base = p if p.is_dir() else p.parent
        if base.is_dir():
            out += [f for f in base.rglob(".*") if f.name.endswith(".tmp") or ".tmp-" in f.name]
    return out


def sigkill(host: StageHost, ref: Path, work: Path, stage: str, *, points: int, seed: int, seconds: float | None,
            reference: dict, tally: Tally) -> Tally:
    """``points`` SIGKILLs of ``stage`` at seeded random points (half by time, half at a seeded write), each re-run."""
    import random

    rng = random.Random(f"{seed}:{stage}")
    copy_repo(ref, work)
    remove_outputs(work, stage)
    clean = host.run(work, stage)  # an uninterrupted run: how long it takes, how many files it makes visible
    writes = max(clean.replaces or 1, 1)
    seconds = seconds or clean.seconds
    for i in range(points):
        copy_repo(ref, work)
        todo = writes
        if stage in KEYED:  # a keyed stage resumes: start with some of its shards there, as after an earlier kill
            removed = 0
            for j, shard in enumerate(sorted(output_paths(work, stage)[0].glob("*.parquet"))):
                if rng.random() < 0.7 or j == 0:
                    shard.unlink()
                    removed += 1
            todo = min(writes, removed + 2)  # the missing shards (verify: one), its policies row, its metrics
        else:
            remove_outputs(work, stage)
        if i % 2 == 0:
            res = host.run(work, stage, kill_after_s=rng.uniform(0.0, seconds))
        else:
            res = host.run(work, stage, kill_at_replace=rng.randint(1, todo), kill_phase=rng.choice(["before", "after"]))
        if not res.killed:
            if res.rc != 0:
                tally.notes.append(f"{stage}: a run failed without a kill: {res.stderr.strip()[-300:]}")
            continue
        tally.injected += 1
        damage = visible_damage(work, stage)
        tally.partial_reads += len(damage)
        tally.notes += [f"{stage}: visible after kill: {d}" for d in damage]
        before = shard_stamps(work, stage) if stage in KEYED else {}
        again = host.run(work, stage)
        got = snapshot(work, stage) if again.rc == 0 else {}
        if again.rc != 0:
            tally.notes.append(f"{stage}: re-run failed: {again.stderr.strip()[-300:]}")
        tally.rows_lost += lost_rows(reference, got)
        after = shard_stamps(work, stage) if stage in KEYED else {}
        tally.redone += sum(1 for f, st in before.items() if after.get(f) != st)
        left = temps_left(work, stage)
        if left:
            tally.notes.append(f"{stage}: temp files left after the re-run: {[str(p) for p in left]}")
        if again.rc == 0 and got == reference and not left:
            tally.survived += 1
    return tally


def full_disk(host: StageHost, ref: Path, work: Path, stage: str, *, reference: dict, tally: Tally,
              limit: int = 256) -> Tally:
    """A write that fails for lack of space: one line, nothing partial, the previous outputs intact; then a re-run."""
    copy_repo(ref, work)
    if stage in KEYED:  # leave work to do
        for shard in sorted(output_paths(work, stage)[0].glob("*.parquet"))[::2]:
            shard.unlink()
    before = snapshot(work, stage)
    res = host.run(work, stage, fsize_limit=limit)
    tally.injected += 1
    lines = res.error_lines
    one_line = res.rc == 1 and len(lines) == 1 and lines[0].startswith("Error: no space left")
    if not one_line:
        tally.notes.append(f"{stage}: full disk gave rc={res.rc}: {res.stderr.strip()[-400:]}")
    damage = visible_damage(work, stage)
    tally.partial_reads += len(damage)
    intact = snapshot(work, stage) == before
    if not intact:
        tally.notes.append(f"{stage}: the previous outputs changed under a full disk")
    left = temps_left(work, stage)
    if left:
        tally.notes.append(f"{stage}: temp files left by the failed write: {[str(p) for p in left]}")
    again = host.run(work, stage)
    got = snapshot(work, stage) if again.rc == 0 else {}
    tally.rows_lost += lost_rows(reference, got)
    if one_line and intact and not damage and not left and got == reference:
        tally.survived += 1
    return tally


# input table a stage reads -> (set, table) it is damaged in
DAMAGE_TARGET = {"rollout": ("main", "problems"), "verify": ("main", "rollouts"), "annotate": ("main", "verdicts"),
                 "reformulate": ("main", "difficulty"), "publish": ("main", "difficulty"),
                 "catalog": ("main", "rollouts")}
DAMAGES = ("truncated", "zero_bytes", "wrong_schema", "other_table")


def damage_shard(root: Path, set_name: str, table: str, how: str) -> Path:
    """Damage the first shard of a table in one of the ways a disk, a copy or a person does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.io import shard_paths
    from pipeline.tablesets import table_set

    params = _params(root)
    shard = shard_paths(table_set(params, set_name).dir(table, root))[0]
    data = shard.read_bytes()
    if how == "truncated":
        shard.write_bytes(data[: len(data) // 2])
    elif how == "zero_bytes":
        shard.write_bytes(b"")
    elif how == "wrong_schema":
        t = pq.read_table(shard)
        pq.write_table(t.drop_columns([t.column_names[-1]]).append_column("surprise", pa.array([1] * t.num_rows)), shard)
    elif how == "other_table":
        other = "rejects" if table != "rejects" else "problems"
        src = shard_paths(table_set(params, "main").dir(other, root)) or shard_paths(
            table_set(params, "reformulated").dir(other, root))
        shutil.copy(src[0], shard.parent / "copied-in.parquet")
        return shard.parent / "copied-in.parquet"
    return shard


def damaged_input(host: StageHost, ref: Path, work: Path, stage: str, how: str, *, references: dict[str, dict] | None,
                  tally: Tally) -> Tally:
    """A damaged input shard: the stage stops with one line naming it and the fix; doctor --repair, re-runs: equal."""
    copy_repo(ref, work)
    set_name, table = DAMAGE_TARGET[stage]
    shard = damage_shard(work, set_name, table, how)
    remove_outputs(work, stage)
    res = host.run(work, stage)
    tally.injected += 1
    lines = res.error_lines
    rel = shard.name
    ok = res.rc == 1 and len(lines) == 1 and rel in lines[0] and "passband doctor --repair" in lines[0]
    if not ok:
        tally.notes.append(f"{stage}/{how}: rc={res.rc}: {res.stderr.strip()[-400:]}")
        return tally
    if references is None:  # the error only
        tally.survived += 1
        return tally
    repaired = recover(host, work)
    got = {st: snapshot(work, st) for st in references}
    tally.rows_lost += sum(lost_rows(references[st], got[st]) for st in references)
    if repaired and got == references:
        tally.survived += 1
    else:
        tally.notes.append(f"{stage}/{how}: doctor --repair and the re-run did not give the reference tables back")
    return tally


def recover(host: StageHost, work: Path) -> bool:
    """``passband doctor --repair``, then every stage in order (what `dvc repro` runs): True if doctor is clean after."""
    from click.testing import CliRunner

    from pipeline.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["doctor", "--repair", "--params", str(work / "params.yaml")])
    if res.exit_code != 0:
        return False
    for stage in ORDER:
        if host.run(work, stage).rc != 0:
            return False
    return runner.invoke(cli, ["doctor", "--params", str(work / "params.yaml")]).exit_code == 0


# --- concurrent use ---------------------------------------------------------------------------------

# stage -> the SQL a reader runs while it writes: rows, distinct keys (equal unless two versions interleave)
READ_SQL = {
    "ingest": "SELECT count(*), count(DISTINCT problem_id) FROM problems",
    "rollout": "SELECT count(*), count(DISTINCT (problem_id, policy_id, sample_idx)) FROM rollouts",
    "verify": "SELECT count(*), count(DISTINCT (problem_id, policy_id, sample_idx, verifier_id)) FROM verdicts",
    "annotate": "SELECT count(*), count(DISTINCT (problem_id, policy_id, verifier_id)) FROM difficulty",
    "reformulate": "SELECT count(*), count(DISTINCT problem_id) FROM problems",
    "publish": "SELECT count(*), count(DISTINCT problem_id) FROM read_parquet('data/published/data/default/*.parquet')",
    "catalog": None,  # read through the catalog file itself
}


def read_once(root: Path, stage: str, *, raw: bool = False) -> tuple[int, int]:
    """One reader's read, as `passband sql` (or `duckdb data/passband.duckdb` for the catalog) does it.

    ``raw``: DuckDB straight on the stage's shard glob, no retry (a tighter loop than `passband sql`).
    """
    if stage == "catalog":
        counts = catalog_counts(root)
        if counts is None:
            raise FileNotFoundError("the catalog file is missing")
        return counts["rollouts"], counts["rollouts"]
    if raw:
        import duckdb

        sql = READ_SQL[stage]
        if stage != "publish":
            table = sql.rsplit("FROM ", 1)[1]
            folder = output_paths(root, stage)[0 if stage != "annotate" else 1]
            if not list(folder.glob("*.parquet")):  # an empty table (the keyed stages only ever add shards)
                return 0, 0
            glob = folder / "*.parquet"
            sql = sql.replace(f"FROM {table}", f"FROM read_parquet('{glob}')")
        else:
            sql = sql.replace("'data/", f"'{root}/data/")
        return tuple(int(x) for x in duckdb.connect().execute(sql).fetchone())
    from pipeline.catalog import query

    df = query(_params(root), READ_SQL[stage], root=root)
    return tuple(int(x) for x in df.row(0))


def readers_while_writing(host: StageHost, ref: Path, work: Path, stage: str, *, runs: int, tally: Tally) -> Tally:
    """Readers in a loop while the stage writes ``runs`` times: zero failed reads, zero reads of half a write."""
    import threading

    copy_repo(ref, work)
    expected = {raw: read_once(ref, stage, raw=raw) for raw in (False, True)}
    reads = 0
    for _ in range(runs):
        if stage in KEYED:  # give it work: the reader sees the table grow shard by shard
            for shard in sorted(output_paths(work, stage)[0].glob("*.parquet"))[::2]:
                shard.unlink()
        low = {raw: read_once(work, stage, raw=raw) for raw in (False, True)}
        done: list = []
        writer = threading.Thread(target=lambda d=done: d.append(host.run(work, stage)))
        writer.start()
        tally.injected += 1
        while writer.is_alive() or len(done) == 0:
            reads += 1
            raw = reads % 4 != 0
            try:
                n, distinct = read_once(work, stage, raw=raw)
            except Exception as exc:
                tally.partial_reads += 1
                tally.notes.append(f"{stage}: failed read: {str(exc).splitlines()[0][:200]}")
                continue
            lo, hi = sorted((low[raw][0], expected[raw][0]))
            if n != distinct or not lo <= n <= hi:
                tally.partial_reads += 1
                tally.notes.append(f"{stage}: read {n} rows / {distinct} keys, not between {lo} and {hi}")
        writer.join()
        if done[0].rc != 0:
            tally.notes.append(f"{stage}: writer failed: {done[0].stderr.strip()[-300:]}")
        elif read_once(work, stage) == expected[False]:
            tally.survived += 1
    tally.notes.append(f"{stage}: {reads} reads during {runs} writes")
    return tally


def two_writers(hosts: tuple[StageHost, StageHost], ref: Path, work: Path, stage: str, *, reference: dict,
                tally: Tally, stagger_s: float = 0.05) -> tuple[Tally, str]:
    """Two runs of the same stage at once: the second refuses (the lock) or runs after; never interleaved shards.

    Returns the tally and what happened: "refused" (the second got the lock's one-line error) or "serial".
    """
    import threading

    copy_repo(ref, work)
    remove_outputs(work, stage)
    results: dict[int, RunResult] = {}

    def go(i: int) -> None:
        results[i] = hosts[i].run(work, stage)

    first = threading.Thread(target=go, args=(0,))
    first.start()
    time.sleep(stagger_s)
    go(1)
    first.join()
    tally.injected += 1
    a, b = results[0], results[1]
    outcome = "serial"
    if a.rc == 0 and b.rc == 0:
        pass
    elif {a.rc, b.rc} == {0, 1}:
        loser = a if a.rc == 1 else b
        lines = loser.error_lines
        if len(lines) == 1 and "already running" in lines[0]:
            outcome = "refused"
        else:
            tally.notes.append(f"{stage}: second writer failed without the lock message: {loser.stderr[-300:]}")
    else:
        tally.notes.append(f"{stage}: writers ended {a.rc}/{b.rc}: {a.stderr[-200:]} {b.stderr[-200:]}")
    got = snapshot(work, stage)
    tally.rows_lost += lost_rows(reference, got)
    if got == reference and not visible_damage(work, stage):
        tally.survived += 1
    return tally, outcome
