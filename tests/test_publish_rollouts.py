"""Publish's rollouts config: loads with 🤗 datasets, holds the counted completions of every published item with
their verdicts, answers and flags, and the card's code block selects exactly the correct unflagged ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from publish_tables import K, make_repo
from rollout_tables import EXTRA, add_rollouts

from pipeline.cli import cli
from pipeline.io import read_table

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

BOUND = 6  # publish.max_rollouts_per_item here: below K, so the bound shows


def publish(root: Path) -> None:
    result = CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = add_rollouts(make_repo(tmp_path_factory.mktemp("ro") / "repo", max_rollouts_per_item=BOUND))
    publish(root)
    return root / "data/published"


def expected(folder: Path) -> dict[tuple[str, str], dict]:
    """From the tables themselves: per published (problem, policy), the counted samples up to the bound."""
    root = folder.parent.parent
    published = {}
    for config in ("default", "reformulated"):
        for f in (folder / "data" / config).glob("*.parquet"):
            for r in pq.read_table(f).to_pylist():
                published[r["problem_id"]] = {**r, "split": f.name.split("-")[0]}
    tables = {}
    for name in ("rollouts", "verdicts", "flags", "difficulty"):
        tables[name] = [*read_table(root / "data" / name, name=name).to_pylist(),
                        *read_table(root / "data/reformulated" / name, name=name).to_pylist()]
    verdict = {(v["problem_id"], v["policy_id"], v["sample_idx"], v["verifier_id"]): v for v in tables["verdicts"]}
    flags: dict[tuple, list[str]] = {}
    for f in tables["flags"]:
        flags.setdefault((f["problem_id"], f["policy_id"], f["sample_idx"]), []).append(f["flag"])
    out = {}
    for d in tables["difficulty"]:
        if d["problem_id"] not in published:
            continue
        samples = sorted((r for r in tables["rollouts"] if (r["problem_id"], r["policy_id"]) == (d["problem_id"], d["policy_id"])
                          and r["sample_idx"] < min(d["n"], BOUND)), key=lambda r: r["sample_idx"])
        keys = [(d["problem_id"], d["policy_id"], r["sample_idx"]) for r in samples]
        out[(d["problem_id"], d["policy_id"])] = {
            "problem": published[d["problem_id"]]["question"],
            "generations": [r["completion"] for r in samples],
            "verdicts": [verdict[(*k, d["verifier_id"])]["status"] for k in keys],
            "extracted_answers": [verdict[(*k, d["verifier_id"])]["extracted"] for k in keys],
            "flags": [sorted(flags.get(k, [])) for k in keys],
            "finish_reasons": [r["finish_reason"] for r in samples],
            "n_rollouts": d["n"],
            "_split": published[d["problem_id"]]["split"],
        }
    return out


def card_block(folder: Path) -> str:
    text = (folder / "README.md").read_text()
    section = text.split("## Rollouts", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def run_offline(script: str, folder: Path, tmp: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp / "hf"),
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    r = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


LOAD = """
import json, sys, datasets
folder = sys.argv[1]
d = datasets.load_dataset(folder, "rollouts")
print(json.dumps({"features": d["train"].features.to_dict(), "rows": {s: d[s].to_list() for s in d}}))
"""


def test_load_dataset_returns_the_counted_generations_with_verdicts_and_flags(folder, tmp_path):
    got = run_offline(LOAD, folder, tmp_path)
    want = expected(folder)
    rows = [r for split in got["rows"].values() for r in split]
    assert {(r["problem_id"], r["policy_id"]) for r in rows} == set(want)
    assert len(rows) == len(want) == 11 + 5 + 2  # published main items, 5 of them also by the other policy, reformulated
    for r in rows:
        w = want[(r["problem_id"], r["policy_id"])]
        for key, value in w.items():
            if key != "_split":
                assert r[key] == value, (r["problem_id"], key)
        assert len(r["generations"]) == min(K, BOUND) and r["n_rollouts"] == K  # bounded; the extra samples left out
        assert r["correctness_math_verify"] == [v == "correct" for v in r["verdicts"]]
        assert r["correctness_count"] == sum(r["correctness_math_verify"])
    # OpenR1-Math-220k's types for the columns it shares
    f = got["features"]
    assert f["generations"] == {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"}
    assert f["correctness_math_verify"]["feature"]["dtype"] == "bool" and f["correctness_count"]["dtype"] == "int64"
    assert f["finish_reasons"]["feature"]["dtype"] == "string" and f["problem"]["dtype"] == "string"
    # rows split as their items are: the test items' rollouts are in the test split
    assert {s: {(r["problem_id"], r["policy_id"]) for r in rs} for s, rs in got["rows"].items()} == {
        s: {k for k, w in want.items() if w["_split"] == s} for s in ("train", "test")}
    assert EXTRA and all(len(r["flags"]) == len(r["generations"]) for r in rows)


def test_the_cards_code_block_selects_the_correct_unflagged_generations(folder, tmp_path):
    code = card_block(folder).replace('"ORG/NAME"', "sys.argv[1]")
    got = run_offline("import sys, json\n" + code + "\nprint(json.dumps(sft.to_list()))", folder, tmp_path)
    # TRL's prompt-completion format; a rare success is kept (a risk for GRPO, not a fault of the text)
    clean = [(w["_split"], {"prompt": w["problem"], "completion": g}) for w in expected(folder).values()
             for g, v, f in zip(w["generations"], w["verdicts"], w["flags"], strict=True)
             if v == "correct" and not set(f) - {"rare_success"}]
    want = [c for split, c in clean if split == "train"]  # the block loads the train split
    key = lambda d: (d["prompt"], d["completion"])  # noqa: E731
    assert Counter(map(key, got)) == Counter(map(key, want))
    assert len(want) > 0 and any(f for w in expected(folder).values() for f in w["flags"])  # the filter bites

    header = yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])
    config = next(c for c in header["configs"] if c["config_name"] == "rollouts")
    assert [e["split"] for e in config["data_files"]] == ["train", "test"]
    build = json.loads((folder / "build.json").read_text())["rollouts"]
    assert build["rows"] == {"train": 16, "test": 2} and build["max_rollouts_per_item"] == BOUND
    section = (folder / "README.md").read_text().split("## Rollouts", 1)[1]
    assert f"Size: 18 rows (train 16, test 2), {18 * BOUND} generations, " in section
    unflagged = sum(v == "correct" and not f for w in expected(folder).values()
                    for v, f in zip(w["verdicts"], w["flags"], strict=True))
    assert f"correct of which {build['correct_unflagged']}" in section and build["correct_unflagged"] == unflagged
    assert len(clean) > len(want)


def test_off_and_empty(tmp_path):
    off = make_repo(tmp_path / "off", rollouts=False)
    add_rollouts(off)
    publish(off)
    assert not (off / "data/published/data/rollouts").exists()
    assert "Not built: `publish.rollouts` is off." in (off / "data/published/README.md").read_text()
    empty = make_repo(tmp_path / "empty")  # no rollouts at all: no config declared
    publish(empty)
    text = (empty / "data/published/README.md").read_text()
    assert "Not built: no rollouts were found" in text and "config_name: rollouts" not in text


def test_the_sft_columns_and_trls_sft_trainer_takes_them(folder, embedded_model_dir, tmp_path):
    """``prompt`` is the text the policy was given, ``messages`` the conversation of the row's first correct generation
    no flag but rare_success fired on, ``is_reasoning_complete`` per generation; TRL's SFTTrainer builds its dataset
    from ``messages`` and from the card's prompt-completion rows (no training)."""
    pytest.importorskip("trl")
    from datasets import Dataset, load_dataset
    from trl import SFTConfig, SFTTrainer

    rows = load_dataset(str(folder), "rollouts", split="train", cache_dir=str(tmp_path / "cache"))
    want = expected(folder)
    for r in rows:
        w = want[(r["problem_id"], r["policy_id"])]
        clean = [g for g, v, f in zip(w["generations"], w["verdicts"], w["flags"], strict=True)
                 if v == "correct" and not set(f) - {"rare_success"}]
        assert r["messages"] == (None if not clean else [{"role": "user", "content": r["problem"]},
                                                          {"role": "assistant", "content": clean[0]}])
        assert r["is_reasoning_complete"] == [f == "stop" for f in r["finish_reasons"]]  # no thinking blocks here
        assert r["prompt"] is None or r["problem"] in r["prompt"]
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, use_cpu=True, report_to="none",
                     save_strategy="no", disable_tqdm=True, max_length=64)
    conversations = rows.filter(lambda r: r["messages"] is not None).select_columns(["messages"])
    trainer = SFTTrainer(model=str(embedded_model_dir), args=args, train_dataset=conversations)
    assert len(trainer.train_dataset) == len(conversations) > 0 and "input_ids" in trainer.train_dataset.column_names
    pairs = Dataset.from_list([{"prompt": r["problem"], "completion": m[1]["content"]}
                               for r in rows if (m := r["messages"]) is not None])
    trainer = SFTTrainer(model=trainer.model, processing_class=trainer.processing_class, args=args, train_dataset=pairs)
    first = trainer.train_dataset[0]  # the prompt-completion format: the loss is on the completion's tokens only
    assert first["labels"][0] == -100 and any(t != -100 for t in first["labels"])


def test_the_card_lists_the_rollouts_config_with_a_readable_size(folder):
    from pipeline.publish.card import size_text

    assert [size_text(n) for n in (820, 24_310, 1_300_000, 56_000_000, 2_100_000_000)] == [
        "820 B", "24 kB", "1.3 MB", "56 MB", "2.1 GB"]
    text = (folder / "README.md").read_text()
    configs = text.split("## Configs", 1)[1].split("##", 1)[0]
    assert "| `rollouts` | 18 |" in configs
    build = json.loads((folder / "build.json").read_text())["rollouts"]
    assert f"{size_text(build['bytes'])} of Parquet" in text and "0.0 MB" not in text
