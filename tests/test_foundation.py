"""Schemas, config, keys, gold extraction, atomic I/O, catalog and CLI basics."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from pipeline import docs
from pipeline.cli import COMMANDS, cli
from pipeline.config import ConfigError
from pipeline.gold import GoldError, boxed_gold, gsm8k_gold
from pipeline.io import read_table, shard_paths, write_table
from pipeline.keys import normalize_question, policy_id, problem_id, sample_seed
from pipeline.params_loader import load_params, parse_params
from pipeline.schema import TABLES, SchemaError, parse_type, schema
from pipeline.verify.gold_check import gold_parses, golds_equivalent

REPO = Path(__file__).resolve().parent.parent


# --- schemas ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_every_table_is_declared_with_its_key(name):
    s = schema(name)
    assert s.name == name and set(s.key) <= set(s.names)
    assert s.arrow.names == s.names
    assert s.empty().num_rows == 0


def test_validate_rejects_missing_and_extra_columns_and_nulls():
    s = schema("rollouts")
    row = {"problem_id": "p", "policy_id": "q", "sample_idx": 0, "seed": 1, "completion": "x", "n_tokens": 1,
           "finish_reason": "stop"}
    assert s.from_rows([row]).num_rows == 1
    with pytest.raises(SchemaError, match="missing columns \\['seed'\\]"):
        s.validate(pa.Table.from_pylist([{k: v for k, v in row.items() if k != "seed"}]))
    with pytest.raises(SchemaError, match="unexpected columns \\['bogus'\\]"):
        s.validate(pa.Table.from_pylist([{**row, "bogus": 1}]))
    with pytest.raises(SchemaError, match="'completion' has nulls"):
        s.validate(pa.Table.from_pylist([{**row, "completion": None}]))


def test_parse_type_grammar():
    assert parse_type("map<string, float64>") == pa.map_(pa.string(), pa.float64())
    assert parse_type("list<string>") == pa.list_(pa.string())
    with pytest.raises(SchemaError, match="unknown column type 'decimal'"):
        parse_type("decimal")


def test_docs_tables_agree_with_schemas():
    readme = (REPO / "docs/tables.md").read_text()
    assert docs.render(readme) == readme, "run: python -m pipeline.docs"
    for name in TABLES:
        for col in schema(name).names:
            assert f"| `{col}` |" in readme


# --- config ----------------------------------------------------------------------------------


def test_repo_params_load():
    params = load_params(REPO / "params.yaml")
    assert params.rollout.k > 0 and params.ingest.sources


def test_unknown_key_is_named():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["ingest"]["max_question_charz"] = 3
    with pytest.raises(ConfigError, match=r"ingest\.max_question_charz: unknown key \(did you mean max_question_chars[,?].*; "
                                          r"known: .*max_question_chars"):
        parse_params(raw)


def test_a_typo_in_a_knob_gets_the_close_keys_at_any_depth():
    """A nested section, a list item and a mapping's value (a policy) all name the keys allowed where the typo is."""
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["ingest"]["sources"][0]["pth"] = "x"
    raw["policies"]["smollm2-135m-3shot"]["sampling"]["temprature"] = 1.0
    raw["annotate"]["bands"] = {"learnable_mn": 0.3}
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    msg = str(err.value)
    assert "ingest.sources.0.pth: unknown key (did you mean path?)" in msg
    assert "policies.smollm2-135m-3shot.sampling.temprature: unknown key (did you mean temperature?)" in msg
    assert "annotate.bands.learnable_mn: unknown key (did you mean learnable_min, learnable_max?)" in msg


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("reformulate", "bands", ["learnabel"], "reformulate.bands: unknown band 'learnabel' (did you mean learnable?); "
                                            "known: learnable, too_easy, too_hard, unsolved"),
    ("publish", "reformulated_bands", ["easy"], "publish.reformulated_bands: unknown band 'easy'"),
    ("rollout", "sources", ["synthetc"], "rollout.sources: unknown source 'synthetc' (did you mean synthetic?); "
                                         "known: gsm8k_test, gsm8k_train, math_train, synthetic"),
    ("rollout", "policies", ["smollm2"], "rollout.policies: unknown policy 'smollm2'"),
    ("reformulate", "policies", ["nope"], "reformulate.policies: unknown policy 'nope'"),
    ("verify", "extractors", ["boxd"], "verify.extractors: unknown extractor 'boxd' (did you mean boxed?)"),
    ("annotate", "flags", ["truncatd"], "annotate.flags: unknown flag 'truncatd' (did you mean truncated?)"),
])
def test_values_that_name_things_are_checked_at_load(section, key, value, message):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw[section][key] = value
    with pytest.raises(ConfigError) as info:
        parse_params(raw, origin="params.yaml")
    assert str(info.value).startswith(f"params.yaml: {message}") and "\n" not in str(info.value)


def test_an_unknown_source_kind_is_named():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["ingest"]["sources"][0]["kind"] = "gsm8"
    with pytest.raises(ConfigError, match=r"^params\.yaml: ingest\.sources\.kind: unknown source kind 'gsm8' \(did you mean"):
        parse_params(raw, origin="params.yaml")


def test_bad_value_says_what_is_allowed():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["rollout"]["k"] = 0
    with pytest.raises(ConfigError, match=r"rollout\.k: Input should be greater than 0"):
        parse_params(raw)


def test_unknown_source_kind_suggests_close_names(tmp_path):
    from pipeline.ingest.sources import get_source

    with pytest.raises(ConfigError, match="did you mean gsm8k"):
        get_source("gsm8")


# --- keys and gold ---------------------------------------------------------------------------


def test_problem_id_ignores_spacing_and_case_only():
    assert problem_id("What is 2+2?") == problem_id("  what IS 2+2?\r\n")
    assert problem_id("What is 2+2?") != problem_id("What is 2+3?")
    assert normalize_question("a  b\r\n c ") == "a b\nc"


def test_policy_id_and_seed_are_stable():
    assert policy_id({"a": 1, "b": 2}) == policy_id({"b": 2, "a": 1})
    assert policy_id({"a": 1}) != policy_id({"a": 2})
    s = sample_seed("p_1", "pol_1", 3)
    assert s == sample_seed("p_1", "pol_1", 3) and 0 <= s < 2**31
    assert s != sample_seed("p_1", "pol_1", 4)


@pytest.mark.parametrize(
    "text,gold",
    [("x\n#### 72", "72"), ("#### 1,000,000", "1000000"), ("#### -3", "-3"), ("#### $18", "18"),
     ("a #### 1\n#### 2", "2")],
)
def test_gsm8k_gold(text, gold):
    assert gsm8k_gold(text) == gold


@pytest.mark.parametrize(
    "text,gold",
    [("$\\boxed{5}$", "5"), ("\\boxed{\\frac{a}{b}}", "\\frac{a}{b}"), ("\\boxed{1} then \\boxed{2}", "2"),
     ("\\fbox{x+1}", "x+1"), ("\\boxed 9.", "9"), ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
     # seen in MATH train: trailing punctuation and \! thousands separators inside the box
     ("\\boxed{-\\frac{5}{3}.}", "-\\frac{5}{3}"), ("\\boxed{\\dfrac{1}{29,\\!322,\\!216}}", "\\dfrac{1}{29322216}"),
     ("\\boxed{\\text{(E)},}", "\\text{(E)}"), ("\\boxed{(3,100)}", "(3,100)")],
)
def test_boxed_gold(text, gold):
    assert boxed_gold(text) == gold


def test_boxed_gold_failures():
    with pytest.raises(GoldError, match="closing brace"):
        boxed_gold("\\boxed{1")
    with pytest.raises(GoldError, match="no \\\\boxed"):
        boxed_gold("no box")


def test_gold_parsing_and_equivalence():
    assert gold_parses("42") and gold_parses("\\frac{1}{2}") and gold_parses("\\text{Devon}")
    assert not gold_parses("@@@ ###")
    assert golds_equivalent("1/2", "0.5") and golds_equivalent("1,000", "1000")
    assert not golds_equivalent("2.5", "3")


# --- I/O -------------------------------------------------------------------------------------


def test_write_table_is_atomic_and_checked(tmp_path):
    t = schema("rejects").from_rows([{"stage": "ingest", "source": "s", "source_id": "1", "reason": "r",
                                      "detail": None, "excerpt": None}])
    out = write_table(t, tmp_path / "rej" / "a.parquet", name="rejects")
    assert pq.read_table(out).schema.equals(schema("rejects").arrow, check_metadata=False)
    (tmp_path / "rej" / ".b.parquet.123.tmp").write_bytes(b"half a file")  # a killed writer's leftover
    assert shard_paths(tmp_path / "rej") == [out]
    assert read_table(tmp_path / "rej", name="rejects").num_rows == 1
    with pytest.raises(SchemaError):
        write_table(pa.table({"stage": ["x"]}), tmp_path / "rej" / "c.parquet", name="rejects")
    assert not (tmp_path / "rej" / "c.parquet").exists()


def test_read_table_of_missing_dir_is_empty_and_typed(tmp_path):
    t = read_table(tmp_path / "nothing", name="difficulty")
    assert t.num_rows == 0 and t.schema.equals(schema("difficulty").arrow, check_metadata=False)
    keys = read_table(tmp_path / "nothing", name="rollouts", columns=["problem_id", "sample_idx"])
    assert keys.num_rows == 0 and keys.column_names == ["problem_id", "sample_idx"]


def test_read_table_with_columns_reads_only_their_pages_and_still_checks_the_footer(tmp_path, monkeypatch):
    from pipeline.io import DamagedShardError

    rows = [{"problem_id": "p", "policy_id": "q", "sample_idx": i, "seed": i, "completion": "x" * 1000, "n_tokens": 1,
             "finish_reason": "stop"} for i in range(3)]
    write_table(schema("rollouts").from_rows(rows), tmp_path / "r" / "a.parquet", name="rollouts")
    asked = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table",
                        lambda path, columns=None, **kw: asked.append(columns) or real(path, columns=columns, **kw))
    t = read_table(tmp_path / "r", name="rollouts", columns=["sample_idx", "problem_id"])
    assert t.column_names == ["sample_idx", "problem_id"] and t.column("sample_idx").to_pylist() == [0, 1, 2]
    assert t.schema.field("sample_idx").type == schema("rollouts").arrow.field("sample_idx").type
    assert asked == [["sample_idx", "problem_id"]]  # the completion's pages are never read
    # a shard missing a declared column is damaged even when that column is not asked for
    pq.write_table(pq.read_table(tmp_path / "r" / "a.parquet").drop_columns(["seed"]), tmp_path / "r" / "a.parquet")
    with pytest.raises(DamagedShardError, match=r"a\.parquet: damaged shard of table rollouts \(missing columns \['seed'\]"):
        read_table(tmp_path / "r", name="rollouts", columns=["problem_id"])


# --- CLI -------------------------------------------------------------------------------------


def test_every_command_has_help():
    runner = CliRunner()
    res = runner.invoke(cli, ["--help"])
    assert res.exit_code == 0
    listed = cli.list_commands(None)
    assert {"ingest", "sql", "catalog"} <= set(listed)
    for name in listed:
        res = runner.invoke(cli, [name, "--help"])
        assert res.exit_code == 0, (name, res.output)
        assert len(res.output.split("\n\n")[1].strip()) > 20, f"{name} has no real help text"
    assert set(listed) <= set(COMMANDS)


def _mini_repo(tmp_path: Path) -> Path:
    data = tmp_path / "in.jsonl"
    data.write_text(
        "\n".join(json.dumps(r) for r in [
            {"q": "What is 1 + 1?", "a": "2"}, {"q": "What is 2 + 2?", "a": "4"}, {"q": "", "a": "1"},
        ]) + "\n"
    )
    params = {
        "ingest": {"sources": [{"name": "mine", "kind": "jsonl", "path": "in.jsonl",
                                "mapping": {"question": "q", "answer": "a"}}]},
        "policies": {"p": {}},
        "rollout": {"policies": ["p"]},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path / "params.yaml"


def test_cli_ingest_then_sql_in_every_format(tmp_path):
    runner = CliRunner()
    p = _mini_repo(tmp_path)
    res = runner.invoke(cli, ["ingest", "--params", str(p), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "3 rows read -> 2 problems, 1 rejects, 0 duplicates" in res.output
    q = "SELECT question, answer FROM problems ORDER BY answer"
    res = runner.invoke(cli, ["sql", q, "--params", str(p), "--format", "csv"])
    assert res.output.splitlines() == ["question,answer", "What is 1 + 1?,2", "What is 2 + 2?,4"]
    res = runner.invoke(cli, ["sql", "SELECT reason FROM rejects", "--params", str(p), "--format", "json"])
    assert json.loads(res.output) == [{"reason": "empty_question"}]
    out = tmp_path / "x.parquet"
    res = runner.invoke(cli, ["sql", q, "--params", str(p), "--format", "parquet", "-o", str(out)])
    assert res.exit_code == 0 and pq.read_table(out).num_rows == 2
    res = runner.invoke(cli, ["sql", q, "--params", str(p)])
    assert "What is 1 + 1?" in res.output


def test_cli_errors_are_one_line(tmp_path):
    runner = CliRunner()
    p = _mini_repo(tmp_path)
    res = runner.invoke(cli, ["sql", "SELEC nonsense", "--params", str(p)])
    assert res.exit_code == 1 and res.output.startswith("Error: SQL error:") and "Traceback" not in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("ingest: {sources: []}\npolicies: {}\nrollout: {policies: [nope]}\n")
    res = runner.invoke(cli, ["ingest", "--params", str(bad)])
    assert res.exit_code == 1 and "at least one source is required" in res.output


def test_catalog_file_survives_a_move(tmp_path, monkeypatch):
    import shutil

    import duckdb

    runner = CliRunner()
    (tmp_path / "a").mkdir()
    p = _mini_repo(tmp_path / "a")
    assert runner.invoke(cli, ["ingest", "--params", str(p), "--no-progress"]).exit_code == 0
    assert runner.invoke(cli, ["catalog", "--params", str(p)]).exit_code == 0
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "a", moved)
    monkeypatch.chdir(moved)  # as a user runs `duckdb data/passband.duckdb` from the repository root
    con = duckdb.connect("data/passband.duckdb", read_only=True)
    assert con.execute("SELECT count(*) FROM problems").fetchone() == (2,)
    assert con.execute("SELECT count(*) FROM rollouts").fetchone() == (0,)  # typed, empty


def test_summary_on_an_ingest_only_repo_says_what_is_missing(tmp_path):
    runner = CliRunner()
    p = _mini_repo(tmp_path)
    assert runner.invoke(cli, ["ingest", "--params", str(p), "--no-progress"]).exit_code == 0
    res = runner.invoke(cli, ["summary", "--params", str(p)])
    assert res.exit_code == 0, res.output
    assert res.output.count("(nothing yet)") == 3  # bands, reformulation, suspect golds
    assert "not built yet: passband publish" in res.output
    # every flag, with the precision measured on the labelled set beside its (here empty) rate
    flags = res.output.split("Flags (", 1)[1].split("Reformulation", 1)[0]
    assert "precision (labelled)" in flags and "unsupported_answer" in flags and "rare_success" in flags
