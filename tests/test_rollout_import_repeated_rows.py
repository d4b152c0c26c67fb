"""A dataset repeated N times (the Qwen2.5-Math evaluation harness's ``amc23x8``: each problem on 8 rows, one
completion each): the ``qwen_harness`` layout adds each row's samples to its problem (``repeated_rows``, on by
default); with it off a second row is a ``duplicate`` reject. Then three real 7B checkpoints' AMC23x8 dumps, fetched
from a public repository (docs/import.md, "Tutorial: three 7B checkpoints on AMC23, 8 samples a problem")."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from shared_data import fetched_path

from pipeline.cli import cli
from pipeline.io import read_table, write_table
from pipeline.keys import problem_id
from pipeline.schema import schema

QUESTIONS = ["What is 2 + 3?", "What is 4 + 4?"]
GOLDS = ["5", "8"]


def _run(root: Path, rows: list[dict], options: dict | None = None) -> str:
    problems = [{"problem_id": problem_id(q), "source": "synthetic", "source_id": f"s:{i}", "question": q,
                 "answer": GOLDS[i], "n_duplicates": 0} for i, q in enumerate(QUESTIONS)]
    write_table(schema("problems").from_rows(problems), root / "data/problems/part-0.parquet", name="problems")
    (root / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dump = {"path": "d.jsonl", "layout": "qwen_harness", **({"options": options} if options else {})}
    params = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
              "policies": {"imp": {"model": "org/M-7B", "revision": "r1", "prompt": "qwen25_math_cot", "dump": dump}},
              "rollout": {"policies": ["imp"], "k": 8}, "verify": {"workers": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    out = ""
    for stage in ("rollout", "verify", "annotate"):
        res = CliRunner().invoke(cli, [stage, "--params", str(root / "params.yaml"), "--no-progress"]
                                 + (["--no-plots"] if stage == "annotate" else []))
        assert res.exit_code == 0, res.output
        out += res.output
    return out


def _x3(answers: list[list[str]]) -> list[dict]:
    """The harness's rows for QUESTIONS repeated 3 times: idx runs on, one completion a row."""
    return [{"idx": rep * len(QUESTIONS) + i, "question": q, "gt": GOLDS[i], "code": [f"so \\boxed{{{answers[i][rep]}}}"],
             "score": [answers[i][rep] == GOLDS[i]]} for rep in range(3) for i, q in enumerate(QUESTIONS)]


def test_a_repeated_dataset_adds_each_rows_samples_to_its_problem(tmp_path):
    out = _run(tmp_path, _x3([["5", "5", "6"], ["1", "8", "2"]]))
    assert "6 rows read -> 6 samples of 2 problems; rejects: none" in out, out
    diff = {r["problem_id"]: (r["n"], r["n_correct"]) for r in read_table(tmp_path / "data/difficulty",
                                                                           name="difficulty").to_pylist()}
    assert diff == {problem_id(QUESTIONS[0]): (3, 2), problem_id(QUESTIONS[1]): (3, 1)}
    roll = read_table(tmp_path / "data/rollouts", name="rollouts").to_pylist()
    # samples numbered in file order within each problem
    first = sorted((r["sample_idx"], r["completion"]) for r in roll if r["problem_id"] == problem_id(QUESTIONS[0]))
    assert first == [(0, "so \\boxed{5}"), (1, "so \\boxed{5}"), (2, "so \\boxed{6}")]


def test_without_repeated_rows_a_second_row_is_a_duplicate_reject(tmp_path):
    out = _run(tmp_path, _x3([["5", "5", "6"], ["1", "8", "2"]]), {"repeated_rows": False})
    assert "6 rows read -> 2 samples of 2 problems" in out, out
    rejects = read_table(tmp_path / "data/rollouts/rejects", name="rejects").to_pylist()
    assert [r["reason"] for r in rejects] == ["duplicate"] * 4
    assert "options.repeated_rows" in rejects[0]["detail"]


# --- three real 7B checkpoints, AMC23 repeated 8 times ------------------------------------------------------------

UPSTREAM = "https://github.com/XinghanLi66/rl-sft (commit c981ccd), one-shot-em/results/"
DUMPS = {  # policy -> (the file's name in ../shared/data/real_outputs, its upstream path under UPSTREAM)
    "qwen25-math-7b": ("rl-sft__7B-eval-amc23x8-temp0.6__amc23x8.jsonl",
                       "7B-eval-amc23x8-temp0.6/amc23x8/test_qwen25-math-cot_-1_seed0_t0.6_s0_e-1.jsonl"),
    "pi1-modify": ("rl-sft__7B-eval-pi1-modify__amc23x8-t0.6.jsonl",
                   "7B-eval-pi1-modify/amc23x8-t0.6/test_qwen25-math-cot_-1_seed0_t0.6_s0_e-1.jsonl"),
    "offline-grpo-step20": ("rl-sft__7B-eval-offRLVR-20__amc23x8.jsonl",
                            "7B-eval-offRLVR-20/amc23x8/test_qwen25-math-cot_-1_seed0_t0.6_s0_e-1.jsonl"),
}
# Every completion on which the harness's grader and passband disagree, read by hand (2 Dec 2026): policy, the
# question's start, passband's status, and the reader's grade.
READ = {
    ("offline-grpo-step20", "Jackson's paintbrush"): ("incorrect", "incorrect"),  # boxed 162500 (mm^2) for 1625
    # cm^2: the harness also accepts the key times 100
    ("offline-grpo-step20", "You are playing a game."): ("no_answer", "no_answer"),  # answers ten other problems;
    # the last sentence's "a minimum of 4 turns" is no stated answer
    ("offline-grpo-step20", "A digital display shows"): ("no_answer", "no_answer"),  # the count is only a program's
    # output before "Reach max function call limit."; the harness reads the output
}


def test_three_real_checkpoints_amc23_repeated_eight_times(tmp_path):
    files = {name: fetched_path(file, UPSTREAM + path) for name, (file, path) in DUMPS.items()}
    sampling = {"temperature": 0.6, "top_p": 1.0, "max_tokens": 3072}
    policies = {name: {"model": f"declared/{name}", "revision": "as-fetched", "prompt": "qwen25_math_cot",
                       "sampling": sampling, "dump": {"path": str(path), "layout": "qwen_harness"}}
                for name, path in files.items()}
    raw = {"ingest": {"sources": [{"name": "amc23", "kind": "jsonl", "path": str(files["qwen25-math-7b"]),
                                   "split": "test", "mapping": {"question": "question", "answer": "gt"}}]},
           "policies": policies, "rollout": {"policies": list(policies), "k": 8}, "verify": {"workers": 2}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    outs = []
    for stage in ("ingest", "rollout", "verify", "annotate"):
        res = CliRunner().invoke(cli, [stage, "--params", str(tmp_path / "params.yaml"), "--no-progress"]
                                 + (["--no-plots"] if stage == "annotate" else []))
        assert res.exit_code == 0, res.output
        outs.append(res.output)
    assert "320 rows read -> 40 problems, 0 rejects, 280 duplicates" in outs[0], outs[0]
    assert outs[1].count("320 rows read -> 320 samples of 40 problems; rejects: none") == 3, outs[1]
    names = {r["policy_id"]: r["name"] for r in read_table(tmp_path / "data/policies", name="policies").to_pylist()}
    questions = {r["problem_id"]: r["question"] for r in read_table(tmp_path / "data/problems",
                                                                    name="problems").to_pylist()}
    verdicts = read_table(tmp_path / "data/verdicts", name="verdicts").to_pylist()
    diff = read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
    assert len(diff) == 120 and all(d["n"] == 8 for d in diff)
    counted = {}
    for v in verdicts:
        key = (v["problem_id"], v["policy_id"])
        counted[key] = counted.get(key, 0) + (v["status"] == "correct")
    assert all(d["n_correct"] == counted[(d["problem_id"], d["policy_id"])] for d in diff)
    status = {(v["problem_id"], v["policy_id"], v["sample_idx"]): v["status"] for v in verdicts}
    up = read_table(tmp_path / "data/rollouts/upstream", name="upstream").to_pylist()
    assert len(up) == 960
    disagree = {}
    for u in up:
        s = status[(u["problem_id"], u["policy_id"], u["sample_idx"])]
        if (s == "correct") != u["upstream_correct"]:
            q = questions[u["problem_id"]]
            disagree[(names[u["policy_id"]], next((k for _, k in READ if q.startswith(k)), q[:40]))] = s
    assert disagree == {key: got for key, (got, _) in READ.items()}, disagree
    assert all(got == reader for got, reader in READ.values())
    bands = {}
    for d in diff:
        bands.setdefault(names[d["policy_id"]], {}).setdefault(d["band"], 0)
        bands[names[d["policy_id"]]][d["band"]] += 1
    # docs/import.md's band table
    assert bands == {"qwen25-math-7b": {"too_easy": 15, "learnable": 13, "too_hard": 3, "unsolved": 9},
                     "pi1-modify": {"too_easy": 8, "learnable": 20, "too_hard": 6, "unsolved": 6},
                     "offline-grpo-step20": {"learnable": 5, "too_hard": 11, "unsolved": 24}}, bands
