"""Hostile and careless input at passband's outputs: what it copies out, replaces, names, resolves and shows.

A LICENSE beside a source that is a link (or a hard link, or huge) is refused, never copied; a user's own
DuckDB file at ``paths.catalog`` is refused, passband's own catalog replaced; every name params.yaml declares
matches one pattern, and a name that reaches a writer anyway cannot lead out of its folder; each configured
path is checked as the system resolves it; ``passband sql --format csv`` writes nested values; the dataset
card shows every value literally.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from publish_tables import PRIMARY, make_repo
from test_hostile_paths import one_line_error, run

from pipeline.catalog import VIEW_COMMENT, build_catalog, catalog_names, catalog_proof
from pipeline.cli import cli
from pipeline.commands.catalog import as_text_columns
from pipeline.config import NAME_PATTERN, ConfigError, load_params, parse_params
from pipeline.errors import PassbandError
from pipeline.io import path_in, read_plain_file, read_table, write_table
from pipeline.ownership import NotOwnedError
from pipeline.publish import card as card_mod
from pipeline.publish.provenance import LICENSE_MAX_BYTES, source_licenses
from pipeline.rollout.prompts import load_template
from pipeline.schema import schema

SECRET = b"-----BEGIN PRIVATE KEY-----\nnot for the Hub\n"


def edit_params(root: Path, edit) -> None:
    p = yaml.safe_load((root / "params.yaml").read_text())
    edit(p)
    (root / "params.yaml").write_text(yaml.safe_dump(p))


def base(**extra) -> dict:
    return {"ingest": {"sources": [{"name": "s", "kind": "synthetic"}]}, "policies": {"p": {}},
            "rollout": {"policies": ["p"]}, **extra}


@pytest.fixture()
def pub(tmp_path) -> Path:
    return make_repo(tmp_path / "repo")


# --- what publish copies out: a source's LICENSE ---------------------------------------------------

def test_a_symlinked_license_is_refused_and_the_secret_never_copied(pub, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    (pub / "src/gsm8k/LICENSE").unlink()
    (pub / "src/gsm8k/LICENSE").symlink_to(secret)
    one_line_error(run(pub, "publish"), "src/gsm8k/LICENSE", "symbolic link", str(secret))
    published = pub / "data/published"
    assert not published.exists() or not any(SECRET in f.read_bytes() for f in published.rglob("*") if f.is_file())
    assert secret.read_bytes() == SECRET


def test_a_hard_linked_an_oversized_or_a_special_license_is_refused(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (tmp_path / "secret").write_bytes(SECRET)
    os.link(tmp_path / "secret", folder / "hard")
    (folder / "big").write_bytes(b"x" * (LICENSE_MAX_BYTES + 1))
    os.mkfifo(folder / "fifo")  # opened non-blocking: never hangs
    for name, needle in [("hard", "hard link"), ("big", f"over {LICENSE_MAX_BYTES} bytes"), ("fifo", "not a regular file")]:
        with pytest.raises(PassbandError, match=needle):
            read_plain_file(folder / name, max_bytes=LICENSE_MAX_BYTES, what="a license", fix="fix it")
    (folder / "ok").write_bytes(b"MIT License\n")
    assert read_plain_file(folder / "ok", max_bytes=LICENSE_MAX_BYTES, what="a license", fix="-") == b"MIT License\n"


def test_the_license_text_is_read_once_and_published_from_those_bytes(pub):
    params = load_params(pub / "params.yaml")
    found = {s.source: s for s in source_licenses(params, root=pub)}
    assert found["gsm8k_train"].text.startswith(b"MIT License") and found["synthetic"].text is None
    assert run(pub, "publish").exit_code == 0
    assert (pub / "data/published/licenses/gsm8k.LICENSE.txt").read_bytes() == found["gsm8k_train"].text


# --- what catalog replaces ---------------------------------------------------------------------------

@pytest.fixture()
def cat(tmp_path) -> Path:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(base(paths={"catalog": "analysis.duckdb"})))
    return tmp_path


def user_db(path: Path, *statements: str) -> bytes:
    con = duckdb.connect(str(path))
    for s in statements:
        con.execute(s)
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("statements", [
    ["CREATE TABLE results AS SELECT 42 AS answer"],
    ["CREATE VIEW mine AS SELECT 1 AS x"],  # a view of the user's, named as none of passband's
    ["CREATE MACRO twice(x) AS 2 * x"],
])
def test_a_users_duckdb_file_is_refused_and_left_intact(cat, statements):
    before = user_db(cat / "analysis.duckdb", *statements)
    one_line_error(run(cat, "catalog"), "analysis.duckdb", "paths.catalog", "passband did not write it")
    assert (cat / "analysis.duckdb").read_bytes() == before


def test_a_file_that_is_not_duckdb_a_link_or_a_folder_is_refused(cat, tmp_path):
    (cat / "analysis.duckdb").write_text("my notes\n")
    one_line_error(run(cat, "catalog"), "passband did not write it")
    assert (cat / "analysis.duckdb").read_text() == "my notes\n"
    (cat / "analysis.duckdb").unlink()
    (cat / "analysis.duckdb").symlink_to(cat / "elsewhere.duckdb")
    one_line_error(run(cat, "catalog"), "symbolic link")
    assert not (cat / "elsewhere.duckdb").exists()
    (cat / "analysis.duckdb").unlink()
    (cat / "analysis.duckdb").mkdir()
    one_line_error(run(cat, "catalog"), "is not a file")


def test_passbands_own_catalog_is_replaced_and_a_view_added_by_the_user_makes_it_theirs(cat):
    params = load_params(cat / "params.yaml")
    path = build_catalog(params, root=cat)
    assert catalog_proof(path)
    con = duckdb.connect(str(path), read_only=True)
    comments = {c for (c,) in con.execute("SELECT comment FROM duckdb_views() WHERE NOT internal").fetchall()}
    con.close()
    assert comments == {VIEW_COMMENT}
    assert build_catalog(params, root=cat) == path  # its own file: rebuilt
    user_db(path, "CREATE VIEW my_summary AS SELECT 1 AS x")
    with pytest.raises(NotOwnedError, match="did not write it"):
        build_catalog(params, root=cat)


def test_a_file_of_views_with_passbands_names_but_not_its_marker_is_the_users(cat):
    params = load_params(cat / "params.yaml")
    names = sorted(catalog_names(params))
    user_db(cat / "analysis.duckdb", *(f"CREATE VIEW {n} AS SELECT 1 AS x" for n in names))  # no comments
    before = (cat / "analysis.duckdb").read_bytes()
    assert not catalog_proof(cat / "analysis.duckdb")
    one_line_error(run(cat, "catalog"), "did not write it")
    assert (cat / "analysis.duckdb").read_bytes() == before
    user_db(cat / "analysis.duckdb", f"COMMENT ON VIEW {names[0]} IS {VIEW_COMMENT!r}")  # one marked view is not all
    assert not catalog_proof(cat / "analysis.duckdb")


def test_an_empty_file_is_replaced(cat):
    (cat / "analysis.duckdb").touch()
    assert run(cat, "catalog").exit_code == 0 and (cat / "analysis.duckdb").stat().st_size > 0


# --- names ---------------------------------------------------------------------------------------------

BAD_NAMES = ["a/../../../../tmp/x/pwned", "..", ".", "", "a/b", "-rf", "a\nb", "a b", "x" * 101, "é"]


@pytest.mark.parametrize("bad", BAD_NAMES)
@pytest.mark.parametrize("where", ["policy", "source", "prompt", "drift", "rollout.sources", "engine"])
def test_every_name_is_checked_by_one_pattern_where_params_load(bad, where):
    raw = base()
    if where == "policy":
        raw["policies"][bad] = {}
    elif where == "source":
        raw["ingest"]["sources"][0]["name"] = bad
    elif where == "prompt":
        raw["policies"]["p"]["prompt"] = bad
    elif where == "drift":
        raw["drift"] = {"pairs": [["p", bad]]}
    elif where == "rollout.sources":
        raw["rollout"]["sources"] = [bad]
    else:
        raw["policies"]["p"]["engine"] = bad
    with pytest.raises(ConfigError, match="is not a valid name") as exc:
        parse_params(raw)
    assert "\n" not in str(exc.value) and repr(bad)[:60] in str(exc.value)


@pytest.mark.parametrize("good", ["p", "smollm2-135m-3shot", "gsm8k_train", "qwen2.5-math", "A1", "x" * 100])
def test_names_people_use_are_accepted(good):
    assert good in parse_params(base(policies={good: {}}, rollout={"policies": [good]})).policies
    assert NAME_PATTERN.fullmatch(good)


@pytest.mark.parametrize("rel", ["a/../../x.png", "../x", "/etc/x", "a//b", "a/./b", "drift-a/../../../x.png", "x\0"])
def test_path_in_never_leads_out_of_its_folder(tmp_path, rel):
    with pytest.raises(PassbandError, match="not a plain relative file name"):
        path_in(tmp_path, rel)
    assert path_in(tmp_path, "drift-a-b.png") == tmp_path / "drift-a-b.png"


def test_a_template_name_is_never_a_path(tmp_path):
    (tmp_path / "evil.yaml").write_text("name: evil\n")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="unknown prompt template"):
        load_template("../evil", directory=tmp_path / "sub")


def test_drift_cannot_write_outside_even_with_a_name_already_in_the_policies_table(pub):
    """A policies table written before names were checked (or by hand) still names a hostile policy."""
    pols = read_table(pub / "data/policies", name="policies")
    names = pols["name"].to_pylist()
    bad = "a/../../../../pwned"
    pols = pols.set_column(pols.schema.get_field_index("name"), "name",
                           pa.array([bad if n == names[1] else n for n in names], pa.string()))
    write_table(schema("policies").from_rows(pols.to_pylist()), pub / "data/policies/part-0.parquet", name="policies")
    before = sorted(p.name for p in pub.parent.iterdir())
    res = CliRunner().invoke(cli, ["drift", "--from", names[0], "--to", bad, "--params", str(pub / "params.yaml")])
    one_line_error(res, "not a plain relative file name")
    assert sorted(p.name for p in pub.parent.iterdir()) == before and not list(pub.rglob("*pwned*"))


# --- paths, resolved ----------------------------------------------------------------------------------

def project(tmp_path: Path, **paths) -> Path:
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    (root / "params.yaml").write_text(yaml.safe_dump(base(paths=paths)))
    return root


def test_a_dotdot_after_a_link_is_refused_with_where_it_really_leads(tmp_path):
    (tmp_path / "elsewhere/sub").mkdir(parents=True)
    root = project(tmp_path, published="data/lnk/../pub")
    (root / "data/lnk").symlink_to(tmp_path / "elsewhere/sub", target_is_directory=True)
    with pytest.raises(ConfigError, match=r"goes through a symbolic link before '\.\.'") as exc:
        load_params(root / "params.yaml")
    assert str(tmp_path / "elsewhere/pub") in str(exc.value)
    one_line_error(run(root, "publish"), "paths.published")
    assert not (tmp_path / "elsewhere/pub").exists()


def test_two_paths_that_are_one_folder_through_a_link_are_refused(tmp_path):
    root = project(tmp_path, plots="data/pics")
    (root / "data/problems").mkdir()
    (root / "data/pics").symlink_to("problems", target_is_directory=True)
    with pytest.raises(ConfigError, match=r"paths.plots .* is the same folder as paths.problems"):
        load_params(root / "params.yaml")


def test_a_link_to_a_bigger_disk_is_still_allowed(tmp_path):
    """The data folder as a link: every path leads where its name says, through the user's own link."""
    disk = tmp_path / "disk"
    disk.mkdir()
    root = tmp_path / "proj"
    root.mkdir()
    (root / "data").symlink_to(disk, target_is_directory=True)
    (root / "params.yaml").write_text(yaml.safe_dump(base()))
    assert load_params(root / "params.yaml").paths.published == "data/published"
    (root / "lnk").symlink_to(tmp_path, target_is_directory=True)  # a link out to the project's parent
    edit_params(root, lambda p: p.setdefault("paths", {}).__setitem__("models", "lnk"))
    with pytest.raises(ConfigError, match="contains the project folder"):
        load_params(root / "params.yaml")


# --- what sql and the card show --------------------------------------------------------------------------

def test_sql_csv_writes_nested_values_as_json_and_bytes_as_hex(pub):
    res = run(pub, "sql", "SELECT [1,2] AS l, {'a': 'x', 'b': [3]} AS s, MAP {'k': 1} AS m, 'ab'::BLOB AS b, "
                          "[1, 2]::INT[2] AS arr", "--format", "csv")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["l,s,m,b,arr", '"[1, 2]","{""a"": ""x"", ""b"": [3]}","{""k"": 1}",6162,"[1, 2]"']
    res = run(pub, "sql", "SELECT ['ab'::BLOB] AS l, [1] AS k", "--format", "json")
    assert res.exit_code == 0 and res.output.strip() == '[{"l":"[\\"6162\\"]","k":[1]}]', res.output


def test_sql_a_type_polars_cannot_take_is_one_line(pub):
    one_line_error(run(pub, "sql", "SELECT INTERVAL 1 DAY AS i"), "cannot show", "CAST")


def test_as_text_columns_leaves_flat_columns_alone():
    import polars as pl

    df = pl.DataFrame({"a": [1, None], "t": ["x", "y"], "l": [[1], None]})
    out = as_text_columns(df, nested=True)
    assert out["a"].to_list() == [1, None] and out["t"].to_list() == ["x", "y"] and out["l"].to_list() == ["[1]", None]
    assert as_text_columns(df, nested=False)["l"].to_list() == [[1], None]


@pytest.mark.parametrize("value", ["Mine\n<script>alert(1)</script>", "tab\there", "a" * 201, "", "<b>bold</b>"])
def test_a_card_title_is_one_line_of_text(value):
    with pytest.raises(ConfigError, match=r"publish\.pretty_name"):
        parse_params(base(publish={"pretty_name": value}))


@pytest.mark.parametrize("key, value", [("licenses", {"gsm8k": "mit\n<b>x</b>"}), ("licenses", {"gsm8k": "MIT License"}),
                                        ("repo_id", 'a/b"); import os; ("'), ("repo_id", "a/b/c"), ("tags", ["a\nb"])])
def test_card_ids_and_tags_are_checked(key, value):
    with pytest.raises(ConfigError, match=f"publish.{key}"):
        parse_params(base(publish={key: value}))


def test_every_card_value_is_shown_literally():
    code = card_mod.md_code("a\rb`c``d<script>")
    assert code == "```a\\rb`c``d<script>```"  # a fence longer than any run inside: the span cannot be closed
    assert card_mod.md_code("`x`") == "`` `x` ``"
    assert card_mod.md_text("Mine <b>*x*</b> [l](javascript:1)") == "Mine \\<b\\>\\*x\\*\\</b\\> \\[l\\](javascript:1)"
    row = card_mod.md_table(["a"], [["x|y\r\nz\x00"]]).splitlines()[-1]
    assert row == "| x\\|y\\r\\nz\\u0000 |"


def test_a_system_prompt_with_a_carriage_return_stays_in_its_cell(pub):
    for shard in pub.glob("data/**/policies/part-0.parquet"):  # each table set records the policy
        pols = read_table(shard.parent, name="policies").to_pylist()
        primary = next(p for p in pols if p["name"] == PRIMARY)
        primary["system_prompt"] = "Be brief.\rIgnore that`` and <img src=x onerror=alert(1)>\n| injected | row |"
        write_table(schema("policies").from_rows(pols), shard, name="policies")
    assert run(pub, "publish").exit_code == 0
    readme = (pub / "data/published/README.md").read_bytes().decode()
    line = next(ln for ln in readme.split("\n") if ln.startswith("| system prompt |"))
    assert "\r" not in readme and line.count(" | ") == 1 and line.endswith("``` |")
    assert "\\r" in line and "<img" in line.split("```")[1]  # inside the code span: text, not HTML


# --- parameters with no bound ------------------------------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def test_count_parameters_are_bounded(tmp_path):
    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    for value in (10**9, "1e9", 4097):
        raw["rollout"]["k"] = value
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
        with pytest.raises(ConfigError, match=r"rollout\.k"):
            load_params(tmp_path / "params.yaml")
    raw["rollout"]["k"] = 4096
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    assert load_params(tmp_path / "params.yaml").rollout.k == 4096


@pytest.mark.timing
def test_an_alias_bomb_or_a_huge_params_file_is_refused_before_it_is_parsed(tmp_path):
    import resource
    import time

    base_text = (Path(__file__).resolve().parents[1] / "params.yaml").read_text()
    path = tmp_path / "params.yaml"
    path.write_text(base_text + "\nbomb:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()))
    assert len(BOMB) < 1024  # 9^9 = 387 million values once expanded
    cpu, peak = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match="aliases expand to over 100,000 values"):
        load_params(path)
    assert time.process_time() - cpu < 1 and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 50_000
    one_line_error(run(tmp_path, "doctor"), "aliases expand")
    path.write_text(base_text + "\n# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="over the 1,048,576 a params file may hold"):
        load_params(path)
    # anchors that repeat a little are fine: a shared sampling block
    raw = yaml.safe_load(base_text)
    text = base_text.replace("  smollm2-135m-3shot:\n    sampling: {max_tokens: 48, stop: [\"\\nQ:\", \"\\n\\n\"]}",
                             "  smollm2-135m-3shot:\n    sampling: &s {max_tokens: 48, stop: [\"\\nQ:\", \"\\n\\n\"]}\n"
                             "  other:\n    sampling: *s")
    assert text != base_text
    path.write_text(text)
    params = load_params(path)
    assert params.policies["other"].sampling == params.policies["smollm2-135m-3shot"].sampling == \
        load_params(Path(__file__).resolve().parents[1] / "params.yaml").policies[next(iter(raw["policies"]))].sampling
