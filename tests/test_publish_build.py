"""Publish: the folder built from tiny tables loads with 🤗 datasets, the card matches the files, the exports
have each trainer's fields."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from publish_tables import EXPECTED, OTHER, OTHER_ID, OTHER_MEASURED, PRIMARY, PRIMARY_ID, VERIFIER, make_repo

from pipeline.cli import cli
from pipeline.config import ConfigError, load_params
from pipeline.publish import dvc_lock_digest, run
from pipeline.publish.core import COLUMNS, PublishError
from pipeline.schema import schema

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

CONFIGS = ["default", "too_easy", "learnable", "too_hard", "unsolved", "reformulated"]


def publish(root: Path) -> str:
    result = CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    root = make_repo(tmp_path_factory.mktemp("pub") / "repo")
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        "ingest": {"cmd": "passband ingest", "outs": [{"path": "data/problems", "md5": "abc.dir"}]},
        "publish": {"cmd": "passband publish", "outs": [{"path": "data/published", "md5": "old.dir"}]},
    }}))
    return root, publish(root)


def card(folder: Path) -> tuple[dict, str]:
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header), body


def data_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in (folder / "data").rglob("*.parquet")}


def test_publish_prints_counts_and_how_to_load(built):
    _, out = built
    assert "\n  rows: default 11 (train 9, test 2); " in out and "; reformulated 2 (train 2)\n" in out
    assert "not published: 1 problems and 1 reformulations without a measurement" in out
    assert 'datasets.load_dataset("' in out and '"learnable")' in out
    assert "passband push --repo-id" in out


def _load_offline(folders: dict[str, Path], tmp: Path) -> dict:
    """Load every config of every folder with datasets in a fresh process, HF_HUB_OFFLINE=1."""
    script = """
import json, sys, datasets
out = {}
for name, folder in json.loads(sys.argv[1]).items():
    for config in datasets.get_dataset_config_names(folder):
        d = datasets.load_dataset(folder, config)
        out[f"{name}/{config}"] = {s: {"rows": d[s].num_rows, "features": d[s].features.to_dict(),
                                      "first": d[s][0] if d[s].num_rows else None} for s in d}
print(json.dumps(out, default=str))
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp / "hf"),
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    r = subprocess.run([sys.executable, "-c", script, json.dumps({k: str(v) for k, v in folders.items()})],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_config_loads_offline_with_counts_and_features(built, tmp_path):
    root, _ = built
    other = make_repo(tmp_path / "other", policy=OTHER)  # under the other policy: no unsolved item at all
    publish(other)
    loaded = _load_offline({"primary": root / "data/published", "other": other / "data/published"}, tmp_path)

    for config, splits in EXPECTED.items():
        got = loaded[f"primary/{config}"]
        assert {s: v["rows"] for s, v in got.items()} == splits, config
        assert list(got) == list(splits), "train is the first split"
    assert sorted(c.split("/")[1] for c in loaded if c.startswith("primary/")) == sorted(CONFIGS)

    features = loaded["primary/default"]["train"]["features"]
    assert list(features) == [c[0] for c in COLUMNS]
    assert features["prompt"] == {"_type": "List", "feature": {"role": {"dtype": "string", "_type": "Value"},
                                                               "content": {"dtype": "string", "_type": "Value"}}}
    assert features["pass_rate"] == {"dtype": "float64", "_type": "Value"}
    assert features["n"] == {"dtype": "int64", "_type": "Value"}
    per_policy = features["difficulty"]["feature"]
    wanted = {"policy", "policy_id", "pass_rate", "ci_low", "ci_high", "band", "band_confidence", "n", "flag_rates"}
    assert wanted <= set(per_policy)

    # several policies side by side: the difficulty list holds both where both measured the item
    rows = loaded["primary/too_hard"]["train"]
    assert rows["rows"] == 2
    reform = loaded["primary/reformulated"]["train"]["first"]
    assert reform["parent_id"] and reform["method"] in {"fobar", "hint_prefix"} and reform["parent_band"] in {"unsolved"}
    assert reform["license"] == "mit"  # the parent's (gsm8k / math)

    # the other policy as primary: its 5 items, and an empty band config that still loads
    assert {s: v["rows"] for s, v in loaded["other/default"].items()} == {"train": len(OTHER_MEASURED)}
    assert "other/unsolved" not in loaded  # empty: datasets cannot load a config without rows, so it is not declared
    assert "other/learnable" in loaded and "other/too_hard" in loaded
    assert loaded["other/default"]["train"]["first"]["policy_id"] == OTHER_ID
    meta, body = card(other / "data/published")
    assert "unsolved" not in [c["config_name"] for c in meta["configs"]]
    assert "| `unsolved` | 0 | kept items whose primary band is `unsolved` (empty, so not declared" in body
    assert not (other / "data/published/data/unsolved").exists()


def test_rows_carry_every_policy(built):
    root, _ = built
    table = pq.read_table(root / "data/published/data/default/train-00000-of-00001.parquet")
    rows = {r["problem_id"]: r for r in table.to_pylist()}
    both = rows["p_0000000000000005"]
    assert [d["policy_id"] for d in both["difficulty"]] == [OTHER_ID, PRIMARY_ID]  # sorted by name
    assert both["policy_id"] == PRIMARY_ID and both["pass_rate"] == 3 / 8 and both["band"] == "learnable"
    assert next(d for d in both["difficulty"] if d["policy_id"] == OTHER_ID)["pass_rate"] == 6 / 8
    assert both["prompt"][-1]["role"] == "user" and both["prompt"][-1]["content"].startswith(both["question"])
    assert rows["p_0000000000000006"]["flag_rates"] == [{"flag": "rare_success", "rate": 0.125}]
    assert "p_000000000000000c" not in rows  # never measured by the primary policy
    assert all(r["verifier_id"] == VERIFIER for r in rows.values())


def test_card_yaml_parses_and_matches_the_files(built):
    root, _ = built
    folder = root / "data/published"
    meta, body = card(folder)
    assert [c["config_name"] for c in meta["configs"]] == CONFIGS
    assert [c for c in meta["configs"] if c.get("default")] == [meta["configs"][0]]
    assert meta["license"] == ["apache-2.0", "mit"]
    assert "passband" in meta["tags"] and meta["size_categories"] == ["n<1K"]
    on_disk = data_files(folder)
    covered = set()
    for c in meta["configs"]:
        counts = {}
        for entry in c["data_files"]:
            matched = sorted(f for f in on_disk if fnmatch.fnmatch(f, entry["path"]))
            assert matched, entry
            covered.update(matched)
            counts[entry["split"]] = sum(pq.read_metadata(folder / f).num_rows for f in matched)
        assert counts == EXPECTED[c["config_name"]]
    assert covered == on_disk  # every shard belongs to a config, no config points at nothing

    for needle in (PRIMARY_ID, VERIFIER, "HuggingFaceTB/SmolLM2-135M-Instruct", "`fewshot_arith` version 1",
                   '"temperature": 0.8', "zeroshot_boxed v1", OTHER_ID, "pass_rate_histogram.png",
                   'load_dataset("ORG/NAME", "learnable")', "GRPOTrainer", "verl.trainer.main_ppo",
                   "--input_key input --label_key label", "hf://datasets/ORG/NAME/data/default/*.parquet",
                   "licenses/gsm8k.LICENSE.txt", "passband version | `0.1.0`"):
        assert needle in body, needle
    assert "| `learnable` | 1 | 3 | 2 |" in body  # band counts: train, test, reformulated... in split order
    png = (folder / "pass_rate_histogram.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    assert (folder / "licenses/gsm8k.LICENSE.txt").read_text().startswith("MIT License")


def test_build_info_names_the_dvc_lock_digest_without_the_publish_entry(built, tmp_path):
    root, _ = built
    folder = root / "data/published"
    build = json.loads((folder / "build.json").read_text())
    digest = dvc_lock_digest(root)
    assert build["dvc_lock_digest"] == digest and len(digest) == 64
    assert build["passband_version"] == "0.1.0" and build["rows"]["default"] == 11
    assert f"sha256:{digest}" in card(folder)[1]
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    lock["stages"]["publish"]["outs"][0]["md5"] = "new.dir"  # this stage's own entry does not count
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert dvc_lock_digest(tmp_path) == digest
    lock["stages"]["ingest"]["outs"][0]["md5"] = "changed.dir"
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert dvc_lock_digest(tmp_path) != digest


def test_verl_export_has_verls_documented_fields(built):
    root, _ = built
    folder = root / "data/published"
    table = pq.read_table(folder / "exports/verl/learnable/train.parquet")
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    assert len(rows) == EXPECTED["learnable"]["train"]
    source = {r["problem_id"]: r for r in pq.read_table(folder / "data/learnable/train-00000-of-00001.parquet").to_pylist()}
    for i, r in enumerate(rows):
        assert r["data_source"].startswith("passband/") and r["ability"] == "math"
        assert all(set(m) == {"role", "content"} for m in r["prompt"]) and r["prompt"][-1]["role"] == "user"
        assert r["reward_model"]["style"] == "rule"
        info = r["extra_info"]
        assert info["split"] == "train" and info["index"] == i
        orig = source[info["problem_id"]]
        assert r["reward_model"]["ground_truth"] == orig["answer"] == info["answer"]
        assert (info["pass_rate"], info["band"], info["ci_low"], info["n"]) == (
            orig["pass_rate"], orig["band"], orig["ci_low"], orig["n"])
        assert r["prompt"] == orig["prompt"]

    spec = importlib.util.spec_from_file_location("verl_reward", folder / "exports/verl/reward.py")
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    assert reward.compute_score("passband/gsm8k_train", "9 + 14 = 23, so \\boxed{23}", "23") == 1.0
    assert reward.compute_score("passband/gsm8k_train", "so \\boxed{24}", "23") == 0.0
    assert reward.compute_score("passband/math_train", "It is \\boxed{0.75}.", "\\frac{3}{4}") == 1.0


def test_trl_and_openrlhf_exports(built):
    from math_verify import parse

    root, _ = built
    folder = root / "data/published"
    trl = pq.read_table(folder / "exports/trl/default/train.parquet").to_pylist()
    assert len(trl) == EXPECTED["default"]["train"]
    by_id = {r["problem_id"]: r for r in trl}
    assert by_id["p_0000000000000005"]["solution"] == "$23$"
    assert by_id["p_000000000000000a"]["solution"] == "$\\frac{3}{4}$"
    assert all(parse(r["solution"]) for r in trl)  # what trl.rewards.accuracy_reward parses first
    assert all(r["prompt"][-1]["role"] == "user" for r in trl)

    lines = (folder / "exports/openrlhf/learnable/test.jsonl").read_text().splitlines()
    assert len(lines) == EXPECTED["learnable"]["test"]
    rec = json.loads(lines[0])
    assert rec["label"] == "12" and rec["input"][-1]["role"] == "user" and rec["band"] == "learnable"


def test_a_rebuild_replaces_the_folder(tmp_path):
    root = make_repo(tmp_path / "repo")
    publish(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["publish"]["bands"] = ["learnable"]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    publish(root)
    folder = root / "data/published"
    meta, body = card(folder)
    assert [c["config_name"] for c in meta["configs"]] == ["default", "learnable", "reformulated"]
    assert {f.split("/")[1] for f in data_files(folder)} == {"default", "learnable", "reformulated"}
    assert sum(pq.read_metadata(folder / f).num_rows for f in data_files(folder) if "/default/" in f) == 4
    assert "too_easy 3" in body  # the card says what was left out
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".published")]  # no staging left behind


def test_licenses_unknown_kinds_and_mismatched_texts(tmp_path):
    root = make_repo(tmp_path / "unknown", licenses={"gsm8k": "mit"})
    publish(root)
    meta, body = card(root / "data/published")
    assert meta["license"] == ["mit", "unknown"]  # synthetic: not mapped, no LICENSE text: said so, never guessed
    assert "| `synthetic` | synthetic | `unknown` | 4 |" in body
    assert "| `math_train` | math | `mit` | 2 |" in body  # not mapped, but its LICENSE text is MIT

    root = make_repo(tmp_path / "wrong", licenses={"gsm8k": "apache-2.0", "math": "mit"})
    with pytest.raises(ConfigError, match="is the 'mit' license text"):
        run(load_params(root / "params.yaml"), root=root)


def test_unknown_primary_policy_and_band_are_errors(tmp_path):
    root = make_repo(tmp_path / "a", policy="nope")
    with pytest.raises(PublishError, match="primary policy 'nope' has no measurements"):
        run(load_params(root / "params.yaml"), root=root)
    root = make_repo(tmp_path / "b", bands=["learnable", "medium"])
    with pytest.raises(ConfigError, match=r"publish\.bands: unknown band 'medium'; known: learnable, too_easy"):
        load_params(root / "params.yaml")


def test_only_reformulations_re_measured_in_the_kept_bands_are_published(tmp_path):
    root = make_repo(tmp_path / "repo")
    publish(root)
    folder = root / "data/published"
    reform_rows = lambda: sum(  # noqa: E731
        pq.read_metadata(folder / f).num_rows for f in data_files(folder) if "/reformulated/" in f)
    assert reform_rows() == 2  # both children were re-measured in the learnable band (the default)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["publish"]["reformulated_bands"] = ["too_easy"]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    publish(root)
    meta, _ = card(folder)
    assert "reformulated" not in [c["config_name"] for c in meta["configs"]] and reform_rows() == 0


def test_card_gives_each_flag_rate_next_to_its_measured_precision(built):
    from pipeline.annotate.detectors import DETECTORS
    from pipeline.annotate.measured import measured

    root, _ = built
    _, body = card(root / "data/published")
    section = body.split("## Shortcut flags", 1)[1].split("\n## ", 1)[0]
    figures = measured()
    for name in DETECTORS:
        row = next(line for line in section.splitlines() if line.startswith(f"| `{name}` |"))
        precision = figures.get(name, {}).get("precision")
        assert row.split("|")[4].strip() == ("—" if precision is None else f"{precision:.2f}"), row
    assert "`unsupported_answer` marks a success GRPO would reward although its working is wrong" in section


def test_reformulated_rows_name_rung_and_writer_and_the_card_counts_parents_per_method(tmp_path):
    from pipeline.io import read_table, write_table
    from pipeline.schema import schema

    root = make_repo(tmp_path / "repo")
    base = root / "data/reformulated"
    rows = read_table(base / "problems", name="problems").to_pylist()
    for i, r in enumerate(rows):
        r["metadata"] = json.dumps({"rung": f"0.{i + 2}5", "writer": "rules"})
    write_table(schema("problems").from_rows(rows), base / "problems/part-0.parquet", name="problems")
    rejects = [{"stage": "reformulate", "source": "fobar", "source_id": "p_hard_no_child", "reason": "no_rung_in_band",
                "detail": "1: 0/8 unsolved, climbed", "excerpt": None}]
    write_table(schema("rejects").from_rows(rejects), base / "rejects/reformulate.parquet", name="rejects")
    publish(root)
    folder = root / "data/published"
    published = [r for f in data_files(folder) if "/reformulated/" in f for r in pq.read_table(folder / f).to_pylist()]
    assert published and all(r["writer"] == "rules" and r["rung"].startswith("0.") and r["parent_id"] for r in published)
    assert all(r["band"] == "learnable" for r in published)  # its own measured band
    tried = {m: {r["parent_id"] for r in rows if r["method"] == m} for m in {r["method"] for r in rows}}
    tried["fobar"].add("p_hard_no_child")
    kept = {m: {r["parent_id"] for r in published if r["method"] == m} for m in tried}
    _, body = card(folder)
    assert "## Reformulations" in body
    for m in tried:
        share = f"{100 * len(kept[m]) / len(tried[m]):.0f} %"
        assert f"| `{m}` | {len(tried[m])} | {len(kept[m])} | {share} |" in body, m
    everyone = set().union(*tried.values())
    assert f"| `(any)` | {len(everyone)} | {len(set().union(*kept.values()))} |" in body


def test_published_columns_follow_the_declared_schemas():
    from pipeline.publish.core import SCHEMA

    declared = {**{c.name: c for c in schema("problems").columns}, **{c.name: c for c in schema("difficulty").columns}}
    declared["reference_solution"] = next(c for c in schema("problems").columns if c.name == "solution")
    shared = [f for f in SCHEMA if f.name in declared and f.name != "flag_rates"]
    assert len(shared) >= 18
    for f in shared:
        c = declared[f.name]
        assert (f.type, f.nullable) == (c.arrow_type, c.nullable), f.name


def test_card_shows_the_band_transitions_to_other_policies(built):
    root, _ = built
    table = pq.read_table(root / "data/published/data/default/train-00000-of-00001.parquet").to_pylist()
    pairs = []
    for r in table:
        bands = {d["policy_id"]: d["band"] for d in r["difficulty"]}
        if PRIMARY_ID in bands and OTHER_ID in bands:
            pairs.append((bands[PRIMARY_ID], bands[OTHER_ID]))
    assert pairs
    _, body = card(root / "data/published")
    assert f"Band transitions `{PRIMARY}` (rows) -> `{OTHER}` (columns):" in body
    bands = ("too_easy", "learnable", "too_hard", "unsolved")
    for f in bands:
        row = f"| `{f}` | " + " | ".join(str(pairs.count((f, t))) for t in bands) + " |"
        assert row in body, (row, body)
