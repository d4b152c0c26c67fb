"""Hostile and careless SQL: `passband sql` runs one read-only query, and no stage builds SQL from an unescaped path.

Each refused statement gives one error line and leaves every file as it was (the repository's and the
folder beside it); a repository in a folder named ``o'q``, or in one whose name holds a COPY, runs the stages
that build SQL (rollout on the fake engine, verify, annotate, catalog, sql, summary) and the COPY never runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from pipeline.catalog import CatalogError, build_catalog, connect, query, read_only_statement
from pipeline.cli import cli
from pipeline.config import load_params
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.schema import schema
from pipeline.sqltext import sql_list, sql_literal

POLICY = {"model": "test/m", "revision": "r1", "engine": "fake", "sampling": {"temperature": 0.8, "max_tokens": 16}}
README_QUERY = ("SELECT problem_id, pass_rate, ci_low, ci_high, band_confidence FROM difficulty "
                "WHERE band = 'learnable' LIMIT 5")
# the folder name of the issue: `/` cannot be in one folder's name, so it is three nested folders
PWNED = "/tmp/pwned.csv"
HOSTILE = Path("';COPY (SELECT 1) TO '") / "tmp" / "pwned.csv';SELECT '"
HOSTILE_LOCAL = "';COPY (SELECT 1) TO 'pwned-local.csv';SELECT '"  # the same COPY, into the working folder


def _repo(root: Path) -> Path:
    """A tiny repository at ``root``: problems written directly, rollouts from the fake engine, verdicts, annotate."""
    from pipeline.annotate import run as annotate
    from pipeline.rollout import run as rollout
    from pipeline.verify import run as verify

    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(6):
        q = f"What is {i} + {i % 3 + 1}?"
        rows.append({"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
                     "answer": str(i + i % 3 + 1) if i % 2 == 0 else "0", "n_duplicates": 0})
    write_table(schema("problems").from_rows(rows), root / "data/problems/part-0.parquet", name="problems")
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]}, "policies": {"small": POLICY},
              "rollout": {"policies": ["small"], "k": 4, "shard_size": 4, "engine_options": {"fake": {}}},
              "verify": {"workers": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    p = load_params(root / "params.yaml")
    rollout(p, root=root, progress=False)
    verify(p, root=root, progress=False)
    annotate(p, root=root, progress=False)  # with plots: their SQL reads the new difficulty shard
    return root / "params.yaml"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return _repo(tmp_path_factory.mktemp("sql") / "repo")


def _snapshot(*folders: Path) -> dict[str, str]:
    """Every file under ``folders`` (hidden ones too) with its content's digest."""
    out = {}
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for f in files:
                path = Path(dirpath) / f
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _sql(params: Path, text: str, *extra: str):
    return CliRunner().invoke(cli, ["sql", text, "--params", str(params), *extra])


def _refused(res, start: str) -> str:
    """The CLI's one error line, which starts with ``start``; no traceback."""
    assert res.exit_code == 1, res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output, res.output
    assert res.output.startswith("Error: " + start), res.output
    return res.output


# --- the reproductions ------------------------------------------------------------------


def test_readme_queries_and_summary_still_work(repo):
    root = repo.parent
    res = _sql(repo, README_QUERY, "--format", "csv")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == "problem_id,pass_rate,ci_low,ci_high,band_confidence"
    res = _sql(repo, "SELECT count(*) AS n FROM difficulty", "--format", "json")
    assert res.exit_code == 0 and '"n":6' in res.output, res.output
    res = CliRunner().invoke(cli, ["summary", "--params", str(repo)])
    assert res.exit_code == 0, res.output
    assert "smollm2" not in res.output and "small" in res.output and "(not built yet: passband publish)" in res.output
    # a table folder's Parquet, read directly (absolute path), is allowed
    res = _sql(repo, f"SELECT count(*) AS n FROM read_parquet({sql_literal(str(root / 'data/problems'))} || '/*.parquet')",
               "--format", "csv")
    assert res.exit_code == 0 and res.output.splitlines() == ["n", "6"], res.output


def test_the_published_parquet_is_readable_by_path(repo, monkeypatch):
    """A query may read passband's Parquet by path: a table folder's, or the published dataset's (data/published)."""
    root = repo.parent
    write_table(schema("problems").from_rows([]), root / "data/published/data/default/train-0.parquet", name="problems")
    for cwd in (root, root.parent):  # relative paths are read from the project folder, wherever sql runs
        monkeypatch.chdir(cwd)
        for glob in ("data/published/data/default/*.parquet", f"{root}/data/published/data/default/*.parquet",
                     "data/problems/*.parquet"):
            res = _sql(repo, f"SELECT count(*) AS n FROM read_parquet({sql_literal(glob)})", "--format", "csv")
            assert res.exit_code == 0 and res.output.splitlines()[0] == "n", res.output
        for path in ("params.yaml", "data/problems/../../params.yaml", "data/metrics/annotate.json"):
            _refused(_sql(repo, f"SELECT * FROM read_text({sql_literal(path)})"), "SQL error: Permission Error")


def test_copy_to_a_file_outside_is_refused(repo, tmp_path):
    target = tmp_path / "x.csv"
    before = _snapshot(repo.parent, tmp_path)
    out = _refused(_sql(repo, f"COPY (SELECT * FROM problems) TO {sql_literal(str(target))}"),
                   "passband sql only reads the tables: COPY statement refused")
    assert "--output FILE" in out
    assert not target.exists() and _snapshot(repo.parent, tmp_path) == before


def test_copy_over_a_shard_leaves_it_byte_identical(repo, monkeypatch):
    root = repo.parent
    shard = root / "data/problems/part-0.parquet"
    before = _snapshot(root)
    monkeypatch.chdir(root)  # the relative path, as a user types it at the root
    _refused(_sql(repo, "COPY (SELECT * FROM problems LIMIT 1) TO 'data/problems/part-0.parquet'"),
             "passband sql only reads the tables: COPY statement refused")
    _refused(_sql(repo, f"COPY (SELECT 1 AS x) TO {sql_literal(str(shard))} (FORMAT parquet)"),
             "passband sql only reads the tables: COPY statement refused")
    assert _snapshot(root) == before
    res = _sql(repo, "SELECT count(*) AS n FROM problems", "--format", "csv")  # the next query: the shard is whole
    assert res.exit_code == 0 and res.output.splitlines() == ["n", "6"], res.output


def test_reading_a_file_outside_the_table_folders_is_refused(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me\n")
    problems = repo.parent / "data/problems"
    for path in ("/etc/hostname", str(secret), f"{problems}/../../../{secret.relative_to(secret.anchor)}",
                 str(repo)):  # params.yaml: in the repository, but in no table folder
        for fn in ("read_text", "read_blob", "read_csv"):
            res = _sql(repo, f"SELECT * FROM {fn}({sql_literal(path)})")
            out = _refused(res, "SQL error: Permission Error")
            assert "passband sql reads only the table folders" in out and "do not read me" not in out
    _refused(_sql(repo, "SELECT * FROM glob('/etc/*')"), "SQL error: Permission Error")
    # a sibling folder whose name starts with a table folder's is not admitted by the prefix
    sibling = repo.parent / "data/problems_old"
    write_table(schema("problems").from_rows([]), sibling / "part-0.parquet", name="problems")
    _refused(_sql(repo, f"SELECT * FROM read_parquet({sql_literal(str(sibling / 'part-0.parquet'))})"),
             "SQL error: Permission Error")


def test_attach_then_create_is_refused_and_writes_nothing(repo, tmp_path):
    db = tmp_path / "evil.duckdb"
    before = _snapshot(repo.parent, tmp_path)
    out = _refused(_sql(repo, f"ATTACH {sql_literal(str(db))} AS evil; CREATE TABLE evil.t AS SELECT * FROM problems"),
                   "passband sql runs exactly one statement, got 2 (ATTACH, CREATE)")
    assert "one read-only query" in out
    _refused(_sql(repo, f"ATTACH {sql_literal(str(db))} AS evil"), "passband sql only reads the tables: ATTACH")
    assert not db.exists() and _snapshot(repo.parent, tmp_path) == before


def test_install_is_refused_without_a_download(repo, monkeypatch):
    """Refused by the statement check before any connection is opened, so nothing can try the network."""
    import pipeline.catalog as catalog

    def no_connection(*args, **kwargs):
        raise AssertionError("a connection was opened for a refused statement")

    monkeypatch.setattr(catalog, "connect", no_connection)
    for text in ("INSTALL httpfs", "LOAD httpfs", "FORCE INSTALL httpfs FROM core_nightly"):
        _refused(_sql(repo, text), "passband sql only reads the tables: INSTALL/LOAD statement refused")


@pytest.mark.parametrize("text, kind", [
    ("PRAGMA enable_profiling", "PRAGMA"), ("SET enable_external_access = true", "SET"),
    ("RESET lock_configuration", "SET"), ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("CREATE OR REPLACE VIEW problems AS SELECT 1", "CREATE"), ("INSERT INTO problems SELECT * FROM problems", "INSERT"),
    ("UPDATE problems SET answer = '1'", "UPDATE"), ("DELETE FROM problems", "DELETE"),
    ("EXPORT DATABASE '/tmp/passband-export'", "EXPORT"), ("CALL pragma_version()", "CALL"), ("CHECKPOINT", "CALL"),
    ("DROP VIEW problems", "DROP"), ("DETACH memory", "DETACH"), ("EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'", "EXPLAIN"),
])
def test_every_non_query_statement_is_refused(text, kind):
    with pytest.raises(CatalogError, match=f"^passband sql only reads the tables: {kind} statement refused"):
        read_only_statement(text)


@pytest.mark.parametrize("text", [
    "SELECT 1", "WITH a AS (SELECT 1 AS x) SELECT * FROM a", "FROM difficulty", "VALUES (1)", "DESCRIBE difficulty",
    "SHOW TABLES", "SUMMARIZE difficulty", "SELECT 1;", "  select 1 -- trailing comment",
])
def test_read_only_queries_pass_the_check(text):
    assert read_only_statement(text).type == duckdb.StatementType.SELECT


def test_two_statements_and_none_are_refused():
    with pytest.raises(CatalogError, match=r"^passband sql runs exactly one statement, got 2 \(SELECT, SELECT\)"):
        read_only_statement("SELECT 1; SELECT 2")
    with pytest.raises(CatalogError, match=r"^SQL error: no statement given"):
        read_only_statement(" ; ")
    with pytest.raises(CatalogError, match=r"^SQL error: Parser Error"):
        read_only_statement("SELEC nonsense")


def test_the_connection_itself_is_locked_down(repo, tmp_path):
    """Defense in depth: the statements the check refuses also fail on the connection `passband sql` queries."""
    params = load_params(repo)
    con = connect(params, root=repo.parent)
    try:
        settings = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
                                    "'lock_configuration', 'autoload_known_extensions', 'autoinstall_known_extensions')"
                                    ).fetchall())
        assert settings == {"enable_external_access": "false", "lock_configuration": "true",
                            "autoload_known_extensions": "false", "autoinstall_known_extensions": "false"}
        allowed = con.execute("SELECT value FROM duckdb_settings() WHERE name = 'allowed_directories'").fetchone()[0]
        assert f"{Path.cwd()}/.tmp/" not in allowed  # DuckDB's default spill folder, in the working folder
        for text in (f"COPY (SELECT 1) TO {sql_literal(str(tmp_path / 'x.csv'))}", "SELECT * FROM read_text('/etc/hostname')",
                     f"ATTACH {sql_literal(str(tmp_path / 'x.duckdb'))}", "INSTALL httpfs", "LOAD httpfs",
                     "SELECT * FROM 'https://example.com/x.parquet'"):
            with pytest.raises(duckdb.PermissionException):  # refused: a download that failed would be an IOException
                con.execute(text)
        for text in ("SET enable_external_access = true", "SET allowed_directories = ['/']", "RESET lock_configuration",
                     "SET autoinstall_known_extensions = true"):
            with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
                con.execute(text)
        with pytest.raises(duckdb.ParserException):  # query() takes one SELECT only
            con.execute(f"SELECT * FROM query({sql_literal('COPY (SELECT 1) TO ' + sql_literal(str(tmp_path / 'y.csv')))})")
    finally:
        con.close()
    assert list(tmp_path.iterdir()) == []


def test_output_into_a_table_folder_is_refused(repo):
    root = repo.parent
    before = _snapshot(root)
    for target in ("data/problems/part-0.parquet", "data/difficulty/part-9.parquet", "data/passband.duckdb"):
        _refused(_sql(repo, "SELECT 1 AS x", "--format", "parquet", "-o", str(root / target)),
                 f"--output {root / target} would overwrite passband's own")
    assert _snapshot(root) == before


# --- SQL built from paths -----------------------------------------------------------------------


def test_sql_literal_and_list():
    assert sql_literal("o'q") == "'o''q'"
    assert sql_list(["a", "b'c"]) == "['a', 'b''c']"
    assert duckdb.execute(f"SELECT {sql_literal(HOSTILE_LOCAL)}").fetchone()[0] == HOSTILE_LOCAL
    with pytest.raises(ValueError, match="NUL"):
        sql_literal("a\x00b")


@pytest.mark.parametrize("name", ["o'q", HOSTILE_LOCAL, str(HOSTILE), "d\"q'u`o$(id)"])
def test_stages_run_in_a_folder_with_quotes_in_its_name(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the injected relative COPY would write
    pwned_before = Path(PWNED).stat().st_mtime_ns if Path(PWNED).exists() else None
    root = tmp_path / name
    params_path = _repo(root)
    params = load_params(params_path)
    d = read_table(root / "data/difficulty", name="difficulty")
    assert d.num_rows == 6 and (root / "data/plots/pass_rate_hist.png").exists()
    catalog = build_catalog(params, root=root)
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        con.execute("SET file_search_path = ?", [str(root)])
        assert con.execute("SELECT count(*) FROM difficulty").fetchone() == (6,)
    finally:
        con.close()
    assert query(params, "SELECT count(*) AS n FROM rollouts", root=root).item() == 24
    res = _sql(params_path, README_QUERY)
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["summary", "--params", str(params_path)])
    assert res.exit_code == 0 and "Difficulty bands" in res.output, res.output
    assert not (tmp_path / "pwned-local.csv").exists()
    assert (Path(PWNED).stat().st_mtime_ns if Path(PWNED).exists() else None) == pwned_before


def test_catalog_in_a_folder_with_a_comma_is_one_line(tmp_path):
    root = tmp_path / "a,b"
    params_path = _repo(root)
    res = CliRunner().invoke(cli, ["catalog", "--params", str(params_path)])
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert "has a comma in its path" in res.output and not (root / "data/passband.duckdb").exists()
    res = _sql(params_path, "SELECT count(*) AS n FROM difficulty", "--format", "csv")  # sql needs no catalog file
    assert res.exit_code == 0 and res.output.splitlines() == ["n", "6"], res.output


SQL_WORDS = re.compile(r"read_parquet|read_csv|read_json|read_text|file_search_path|\b(FROM|TO|SET|VIEW|COPY|ATTACH|SELECT)\b")
QUOTED_FIELD = re.compile(r"""f["'].*'\{""")  # an f-string with '{...
WHOLE_QUOTED = re.compile(r"""f"'\{[^}]*\}'""" + '"')  # f"'{x}'", the old catalog's list of globs


def hand_quoted(pipeline: Path) -> list[str]:
    """Lines where an f-string puts a value between single quotes in SQL: ``'{...}'`` beside a SQL word, or a
    whole ``f"'{x}'"``."""
    bad = []
    for path in sorted(pipeline.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if WHOLE_QUOTED.search(line) or (QUOTED_FIELD.search(line) and SQL_WORDS.search(line)):
                bad.append(f"{path.relative_to(pipeline)}:{n}: {line.strip()}")
    return bad


def test_no_sql_in_pipeline_quotes_a_value_by_hand():
    """Every value in SQL text goes through sql_literal or a bound parameter, never ``'{value}'``."""
    assert hand_quoted(Path(__file__).resolve().parent.parent / "pipeline") == []


# --- bounds: time, Ctrl-C, memory, rows fetched, the spill folder ----------------------------------

ENDLESS = "SELECT count(*) FROM range(1000000000000)"  # 10^12 rows: hours on two cores


@pytest.mark.timing
def test_a_query_past_its_timeout_is_stopped_with_one_line(repo):
    cpu = time.process_time()
    res = _sql(repo, ENDLESS, "--timeout", "1")
    _refused(res, "SQL error: the query ran past its time limit of 1 s")
    assert time.process_time() - cpu < 30  # DuckDB's threads included: stopped, not run to the end


@pytest.mark.timing
def test_ctrl_c_stops_a_running_query(repo):
    """A ^C while DuckDB computes (its threads, not Python's) stops the query at once: one line, exit 1."""
    import resource
    import signal
    import subprocess
    import sys

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # a shell's background job inherits SIGINT ignored: the child gets the terminal's default, as a user's does
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "sql", ENDLESS, "--params", str(repo), "--timeout", "600"],
                            stderr=subprocess.PIPE, text=True, cwd=repo.parent,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        me = psutil.Process(proc.pid)
        for _ in range(30000):  # until the query computes: past start-up's 2 CPU seconds (a poll count, not a clock)
            t = me.cpu_times()
            if t.user + t.system > 4 or proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 1 and lines == ["Error: interrupted (Ctrl-C): the query was stopped"], err
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 30


@pytest.mark.timing
def test_the_memory_limit_is_a_one_line_error(repo):
    cpu = time.process_time()
    res = _sql(repo, "SELECT list(range) FROM range(100000000)", "--memory-mb", "64", "--spill-mb", "0")
    out = _refused(res, "SQL error: Out of Memory Error")
    assert "memory limit (64 MiB)" in out
    assert time.process_time() - cpu < 30


@pytest.mark.timing
def test_the_table_view_fetches_only_the_rows_it_shows(repo):
    cpu = time.process_time()
    res = _sql(repo, "SELECT * FROM range(100000000)")  # 10^8 rows: seconds and 900 MB when all were fetched
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[-1].startswith("(the first 50 rows; more not shown")
    assert "│ 49    │" in res.output and "│ 50    │" not in res.output
    assert time.process_time() - cpu < 5
    res = _sql(repo, "SELECT * FROM range(50)")  # exactly as many as shown: no note
    assert res.exit_code == 0 and "more not shown" not in res.output and "│ 49    │" in res.output


def test_the_spill_folder_is_private_fresh_and_removed(repo, tmp_path, monkeypatch):
    """A folder another user planted at the old, predictable spill path is not readable by a query, and each
    session's own spill folder is a fresh 0700 mkdtemp that is gone afterwards."""
    from pipeline.catalog import session

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    planted = tmp_path / f"passband-sql-{os.getuid()}"
    planted.mkdir()
    (planted / "leak").symlink_to(secret)
    res = _sql(repo, f"SELECT * FROM read_text({sql_literal(str(planted / 'leak'))})")
    _refused(res, "SQL error: Permission Error")
    params = load_params(repo)
    with session(params, root=repo.parent) as con:
        spill = con.execute("SELECT value FROM duckdb_settings() WHERE name = 'temp_directory'").fetchone()[0]
        assert Path(spill).parent == tmp_path and Path(spill) != planted
        assert Path(spill).stat().st_mode & 0o777 == 0o700
    assert not Path(spill).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([planted.name, secret.name])


# --- the result's bounds, --output, and text shown on a terminal ------------------------------------


def test_a_result_over_its_budget_is_one_line(repo):
    out = _refused(_sql(repo, "SELECT * FROM range(100000000)", "--format", "csv", "--max-result-mb", "16"),
                   "SQL error: the result is over its size limit of 16 MiB")
    assert "--max-result-mb" in out
    res = _sql(repo, "SELECT * FROM range(1000)", "--format", "csv", "--max-result-mb", "1")  # 8 kB: within
    assert res.exit_code == 0 and len(res.output.splitlines()) == 1001


@pytest.mark.slow
def test_a_query_that_builds_huge_values_stays_within_its_memory(repo, tmp_path):
    """51 values of 50 MB: DuckDB builds a chunk's values outside its memory limit (2.3 GB before); the process's
    data is capped while the query runs, so it fails in one line near its limits."""
    import subprocess
    import sys

    # the child's own high-water mark (VmHWM): ru_maxrss would carry the forking pytest worker's across exec
    code = ("import sys\nfrom pipeline.cli import main\ntry:\n    main()\nfinally:\n"
            "    hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0].split()[1]\n"
            "    print('peak-kb', hwm, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "sql", "SELECT repeat('x', 50000000) AS v FROM range(51)",
                           "--params", str(repo), "--memory-mb", "256", "--max-result-mb", "64", "--format", "csv",
                           "-o", str(tmp_path / "out.csv")], capture_output=True, text=True, timeout=300)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and lines[0].startswith("Error: SQL error:") and len(lines) == 2, proc.stderr[-2000:]
    peak_mb = int(lines[1].split()[1]) >> 10
    assert peak_mb < 256 + 64 + 128 + 300, peak_mb   # its limits, the slack, and the interpreter with its libraries
    assert not (tmp_path / "out.csv").exists()


def test_output_never_goes_through_a_link_nor_over_a_file_unasked(repo, tmp_path):
    root = repo.parent
    private = tmp_path / "private.txt"
    private.write_text("keep me")
    link = tmp_path / "result.csv"
    link.symlink_to(private)
    _refused(_sql(repo, "SELECT 1 AS x", "--format", "csv", "-o", str(link), "--overwrite"), f"--output {link} is a link")
    assert private.read_text() == "keep me" and link.is_symlink()
    before = (root / "params.yaml").read_bytes()
    _refused(_sql(repo, "SELECT 1 AS x", "--format", "csv", "-o", str(root / "params.yaml"), "--overwrite"),
             f"--output {root / 'params.yaml'} is the project's own file")
    assert (root / "params.yaml").read_bytes() == before
    _refused(_sql(repo, "SELECT 1 AS x", "--format", "csv", "-o", str(private)), f"--output {private} exists")
    assert private.read_text() == "keep me"
    assert _sql(repo, "SELECT 1 AS x", "--format", "csv", "-o", str(private), "--overwrite").exit_code == 0
    assert private.read_text() == "x\n1\n"
    new = tmp_path / "new.parquet"
    assert _sql(repo, "SELECT 1 AS x", "--format", "parquet", "-o", str(new)).exit_code == 0 and new.stat().st_size
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]   # the temp file was renamed or removed
    _refused(_sql(repo, "SELECT 1 AS x", "-o", str(tmp_path / "missing" / "x.csv")), "--output")


def test_control_characters_never_reach_the_terminal_raw(repo):
    osc = "chr(27) || ']0;pwned' || chr(7) || chr(155) || 'id'"
    res = _sql(repo, f"SELECT {osc} AS problem_id, 'a' || chr(10) || 'b' AS text")
    assert res.exit_code == 0 and "\x1b" not in res.output and "\x07" not in res.output and "\x9b" not in res.output
    assert "\\x1b]0;pwned\\x07\\x9bid" in res.output
    res = _sql(repo, f"SELECT {osc} AS problem_id", "--format", "json")   # JSON escapes them itself
    assert "\x1b" not in res.output and "\\u001b" in res.output
