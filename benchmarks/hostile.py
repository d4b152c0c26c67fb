"""Hostile and careless input, as a table: each case's time, peak memory, outcome, and what it touched.

    .venv/bin/python benchmarks/hostile.py                 # every case (about 3 minutes on 2 cores)
    .venv/bin/python benchmarks/hostile.py --quick         # leave out the two big-input cases (200 MB line, 300k rows)
    .venv/bin/python benchmarks/hostile.py --only sql_      # the cases whose name starts so
    .venv/bin/python benchmarks/hostile.py --json out.json # also the rows as JSON

A tiny repository (tests/support/faultkit.py: 27 synthetic problems, k=4, the fake engine) is built once
through the real CLI. Each case then runs in a fresh copy of it, as a user would: ``passband
<command>`` or a plain Python script (no ``if __name__ == "__main__"`` guard) in a child process,
measured by the child's CPU seconds (user + system, from ``wait4``) and peak RSS (its VmHWM). Its
time bound is on the CPU seconds, which other work on the machine does not stretch; the wall clock
(also printed) is only a kill switch, far past the bound. A case passes when its outcome is the
expected one (a one-line error, or a bounded, recorded status), nothing outside passband's own
outputs changed (the files a case plants are hashed before and after), and it stayed within its
CPU time and memory bounds.

The table in docs/faults.md ("Hostile input") is this script's output.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "benchmarks"))

from peak import hwm_kib  # noqa: E402

PASSBAND = str(Path(sys.executable).with_name("passband"))
BUILD_STAGES = ["ingest", "rollout", "verify", "annotate", "catalog"]


@dataclass
class Run:
    rc: int | None  # None: killed at the hard limit
    seconds: float  # wall clock
    cpu_s: float  # the child's user + system seconds, and those of the children it waited for
    peak_mib: float
    stdout: str
    stderr: str

    @property
    def error_line(self) -> str:
        """The last non-empty line of stderr (what the user reads)."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""

    @property
    def one_line_error(self) -> bool:
        """Exit 1 with an ``Error: ...`` line and no traceback."""
        return self.rc not in (0, None) and "Traceback" not in self.stderr and self.error_line.startswith("Error:")


@dataclass
class Result:
    case: str
    what: str
    bound_s: float
    bound_mib: float
    seconds: float = 0.0  # wall clock: reported, not bounded
    cpu_s: float = 0.0
    peak_mib: float = 0.0
    outcome: str = ""
    untouched: bool = True
    expected: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.expected and self.untouched and self.cpu_s <= self.bound_s and self.peak_mib <= self.bound_mib

    def measure(self, *runs: Run) -> None:
        """The runs' seconds (CPU and wall) added up, and the highest peak."""
        self.seconds, self.cpu_s = sum(r.seconds for r in runs), sum(r.cpu_s for r in runs)
        self.peak_mib = max(r.peak_mib for r in runs)


def run(argv: list[str], cwd: Path, *, limit_s: float, env: dict | None = None) -> Run:
    """Run ``argv`` in ``cwd``; wall time, the child's CPU time and peak RSS, output.

    The peak is the child's own VmHWM, read every 10 ms until it exits (a high-water mark, so the last
    read is its peak up to 10 ms before the end). Not ``wait4``'s ``ru_maxrss``: Linux carries the
    forking parent's high-water mark across ``exec`` into it, so every child looked as big as this
    harness. The CPU seconds are ``wait4``'s: the child's and those of the children it waited for. The
    verify workers a child starts (forked by passband's forkserver, which the child does not wait for) are
    not counted in either: each of their checks has its own CPU bound (tests/test_verify_pool.py).
    ``limit_s`` is the kill switch, on the wall clock.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True)
        rc: int | None = None
        peak_kib = 0
        while True:
            peak_kib = max(peak_kib, hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > limit_s:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                rc = None
                break
            time.sleep(0.01)
        proc.returncode = -1  # reaped by wait4: keep Popen from waiting again
        seconds = time.monotonic() - t0
        with contextlib.suppress(ProcessLookupError):  # anything the child left behind (verify workers)
            os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        return Run(rc, seconds, usage.ru_utime + usage.ru_stime, peak_kib / 1024, out.read().decode(errors="replace"),
                   err.read().decode(errors="replace"))


def cli(root: Path, *args: str, limit_s: float, env: dict | None = None) -> Run:
    return run([PASSBAND, *args], root, limit_s=limit_s, env=env)


def script(root: Path, code: str, *, limit_s: float, env: dict | None = None) -> Run:
    """A plain script, no main guard, run as ``python script.py`` (how a user calls the API)."""
    path = root / "user_script.py"
    path.write_text(textwrap.dedent(code))
    try:
        return run([sys.executable, str(path)], root, limit_s=limit_s,
                   env={"PYTHONPATH": str(REPO), **(env or {})})
    finally:
        path.unlink(missing_ok=True)


def digest(path: Path) -> str:
    """A hash of a file, or of every file (and link) under a folder, with modes."""
    h = hashlib.sha256()
    if path.is_symlink():
        h.update(b"L" + os.readlink(path).encode())
    elif path.is_file():
        h.update(oct(path.stat().st_mode).encode() + path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            if ".passband" in p.relative_to(path).parts:
                continue
            h.update(str(p.relative_to(path)).encode())
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            elif p.is_file():
                h.update(oct(p.stat().st_mode).encode() + p.read_bytes())
    else:
        h.update(b"absent")
    return h.hexdigest()


def set_params(root: Path, edit: Callable[[dict], None]) -> None:
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text())
    edit(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


# --- the cases ---------------------------------------------------------------------------------

CASES: list[tuple[str, str, float, float, Callable]] = []


def case(name: str, what: str, *, bound_s: float = 10.0, bound_mib: float = 600.0):
    def deco(fn):
        CASES.append((name, what, bound_s, bound_mib, fn))
        return fn
    return deco


def _expect_error(res: Result, r: Run, *, must_say: str | None = None) -> None:
    res.measure(r)
    res.outcome = r.error_line[:160] if r.rc else f"exit {r.rc}: {(r.stdout.strip().splitlines() or [''])[-1][:120]}"
    res.expected = r.one_line_error and (must_say is None or must_say.lower() in r.error_line.lower())


# destructive operations


@case("publish_into_user_folder", "paths.published names a user's folder (notes/thesis.txt)")
def _(root: Path, res: Result) -> None:
    (root / "notes").mkdir()
    (root / "notes" / "thesis.txt").write_text("three years of work\n")
    before = digest(root / "notes")
    set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("published", "notes"))
    _expect_error(res, cli(root, "publish", limit_s=60))
    res.untouched = digest(root / "notes") == before


@case("publish_into_repo_root", "paths.published: . (the repository itself)")
def _(root: Path, res: Result) -> None:
    before = {p: digest(root / p) for p in ("params.yaml", "data")}
    set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("published", "."))
    before["params.yaml"] = digest(root / "params.yaml")
    _expect_error(res, cli(root, "publish", limit_s=60))
    res.untouched = all(digest(root / p) == h for p, h in before.items())


@case("ingest_source_in_output_folder", "paths.problems: mydata with the source at mydata/source.parquet")
def _(root: Path, res: Result) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "mydata").mkdir()
    pq.write_table(pa.table({"question": ["What is 2 + 2?", "What is 3 + 5?"], "answer": ["4", "8"]}),
                   root / "mydata" / "source.parquet")
    before = digest(root / "mydata" / "source.parquet")

    def edit(p):
        _user_source("parquet", "mydata/source.parquet")(p)
        p.setdefault("paths", {})["problems"] = "mydata"
    set_params(root, edit)
    r = cli(root, "ingest", limit_s=60)
    res.measure(r)
    res.outcome = r.error_line[:160] if r.rc else "exit 0"
    res.expected = r.rc == 0 or r.one_line_error
    res.untouched = digest(root / "mydata" / "source.parquet") == before


@case("output_path_outside_project", "paths.rollouts: an absolute folder outside the project")
def _(root: Path, res: Result) -> None:
    outside = Path(tempfile.mkdtemp(prefix="passband-outside-"))
    (outside / "keep.txt").write_text("not passband's\n")
    before = digest(outside)
    try:
        set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("rollouts", str(outside)))
        _expect_error(res, cli(root, "rollout", limit_s=60))
        res.untouched = digest(outside) == before
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@case("table_folder_symlink_outside", "data/verdicts is a symlink to a user's folder outside; verify, then doctor --repair")
def _(root: Path, res: Result) -> None:
    outside = Path(tempfile.mkdtemp(prefix="passband-outside-"))
    (outside / "results.parquet").write_bytes(b"PAR1 not a real file")
    before = digest(outside)
    try:
        shutil.rmtree(root / "data" / "verdicts")
        (root / "data" / "verdicts").symlink_to(outside, target_is_directory=True)
        r1 = cli(root, "verify", limit_s=60)
        r2 = cli(root, "doctor", "--repair", limit_s=60)
        res.measure(r1, r2)
        res.outcome = f"verify: {r1.error_line[:80] or 'exit 0'} | doctor: {(r2.error_line or r2.stdout.strip())[-80:]}"
        # verify must refuse (it would write into the user's folder); doctor must not claim a move it did not make
        claimed = "moved 1" in (r2.stdout + r2.stderr) and (outside / "results.parquet").exists()
        res.expected = r1.one_line_error and not claimed
        res.untouched = digest(outside) == before
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@case("lock_file_symlink", "a lock file that is a symlink to a user's 0600 file")
def _(root: Path, res: Result) -> None:
    victim = root.parent / f"{root.name}-secret.txt"
    victim.write_text("private key material\n")
    victim.chmod(0o600)
    before = digest(victim)
    locks = root / ".passband" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "catalog.lock").unlink(missing_ok=True)
    (locks / "catalog.lock").symlink_to(victim)
    _expect_error(res, cli(root, "catalog", limit_s=60))
    res.untouched = digest(victim) == before


@case("timeout_infinite", "verify.timeout_s: .inf")
def _(root: Path, res: Result) -> None:
    set_params(root, lambda p: p.setdefault("verify", {}).__setitem__("timeout_s", float("inf")))
    _expect_error(res, cli(root, "verify", limit_s=60), must_say="timeout_s")


@case("push_public_repo_as_private", "push (private by default) into an existing public Hub repo")
def _(root: Path, res: Result) -> None:
    from hub_server import HubServer, Repo

    if not _published(root, res):
        return
    with HubServer(token="hf_x") as hub:
        hub.repos["alice/open-data"] = Repo("alice/open-data", private=False)
        env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_x", "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(root / ".hf")}
        _expect_error(res, cli(root, "push", "--repo-id", "alice/open-data", limit_s=60, env=env))
        res.untouched = not hub.commits and hub.repos["alice/open-data"].private is False


def _published(root: Path, res: Result) -> bool:
    """``passband publish`` in the case's copy, the first step of the push cases; a failure is the case's outcome."""
    r = cli(root, "publish", limit_s=120)
    if r.rc != 0:
        res.outcome = f"publish failed: {r.error_line}"
    return r.rc == 0


# SQL


def _sql(root: Path, res: Result, query: str, *, guard: Path | None = None) -> None:
    before = digest(guard) if guard else None
    _expect_error(res, cli(root, "sql", query, limit_s=30))
    if guard is not None:
        res.untouched = digest(guard) == before


@case("sql_copy_to_file", "passband sql \"COPY (SELECT 1) TO '/tmp/…csv'\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    target = Path(tempfile.gettempdir()) / f"passband-hostile-{os.getpid()}.csv"
    target.unlink(missing_ok=True)
    _sql(root, res, f"COPY (SELECT 1) TO '{target}'", guard=target)


@case("sql_read_system_file", "passband sql \"SELECT * FROM read_text('/etc/hostname')\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "SELECT * FROM read_text('/etc/hostname')")


@case("sql_attach_and_create", "passband sql \"ATTACH 'x.duckdb' AS x; CREATE TABLE x.t AS SELECT 1\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "ATTACH 'x.duckdb' AS x; CREATE TABLE x.t AS SELECT 1", guard=root / "x.duckdb")


@case("sql_overwrite_shard", "passband sql \"COPY (…) TO 'data/problems/part-0.parquet'\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "COPY (SELECT * FROM problems LIMIT 1) TO 'data/problems/part-0.parquet' (FORMAT parquet)",
         guard=root / "data" / "problems")


@case("sql_install_extension", "passband sql \"INSTALL httpfs\" (no download)", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "INSTALL httpfs")


@case("sql_two_statements", "passband sql \"SELECT 1; SELECT 2\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "SELECT 1; SELECT 2")


@case("sql_read_outside_glob", "passband sql \"SELECT * FROM read_parquet('/tmp/**/*.parquet')\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "SELECT count(*) FROM read_parquet('/tmp/*.parquet')")


@case("sql_set_config", "passband sql \"SET enable_external_access = true\"", bound_s=5)
def _(root: Path, res: Result) -> None:
    _sql(root, res, "SET enable_external_access = true")


def _moved(root: Path, name: str) -> Path:
    dest = root.parent / name
    shutil.move(str(root), dest)
    return dest


@case("folder_with_quote", "the checkout in a folder named o'q: catalog, then sql", bound_s=20)
def _(root: Path, res: Result) -> None:
    work = _moved(root, "o'q")
    try:
        r1 = cli(work, "catalog", limit_s=60)
        r2 = cli(work, "sql", "SELECT count(*) AS n FROM problems", limit_s=60)
        res.measure(r1, r2)
        why = f": {r2.error_line or r1.error_line}" if r1.rc or r2.rc else ""
        res.outcome = f"catalog exit {r1.rc}, sql exit {r2.rc}{why}"
        res.expected = r1.rc == 0 and r2.rc == 0 and "27" in r2.stdout
    finally:
        shutil.move(str(work), root)


@case("folder_with_sql_injection", "a folder named \"x';COPY (SELECT 42) TO 'pwned.csv';SELECT '\"", bound_s=20)
def _(root: Path, res: Result) -> None:
    work = _moved(root, "x';COPY (SELECT 42) TO 'pwned.csv';SELECT '")
    try:
        r1 = cli(work, "catalog", limit_s=60)
        r2 = cli(work, "sql", "SELECT count(*) AS n FROM problems", limit_s=60)
        res.measure(r1, r2)
        pwned = [p for p in (work / "pwned.csv", work.parent / "pwned.csv", Path.cwd() / "pwned.csv") if p.exists()]
        res.outcome = f"catalog exit {r1.rc}, sql exit {r2.rc}; COPY ran: {bool(pwned)}"
        res.expected = r1.rc == 0 and r2.rc == 0 and not pwned
        res.untouched = not pwned
    finally:
        shutil.move(str(work), root)


# model text


def _judge_script(gold: str, completion_expr: str) -> str:
    return f"""
        import time
        from pipeline.verify import judge
        t = time.monotonic()
        j = judge({gold!r}, {completion_expr})
        print(j.status, round(time.monotonic() - t, 3))
    """


def _bounded_status(res: Result, r: Run, allowed: set[str]) -> None:
    res.measure(r)
    status = (r.stdout.split() or ["-"])[0]
    res.outcome = f"status {status}" if r.rc == 0 else f"exit {r.rc}: {r.error_line[:120]}"
    res.expected = r.rc == 0 and status in allowed


@case("judge_commas", "judge on ',' * 40000 (quadratic extractor before)", bound_s=15)
def _(root: Path, res: Result) -> None:
    _bounded_status(res, script(root, _judge_script("1", "',' * 40000"), limit_s=60), {"no_answer", "incorrect"})


@case("judge_number_list", "judge on '1,' * 500000 (1 MB)", bound_s=15)
def _(root: Path, res: Result) -> None:
    _bounded_status(res, script(root, _judge_script("1", "'1,' * 500000"), limit_s=60),
                    {"no_answer", "incorrect", "correct", "timeout", "error"})


@case("judge_tower", "judge on \\boxed{10^{10^{10}}}", bound_s=15)
def _(root: Path, res: Result) -> None:
    _bounded_status(res, script(root, _judge_script("5", "r'The answer is $\\boxed{10^{10^{10}}}$.'"), limit_s=60),
                    {"incorrect", "timeout", "error"})


@case("judge_sqrt_tower", "judge on \\boxed{\\sqrt{4^{10^{10}}}}", bound_s=15)
def _(root: Path, res: Result) -> None:
    _bounded_status(res, script(root, _judge_script("2", "r'So $\\boxed{\\sqrt{4^{10^{10}}}}$.'"), limit_s=60),
                    {"incorrect", "timeout", "error"})


@case("judge_binomial", "judge on \\boxed{\\binom{10^{7}}{5000}} (4300-digit limit before)", bound_s=15)
def _(root: Path, res: Result) -> None:
    _bounded_status(res, script(root, _judge_script("3", "r'So $\\boxed{\\binom{10^{7}}{5000}}$.'"), limit_s=60),
                    {"incorrect", "timeout", "error"})


@case("compute_score_1mb", "verl compute_score on a 1 MB looping completion", bound_s=15)
def _(root: Path, res: Result) -> None:
    r = script(root, """
        from pipeline.rewards import compute_score
        print("score", compute_score("gsm8k", "The answer is 7. " * 60000, "7"))
    """, limit_s=60)
    res.measure(r)
    res.outcome = r.stdout.strip()[-40:] if r.rc == 0 else f"exit {r.rc}: {r.error_line[:120]}"
    res.expected = r.rc == 0 and r.stdout.split()[:1] == ["score"]


def _annotate_with(root: Path, res: Result, completion: str) -> None:
    """Replace one correct rollout's completion (its verdict stays correct), then annotate."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.io import read_shard, read_table, write_table
    rollouts = sorted((root / "data" / "rollouts").glob("*.parquet"))
    verdicts = read_table(root / "data" / "verdicts", name="verdicts")
    correct = verdicts.filter(pc.equal(verdicts["status"], "correct"))
    key = (correct["problem_id"][0].as_py(), correct["sample_idx"][0].as_py())
    for shard in rollouts:
        t = read_shard(shard, name="rollouts")
        hit = [i for i in range(t.num_rows) if (t["problem_id"][i].as_py(), t["sample_idx"][i].as_py()) == key]
        if hit:
            texts = t["completion"].to_pylist()
            texts[hit[0]] = completion
            t = t.set_column(t.schema.get_field_index("completion"), "completion", pa.array(texts, pa.string()))
            write_table(t, shard, name="rollouts")
            break
    r = cli(root, "annotate", limit_s=max(60.0, res.bound_s * 2))
    res.measure(r)
    res.outcome = "annotate exit 0" if r.rc == 0 else f"exit {r.rc}: {r.error_line[:140]}"
    # the problem is annotated (its difficulty row counts the sample), and no detector crashed on the text
    diff = read_table(root / "data" / "difficulty", name="difficulty")
    mine = diff.filter(pc.equal(diff["problem_id"], key[0]))
    flags = read_table(root / "data" / "flags", name="flags")
    errors = flags.filter(pc.equal(flags["flag"], "detector_error")).num_rows
    res.outcome += f"; {errors} detector errors recorded" if errors else ""
    res.expected = r.rc == 0 and mine.num_rows >= 1


@case("annotate_deep_sum", "annotate a correct rollout holding '1 + ' * 1200 + '1 = 1201' (RecursionError before)", bound_s=30)
def _(root: Path, res: Result) -> None:
    _annotate_with(root, res, "1 + " * 1200 + "1 = 1201. The answer is 1201.")


@case("annotate_sqrt_tower", "annotate a correct rollout holding \\sqrt{4^{10^{10}}} = 4 (60 s, 4.3 GB before)", bound_s=30)
def _(root: Path, res: Result) -> None:
    _annotate_with(root, res, "We get $\\sqrt{4^{10^{10}}} = 4$. The answer is 4.")


@case("annotate_binomial", "annotate a correct rollout holding \\binom{10^{7}}{5000} = 5", bound_s=30)
def _(root: Path, res: Result) -> None:
    _annotate_with(root, res, "So $\\binom{10^{7}}{5000} = 5$. The answer is 5.")


@case("annotate_32k_loop", "annotate a correct rollout of a 32k-token repetition loop", bound_s=30)
def _(root: Path, res: Result) -> None:
    _annotate_with(root, res, "Wait, let me check 2 + 3 = 5 again. " * 4000 + "The answer is 5.")


# ingest


def _ingest_lines(root: Path, res: Result, lines: list[bytes] | Callable[[Path], None], *, limit_s: float = 120,
                  want_problems: int | None = None, want_reason: str | None = None) -> Run:
    src = root / "input.jsonl"
    if callable(lines):
        lines(src)
    else:
        src.write_bytes(b"\n".join(lines) + b"\n")

    set_params(root, _user_source("jsonl", "input.jsonl"))
    before = digest(src)
    r = cli(root, "ingest", limit_s=limit_s)
    res.measure(r)
    res.untouched = digest(src) == before
    if r.rc != 0:
        res.outcome = f"exit {r.rc}: {r.error_line[:140]}"
        return r
    import pyarrow.compute as pc

    from pipeline.io import read_table
    problems = read_table(root / "data" / "problems", name="problems").num_rows
    rejects = read_table(root / "data" / "rejects", name="rejects")
    reasons = sorted(set(rejects["reason"].to_pylist()))
    res.outcome = f"{problems} problems, {rejects.num_rows} rejects {reasons}"[:160]
    res.expected = ((want_problems is None or problems == want_problems)
                    and (want_reason is None or pc.any(pc.match_substring(rejects["reason"], want_reason)).as_py()))
    return r


def _user_source(kind: str, path: str) -> Callable[[dict], None]:
    def edit(p: dict) -> None:
        p["ingest"]["sources"] = [{"name": "user", "kind": kind, "path": path, "split": "train"}]
        p["rollout"]["sources"] = ["user"]
    return edit


def _good(i: int) -> bytes:
    return json.dumps({"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)}).encode()


@case("ingest_nested_json", "a 6 KB JSON line nested 3,000 deep among good rows", bound_s=20)
def _(root: Path, res: Result) -> None:
    deep = b'{"question": "q", "answer": "1", "extra": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    r = _ingest_lines(root, res, [_good(1), deep, _good(2)], want_problems=2)
    res.expected = res.expected and r.rc == 0


@case("ingest_5mb_id", "a row whose id is 5 MB", bound_s=20)
def _(root: Path, res: Result) -> None:
    big = json.dumps({"id": "x" * 5_000_000, "question": "What is 1 + 1?", "answer": "2"}).encode()
    r = _ingest_lines(root, res, [_good(1), big, _good(2)])
    if r.rc == 0:
        from pipeline.io import read_table
        stored = read_table(root / "data" / "problems", name="problems")
        longest = max(len(s or "") for s in stored["source_id"].to_pylist())
        res.expected = longest < 10_000
        res.outcome += f"; longest stored source_id {longest} chars"


@case("ingest_truncated_parquet", "a Parquet source cut in half")
def _(root: Path, res: Result) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = root / "input.parquet"
    pq.write_table(pa.table({"question": [f"What is {i} + 1?" for i in range(2000)],
                             "answer": [str(i + 1) for i in range(2000)]}), src)
    data = src.read_bytes()
    src.write_bytes(data[: len(data) // 2])
    set_params(root, _user_source("parquet", "input.parquet"))
    _expect_error(res, cli(root, "ingest", limit_s=60), must_say="input.parquet")


@case("ingest_200mb_line", "one 200 MB line among good rows (720 MB peak before)", bound_s=60, bound_mib=400)
def _(root: Path, res: Result) -> None:
    def write(src: Path) -> None:
        with open(src, "wb") as fh:
            fh.write(_good(1) + b"\n")
            fh.write(b'{"question": "')
            for _ in range(200):
                fh.write(b"y" * 1_000_000)
            fh.write(b'", "answer": "1"}\n')
            fh.write(_good(2) + b"\n")
    r = _ingest_lines(root, res, write, want_problems=2)
    res.expected = res.expected and r.rc == 0


@case("ingest_300k_rows", "300,000 rows (486 MB peak, one shard before)", bound_s=300, bound_mib=512)
def _(root: Path, res: Result) -> None:
    def write(src: Path) -> None:
        with open(src, "wb") as fh:
            for i in range(300_000):
                fh.write(_good(i) + b"\n")
    r = _ingest_lines(root, res, write, limit_s=600, want_problems=300_000)
    res.expected = res.expected and r.rc == 0


# recovery, processes and SQL bounds


def _current_verdict_shard(root: Path) -> Path:
    from pipeline.config import load_params
    from pipeline.verify.core import verifier_id

    short = verifier_id(load_params(root / "params.yaml").verify).split("/")[-1]
    return next(p for p in sorted((root / "data" / "verdicts").glob("*.parquet")) if p.name.startswith(short))


@case("recovery_narrowed_source", "n_per_level 3 → 2, ingest, a new verify.timeout_s, verify; then a verdict shard "
      "cut short, doctor --repair, verify, annotate, doctor", bound_s=300)
def _(root: Path, res: Result) -> None:
    def narrow(p):
        p["ingest"]["sources"][0]["options"]["n_per_level"] = 2
        p["verify"]["timeout_s"] = 4.0
    set_params(root, narrow)
    runs = [cli(root, "ingest", "--no-progress", limit_s=120), cli(root, "verify", "--no-progress", limit_s=120)]
    skipped = json.loads((root / "data" / "metrics" / "verify.json").read_text())["skipped_not_in_problems"]
    shard = _current_verdict_shard(root)
    shard.write_bytes(shard.read_bytes()[:100])
    for args in (["doctor", "--repair"], ["verify", "--no-progress"], ["annotate", "--no-progress"], ["doctor"]):
        runs.append(cli(root, *args, limit_s=120))
    res.seconds, res.peak_mib = sum(r.seconds for r in runs), max(r.peak_mib for r in runs)
    failed = [r for r in runs if r.rc != 0]
    res.outcome = (f"exit {failed[0].rc}: {failed[0].error_line[:120]}" if failed else
                   f"all exit 0; verify skipped {skipped} rollouts of dropped problems; doctor: nothing to repair")
    res.expected = not failed and skipped == 36 and "moved 1 path" in runs[2].stdout


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cpu_s(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return t.user + t.system


def _start(argv: list[str], root: Path) -> subprocess.Popen:
    """A child in its own session, with SIGINT at its default (a shell's background job inherits it ignored)."""
    return subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@case("verify_kill9_orphans", "kill -9 of `passband verify` alone while a worker grades \\boxed{9^{9^{9}}} "
      "(timeout_s 60; 42 s of CPU 96 s after before); time: from the kill until no worker is left", bound_s=5)
def _(root: Path, res: Result) -> None:
    import psutil

    _poison_one_rollout(root, "The answer is $\\boxed{9^{9^{9}}}$.")
    set_params(root, lambda p: p["verify"].__setitem__("timeout_s", 60.0))
    proc = _start([PASSBAND, "verify", "--no-progress"], root)
    family: list[int] = []
    try:
        for _ in range(12000):  # until a worker has spent a CPU second on the poisoned item
            if proc.poll() is not None:
                break
            kids = psutil.Process(proc.pid).children(recursive=True)
            # a worker: the forkserver's child (the forkserver's own start-up costs CPU seconds too)
            if any(c.ppid() != proc.pid and _cpu_s(c.pid) >= 1.0 for c in kids):
                family = [c.pid for c in kids]
                break
            time.sleep(0.02)
        peak = hwm_kib(proc.pid) / 1024
        if not family:
            res.outcome = f"no busy worker seen (verify exit {proc.poll()})"
            return
        busy = max(family, key=_cpu_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        t0, cpu0 = time.monotonic(), _cpu_s(busy)
        while any(_alive(k) for k in family) and time.monotonic() - t0 < 30:
            time.sleep(0.01)
        res.seconds, res.peak_mib = time.monotonic() - t0, peak
        left = [k for k in family if _alive(k)]
        res.outcome = (f"{len(left)} of {len(family)} processes still alive" if left else
                       f"forkserver, worker and resource tracker ({len(family)} processes) gone; the worker's CPU "
                       f"after the kill {max(0.0, _cpu_s(busy) - cpu0):.2f} s")
        res.expected = not left
    finally:
        for k in family:
            if _alive(k):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _poison_one_rollout(root: Path, completion: str) -> None:
    import pyarrow as pa

    from pipeline.io import read_shard, write_table
    shard = sorted((root / "data" / "rollouts").glob("*.parquet"))[0]
    t = read_shard(shard, name="rollouts")
    texts = t["completion"].to_pylist()
    texts[0] = completion
    write_table(t.set_column(t.schema.get_field_index("completion"), "completion", pa.array(texts, pa.string())),
                shard, name="rollouts")


ENDLESS = "SELECT count(*) FROM range(1000000000000)"  # range(1e12) is a binder error in this DuckDB (a DOUBLE)


@case("sql_endless_query", f"passband sql \"{ENDLESS}\" --timeout 3 (the default is 30 s; unbounded before)",
      bound_s=30)
def _(root: Path, res: Result) -> None:
    _expect_error(res, cli(root, "sql", ENDLESS, "--timeout", "3", limit_s=60), must_say="time limit of 3 s")


@case("sql_ctrl_c", f"Ctrl-C (SIGINT) during passband sql \"{ENDLESS}\" (ignored 20 s+ before); time: from the "
      "SIGINT to the exit", bound_s=10)
def _(root: Path, res: Result) -> None:
    proc = _start([PASSBAND, "sql", ENDLESS, "--timeout", "600"], root)
    try:
        for _ in range(30000):  # until the query computes: past start-up's 2 CPU seconds
            if proc.poll() is not None or _cpu_s(proc.pid) > 4:
                break
            time.sleep(0.02)
        peak = hwm_kib(proc.pid) / 1024
        t0, cpu0 = time.monotonic(), _cpu_s(proc.pid)
        cpu = cpu0
        proc.send_signal(signal.SIGINT)
        while proc.poll() is None and time.monotonic() - t0 < 60:  # its CPU after the signal, read until it exits
            cpu = max(cpu, _cpu_s(proc.pid))
            time.sleep(0.01)
        try:
            out, err = proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            res.outcome = "still running 60 s after the SIGINT"
            return
        r = Run(proc.returncode, time.monotonic() - t0, cpu - cpu0, peak, out, err)
        _expect_error(res, r, must_say="interrupted (Ctrl-C)")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@case("sql_table_view_1e8_rows", "passband sql \"SELECT * FROM range(100000000)\" (970 MB to show 50 rows before)",
      bound_s=30, bound_mib=300)
def _(root: Path, res: Result) -> None:
    r = cli(root, "sql", "SELECT * FROM range(100000000)", limit_s=60)
    res.seconds, res.peak_mib = r.seconds, r.peak_mib
    last = (r.stdout.strip().splitlines() or [""])[-1]
    rows = sum(1 for line in r.stdout.splitlines() if line.startswith("│")) - 1  # less the header
    res.outcome = f"exit 0: {rows} rows shown; {last}"[:160] if r.rc == 0 else r.error_line[:160]
    res.expected = r.rc == 0 and last.startswith("(the first 50 rows")


@case("sql_planted_spill_folder", "another user's /tmp/passband-sql-<uid>/leak → a private file; passband sql "
      "\"SELECT * FROM read_text('…/leak')\" (the file's text before)", bound_s=30)
def _(root: Path, res: Result) -> None:
    tmp = root.parent / f"{root.name}-tmp"  # TMPDIR: the old spill folder's place, and where a new one would stay
    tmp.mkdir()
    try:
        secret = root.parent / f"{root.name}-secret.txt"
        secret.write_text("private key material\n")
        planted = tmp / f"passband-sql-{os.getuid()}"
        planted.mkdir()
        (planted / "leak").symlink_to(secret)
        before = digest(tmp), digest(secret)
        r = cli(root, "sql", f"SELECT * FROM read_text('{planted / 'leak'}')", limit_s=60, env={"TMPDIR": str(tmp)})
        _expect_error(res, r, must_say="Permission Error")
        res.expected = res.expected and "private key" not in r.stdout
        res.untouched = (digest(tmp), digest(secret)) == before  # also: no spill folder left behind
        res.outcome = res.outcome.replace(str(tmp), "$TMPDIR")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ingest_file(root: Path, res: Result, kind: str, name: str, write: Callable[[Path], None], *,
                 limit_s: float = 120, want_problems: int | None = None, want_reasons: dict[str, int] | None = None,
                 ) -> Run:
    """Ingest one user file ``name`` of ``kind`` (written by ``write``); the outcome is the tables' counts, and the
    case is as expected when the problems and the rejects per reason are the ones wanted."""
    import collections

    from pipeline.io import read_table

    write(root / name)
    set_params(root, _user_source(kind, name))
    before = digest(root / name)
    r = cli(root, "ingest", limit_s=limit_s, env={"HF_HOME": str(root / ".hf"), "HF_DATASETS_OFFLINE": "1"})
    res.seconds, res.peak_mib = r.seconds, r.peak_mib
    res.untouched = digest(root / name) == before
    if r.rc != 0:
        res.outcome = f"exit {r.rc}: {r.error_line[:140]}"
        return r
    problems = read_table(root / "data" / "problems", name="problems").num_rows
    reasons = dict(collections.Counter(read_table(root / "data" / "rejects", name="rejects")["reason"].to_pylist()))
    res.outcome = f"{problems} problems, rejects {reasons}"[:160]
    res.expected = ((want_problems is None or problems == want_problems)
                    and (want_reasons is None or reasons == want_reasons))
    return r


def _dictionary_bomb(path: Path) -> None:
    """1,024 rows whose question is one 1.5 MB string, dictionary-encoded: an 802-byte file, 1.5 GB as Python."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    question = pa.DictionaryArray.from_arrays(pa.array([0] * 1024, pa.int32()), pa.array(["x" * 1_500_000]))
    pq.write_table(pa.table({"question": question, "answer": pa.array(["1"] * 1024)}), path, compression="zstd")


@case("ingest_parquet_dictionary_bomb", "Parquet: one 1.5 MB question dictionary-encoded over 1,024 rows (an 802-byte file; "
      "1.66 GB peak before)", bound_s=60, bound_mib=400)
def _(root: Path, res: Result) -> None:
    _ingest_file(root, res, "parquet", "input.parquet", _dictionary_bomb, want_problems=0,
                 want_reasons={"question_too_long": 1024})


@case("ingest_hf_dictionary_bomb", "kind: hf on the same 802-byte Parquet file (an Arrow cache in /tmp before)",
      bound_s=60, bound_mib=400)
def _(root: Path, res: Result) -> None:
    _ingest_file(root, res, "hf", "input.parquet", _dictionary_bomb, want_problems=0,
                 want_reasons={"question_too_long": 1024})
    res.untouched = res.untouched and not (root / ".hf").exists()


@case("ingest_lone_surrogate", 'JSONL: {"question":"What is 2 + 2?","answer":"4\\ud800"} among good rows '
      "(UnicodeEncodeError traceback before)", bound_s=30)
def _(root: Path, res: Result) -> None:
    lines = [_good(1), b'{"question":"What is 2 + 2?","answer":"4\\ud800"}', _good(2)]
    _ingest_file(root, res, "jsonl", "input.jsonl", lambda p: p.write_bytes(b"\n".join(lines) + b"\n"),
                 want_problems=2, want_reasons={"not_utf8": 1})


@case("ingest_ungradable_golds", "golds (x+1)^{10000} and \\binom{10^9}{10^8} among good rows (banded unsolved "
      "after 146 s of timeouts per 20 samples before)", bound_s=180)
def _(root: Path, res: Result) -> None:
    lines = [_good(1), json.dumps({"question": "Expand (x+1)^{10000}.", "answer": "(x+1)^{10000}"}).encode(),
             json.dumps({"question": "Compute C(10^9, 10^8).", "answer": "\\binom{10^9}{10^8}"}).encode(), _good(2)]
    _ingest_file(root, res, "jsonl", "input.jsonl", lambda p: p.write_bytes(b"\n".join(lines) + b"\n"),
                 limit_s=240, want_problems=2, want_reasons={"ungradable_gold": 2})


@case("ingest_gold_longer_than_verify_reads", "a 401-character gold (verify reads answers of 200 at most; ingest "
      "allowed 1,000 before)", bound_s=30)
def _(root: Path, res: Result) -> None:
    gold = "+".join(["1"] * 201)
    lines = [_good(1), json.dumps({"question": "Add 201 ones.", "answer": gold}).encode(), _good(2)]
    _ingest_file(root, res, "jsonl", "input.jsonl", lambda p: p.write_bytes(b"\n".join(lines) + b"\n"),
                 want_problems=2, want_reasons={"answer_too_long": 1})


# round three (issue: what is pushed is what was published, and every input has a bound)


def _plain_bomb(path: Path) -> None:
    """256 distinct 1.5 MB questions, plain-encoded in one page and zstd: a 15 kB file, 384 MB decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"question": [f"{i:06d}" + "x" * 1_500_000 for i in range(256)], "answer": [str(i) for i in range(256)]}
    pq.write_table(pa.table(rows), path, compression="zstd", use_dictionary=False)


@case("ingest_parquet_plain_bomb", "Parquet: 256 distinct 1.5 MB questions, plain and zstd (15 kB; 1.4 GB and 68 s "
      "before, 4.6 GB at 61 kB)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    r = _ingest_file(root, res, "parquet", "input.parquet", _plain_bomb)
    res.cpu_s = r.cpu_s
    res.expected = r.one_line_error and "compression bomb" in r.error_line
    res.outcome = r.error_line[:160]


@case("ingest_hf_folder_data_jsonl", "kind: hf on a folder whose data.jsonl holds a 100 MB line (859 MiB before; "
      "train.jsonl was capped)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    def write(folder: Path) -> None:
        folder.mkdir()
        big = json.dumps({"question": "x" * 100_000_000, "answer": "1"}).encode()
        (folder / "data.jsonl").write_bytes(b"\n".join([_good(1), big, _good(2)]) + b"\n")

    r = _ingest_file(root, res, "hf", "ds", write, want_problems=2, want_reasons={"line_too_long": 1})
    res.cpu_s = r.cpu_s


@case("ingest_slow_golds_budget", "8 distinct golds that each run to the check's time limit, ingest.gold_budget_s: 3 "
      "(52 s before, no total budget)", bound_s=15, bound_mib=512)
def _(root: Path, res: Result) -> None:
    golds = ["(" * (90 + i) + "1" + ")" * (90 + i) for i in range(8)]  # under the 200-character answer cap
    lines = [_good(1), *(json.dumps({"question": f"What is expression {i}?", "answer": g}).encode()
                         for i, g in enumerate(golds)), _good(2)]

    def write(p: Path) -> None:
        p.write_bytes(b"\n".join(lines) + b"\n")

    set_params(root, lambda p: p["ingest"].__setitem__("gold_budget_s", 3))
    r = _ingest_file(root, res, "jsonl", "input.jsonl", write, want_problems=2)
    res.cpu_s = r.cpu_s


@case("push_link_planted_after_publish", "publish, then ln -s a private file as data/published/NOTES.txt; push "
      "(its bytes went into the Hub commit before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    from hub_server import HubServer

    if not _published(root, res):
        return
    secret = root.parent / f"{root.name}-secret.txt"
    secret.write_text("private key material\n")
    (root / "data" / "published" / "NOTES.txt").symlink_to(secret)
    with HubServer(token="hf_x") as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_x", "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(root / ".hf")}
        _expect_error(res, cli(root, "push", "--repo-id", "alice/data", limit_s=60, env=env), must_say="is a link")
        res.untouched = not hub.commits and not hub.requests


@case("push_corrupt_build_json", "publish, then build.json overwritten with '{not json'; push --dry-run (a "
      "traceback before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    if not _published(root, res):
        return
    (root / "data" / "published" / "build.json").write_text("{not json")
    _expect_error(res, cli(root, "push", "--repo-id", "alice/data", "--dry-run", limit_s=60), must_say="corrupt")


@case("push_repo_id_hub_refuses", "push --repo-id 'a..b/c' (HFValidationError traceback before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    _expect_error(res, cli(root, "push", "--repo-id", "a..b/c", "--dry-run", limit_s=60), must_say="ORG/NAME")


@case("catalog_views_named_like_passbands", "paths.catalog: a user's DuckDB file of views named difficulty, flags, "
      "... (replaced before: names were taken as proof)")
def _(root: Path, res: Result) -> None:
    import duckdb

    con = duckdb.connect(str(root / "analysis.duckdb"))
    for name in ("difficulty", "flags", "problems"):
        con.execute(f"CREATE VIEW {name} AS SELECT 42 AS mine")
    con.close()
    before = digest(root / "analysis.duckdb")
    set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("catalog", "analysis.duckdb"))
    _expect_error(res, cli(root, "catalog", limit_s=60), must_say="did not write it")
    res.untouched = digest(root / "analysis.duckdb") == before


@case("sql_result_51_values_of_50mb", "passband sql \"SELECT repeat('x', 50000000) FROM range(51)\" --memory-mb 128 "
      "--max-result-mb 64 --format csv -o out.csv (2.3 GB at --memory-mb 1024 before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    _expect_error(res, cli(root, "sql", "SELECT repeat('x', 50000000) AS v FROM range(51)", "--memory-mb", "128",
                           "--max-result-mb", "64", "--format", "csv", "-o", "out.csv", limit_s=60))
    res.untouched = not (root / "out.csv").exists()


@case("sql_result_1e8_rows_csv", "passband sql \"SELECT * FROM range(100000000)\" --format csv -o out.csv (rc 0 at "
      "2.65 GB before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    _expect_error(res, cli(root, "sql", "SELECT * FROM range(100000000)", "--format", "csv", "-o", "out.csv",
                           limit_s=60), must_say="size limit")
    res.untouched = not (root / "out.csv").exists()


@case("sql_output_link_and_config", "passband sql -o LINK (to a private file), then -o params.yaml --overwrite "
      "(both written before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    secret = root.parent / f"{root.name}-secret.txt"
    secret.write_text("private\n")
    (root / "out.csv").symlink_to(secret)
    before = digest(secret), digest(root / "params.yaml")
    r1 = cli(root, "sql", "SELECT 1 AS x", "--format", "csv", "-o", "out.csv", "--overwrite", limit_s=30)
    r2 = cli(root, "sql", "SELECT 1 AS x", "--format", "csv", "-o", "params.yaml", "--overwrite", limit_s=30)
    res.measure(r1, r2)
    res.outcome = f"{r1.error_line[:70]} | {r2.error_line[:80]}"
    res.expected = r1.one_line_error and "is a link" in r1.error_line and r2.one_line_error and "own file" in r2.error_line
    res.untouched = (digest(secret), digest(root / "params.yaml")) == before


@case("sql_escape_sequences_in_ids", "passband sql printing an id holding ESC ]0;pwned BEL (an OSC title) and CSI "
      "(raw on the terminal before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    r = cli(root, "sql", "SELECT chr(27) || ']0;pwned' || chr(7) || chr(155) || '2J' AS problem_id", limit_s=30)
    res.measure(r)
    raw = any(c in r.stdout for c in "\x1b\x07\x9b")
    res.outcome = f"exit {r.rc}: " + ("raw control characters in the output" if raw else "shown escaped (\\x1b ...)")
    res.expected = r.rc == 0 and not raw and "\\x1b]0;pwned" in r.stdout


@case("params_k_1e9", "rollout.k: 1000000000, then rollout (4 GB in 20 s with no output before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    set_params(root, lambda p: p["rollout"].__setitem__("k", 1_000_000_000))
    _expect_error(res, cli(root, "rollout", "--set", "main", limit_s=60), must_say="rollout.k")


@case("params_alias_bomb", "a 1 KB YAML alias bomb (9^9 values) in params.yaml, then passband doctor (DVC "
      "itself takes 6 GB on it: passband refuses the file first)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    text = (root / "params.yaml").read_text() + "\nbomb:\n" + "".join(f"  {ln}\n" for ln in bomb.splitlines())
    (root / "params.yaml").write_text(text)
    _expect_error(res, cli(root, "doctor", limit_s=60), must_say="aliases expand")


@case("paths_nul_loop_file", "paths.problems with a NUL byte, through a link loop, through a file; ingest each "
      "(tracebacks before)", bound_mib=512)
def _(root: Path, res: Result) -> None:
    (root / "loop").symlink_to("loop")
    (root / "afile").write_text("x")
    runs, lines = [], []
    for value in ("data/pro\0blems", "loop/problems", "afile/problems"):
        set_params(root, lambda p, v=value: p.setdefault("paths", {}).__setitem__("problems", v))
        r = cli(root, "ingest", limit_s=60)
        runs.append(r)
        lines.append(r.error_line)
    res.measure(*runs)
    res.outcome = " | ".join(line[-60:] for line in lines)[:160]
    res.expected = all(r.one_line_error and "paths.problems" in r.error_line for r in runs)


BIG = {"ingest_200mb_line", "ingest_300k_rows"}


# what passband copies out, replaces, names and shows


@case("publish_license_symlink", "ln -s a private file as LICENSE beside a source, then publish")
def _(root: Path, res: Result) -> None:
    secret = root.parent / f"{root.name}-secret.txt"
    secret.write_text("private key material\n")
    (root / "src").mkdir()
    (root / "src" / "input.jsonl").write_bytes(_good(1) + b"\n")
    (root / "src" / "LICENSE").symlink_to(secret)
    before = digest(secret)
    set_params(root, lambda p: p["ingest"]["sources"].append({"name": "user", "kind": "jsonl", "path": "src/input.jsonl"}))
    _expect_error(res, cli(root, "publish", limit_s=60), must_say="symbolic link")
    published = root / "data" / "published"
    leaked = published.is_dir() and any(b"private key" in f.read_bytes() for f in published.rglob("*") if f.is_file())
    res.untouched = digest(secret) == before and not leaked


@case("catalog_over_user_duckdb", "paths.catalog: analysis.duckdb, a user's own DuckDB file with a table")
def _(root: Path, res: Result) -> None:
    import duckdb

    con = duckdb.connect(str(root / "analysis.duckdb"))
    con.execute("CREATE TABLE results AS SELECT 42 AS answer")
    con.close()
    before = digest(root / "analysis.duckdb")
    set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("catalog", "analysis.duckdb"))
    _expect_error(res, cli(root, "catalog", limit_s=60), must_say="did not write it")
    res.untouched = digest(root / "analysis.duckdb") == before


@case("policy_name_traversal", "a policy named a/../../../../tmp/x/pwned, then drift (its PNG outside before)")
def _(root: Path, res: Result) -> None:
    bad = "a/../../../../tmp/x/pwned"
    outside = root.parent / "tmp"  # where drift-tiny-<bad>.png resolved to
    before = digest(outside)

    def edit(p):
        p["policies"][bad] = dict(p["policies"]["tiny"])
        p["drift"] = {"pairs": [["tiny", bad]]}
    set_params(root, edit)
    _expect_error(res, cli(root, "drift", limit_s=60), must_say="not a valid name")
    res.untouched = digest(outside) == before


@case("published_path_through_link", "data/lnk -> a folder outside, paths.published: data/lnk/../pub")
def _(root: Path, res: Result) -> None:
    outside = Path(tempfile.mkdtemp(prefix="passband-outside-"))
    (outside / "sub").mkdir()
    before = digest(outside)
    try:
        (root / "data" / "lnk").symlink_to(outside / "sub", target_is_directory=True)
        set_params(root, lambda p: p.setdefault("paths", {}).__setitem__("published", "data/lnk/../pub"))
        _expect_error(res, cli(root, "publish", limit_s=60), must_say="symbolic link")
        res.untouched = digest(outside) == before
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@case("sql_csv_nested", "passband sql \"SELECT [1,2] l, {'a': 'x'} s\" --format csv (polars traceback before)")
def _(root: Path, res: Result) -> None:
    r = cli(root, "sql", "SELECT [1,2] l, {'a': 'x'} s", "--format", "csv", limit_s=30)
    res.seconds, res.peak_mib = r.seconds, r.peak_mib
    lines = r.stdout.strip().splitlines()
    res.outcome = f"exit 0: {' / '.join(lines)}" if r.rc == 0 else f"exit {r.rc}: {r.error_line[:140]}"
    res.expected = r.rc == 0 and lines == ["l,s", '"[1, 2]","{""a"": ""x""}"']


@case("card_fields_hostile", "publish.pretty_name with a newline and <script>, a license id with a newline and HTML")
def _(root: Path, res: Result) -> None:
    def edit(p):
        p["publish"]["pretty_name"] = "Mine\n<script>alert(1)</script>"
        p["publish"]["licenses"] = {"synthetic": "mit\n<img src=x onerror=alert(1)>"}
    set_params(root, edit)
    _expect_error(res, cli(root, "publish", limit_s=60), must_say="publish.")
    res.untouched = not (root / "data" / "published").exists()


# --- running -----------------------------------------------------------------------------------

def build_reference(dest: Path) -> Path:
    import faultkit as fk

    fk.make_repo(dest)
    for stage in BUILD_STAGES:
        r = cli(dest, stage, limit_s=300)
        if r.rc != 0:
            raise SystemExit(f"building the reference repository: {stage} failed: {r.stderr[-2000:]}")
    return dest


def run_cases(names: list[str] | None = None, *, quick: bool = False, log=print) -> list[Result]:
    results = []
    with tempfile.TemporaryDirectory(prefix="passband-hostile-") as tmp:
        ref = build_reference(Path(tmp) / "ref")
        for name, what, bound_s, bound_mib, fn in CASES:
            if (names and not any(name.startswith(n) for n in names)) or (quick and name in BIG):
                continue
            work = Path(tmp) / "cases" / name
            shutil.copytree(ref, work, symlinks=True, ignore=shutil.ignore_patterns(".passband"))
            res = Result(name, what, bound_s, bound_mib)
            try:
                fn(work, res)
                res.outcome = res.outcome.replace(f"{work}/", "")  # the case's own folder, as the user sees it
            except Exception as exc:  # a case that could not even be set up counts as failed, with why
                res.outcome = f"harness: {type(exc).__name__}: {exc}"[:160]
                res.expected = False
            results.append(res)
            log(f"{'ok  ' if res.ok else 'FAIL'} {name:32s} {res.cpu_s:7.2f} s CPU {res.seconds:7.2f} s wall "
                f"{res.peak_mib:7.0f} MiB  {res.outcome}")
            shutil.rmtree(work, ignore_errors=True)
    return results


def markdown(results: list[Result]) -> str:
    rows = ["| case | input | outcome | CPU time (bound) | wall | peak RSS (bound) | nothing else touched | within bounds |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        outcome, what = (t.replace("|", r"\|").replace("<", "&lt;") for t in (r.outcome, r.what))  # text, never HTML
        rows.append(f"| `{r.case}` | {what} | {outcome} | {r.cpu_s:.2f} s ({r.bound_s:g} s) | {r.seconds:.2f} s "
                    f"| {r.peak_mib:.0f} MiB ({r.bound_mib:g}) | {'yes' if r.untouched else '**no**'} "
                    f"| {'yes' if r.ok else '**no**'} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="run only the cases whose names start with these")
    ap.add_argument("--quick", action="store_true", help="leave out the big-input cases (200 MB line, 300k rows)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    results = run_cases(args.only, quick=args.quick)
    print()
    print(markdown(results))
    failed = [r.case for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (f": {failed}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ok": r.ok} for r in results], indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
