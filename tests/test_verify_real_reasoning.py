"""Real reasoning models' text, graded by reading: R1-distilled models and QwQ-32B (thinking), their base models and
steered base models (prose endings), on GSM8K, MATH-500 and AIME; passband's verdict against a reader's.

The completions are the benchmark files of thaotnguyen/thinking-llms-interp@501921e (``hybrid/results/
benchmark_results_*.json``: 6,691 distinct completions), fetched, never copied here: put them in
``../shared/data/real_outputs`` (or ``PASSBAND_FETCHED``) as ``thinking-llms-interp__<file name>``; until then these
tests skip. tests/data/real_tli_grades.jsonl holds the grades read by hand, by the rules of docs/verifier.md ("Real
long-CoT set"): per part (``sha256(file:task:model) % 3 == 0`` is held back) 40 thinking and 40 other completions
drawn at random, and, read during development (dev), the completions whose verdict the ``stated_value`` policy
changed (26 drawn) and the thinking models' completions where passband and math-verify disagreed (12). Then, once, the
census: every other held-back thinking completion (663, ``read_because`` ``census``), read with passband's verdicts
hidden, so that the held-back part's figure is over all of it (706, of which 3 were read in development and count there).

A thinking model's answer is read after ``</think>`` (its prompt opens the thinking: mode ``tags``); the others'
anywhere (``off``). The files hold no finish reason, so no completion is treated as cut at the token limit.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from shared_data import fetched_path

from pipeline.config import VerifyConfig
from pipeline.verify.judge import judge_batch

pytestmark = pytest.mark.slow
GRADES = Path(__file__).parent / "data" / "real_tli_grades.jsonl"
UPSTREAM = "github.com/thaotnguyen/thinking-llms-interp@501921e: hybrid/results/"
PROSE = [*VerifyConfig().extractors, "prose_final"]


def gold(answer) -> str:
    """The file's key: a GSM8K solution's ``#### value`` line, else the answer as written."""
    answer = str(answer)
    return answer.split("####")[-1].strip().replace(",", "") if "####" in answer else answer


@pytest.fixture(scope="module")
def judged() -> list[tuple[dict, str, str]]:
    rows = [json.loads(line) for line in GRADES.read_text().splitlines()]
    files: dict[str, list[dict]] = {}
    pairs, modes = [], []
    for r in rows:
        if r["file"] not in files:
            upstream = UPSTREAM + r["file"].split("__", 1)[1]
            files[r["file"]] = json.loads(fetched_path(r["file"], upstream).read_text(encoding="utf-8"))["tasks"]
        task = files[r["file"]][r["task"]]
        assert gold(task["correct_answer"]) == r["gold"], r  # the file is the one graded
        pairs.append((r["gold"], task["model_answers"][r["model"]]))
        modes.append("tags" if r["model"] == "thinking_model" else "off")
    cut = [False] * len(pairs)
    default = judge_batch(pairs, config=VerifyConfig(), modes=modes, cut=cut).judgements
    prose = judge_batch(pairs, config=VerifyConfig(extractors=PROSE), modes=modes, cut=cut).judgements
    return [(r, d.status, p.status) for r, d, p in zip(rows, default, prose, strict=True)]


def test_the_split_is_the_hash_rule(judged):
    for r, _, _ in judged:
        if r["split"] == "held_back":  # a held-back row was drawn from the held-back part and not read before
            key = f"{r['file']}:{r['task']}:{r['model']}"
            assert int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0, r
            assert r["read_because"] in ("random", "census"), r
    keys = [(r["file"], r["task"], r["model"]) for r, _, _ in judged]
    assert len(keys) == len(set(keys))  # each completion graded once


@pytest.mark.parametrize("split", ["dev", "held_back"])
def test_thinking_models_agree_with_the_reader(judged, split):
    mine = [(r, d) for r, d, _ in judged if r["split"] == split and r["model"] == "thinking_model"
            and r["read_because"] == "random"]
    agree = sum((d == "correct") == (r["grade"] == "correct") for r, d in mine)
    assert len(mine) >= 40 and agree / len(mine) >= 0.995, [(r["file"], r["task"], r["grade"], d) for r, d in mine
                                                           if (d == "correct") != (r["grade"] == "correct")]


def test_the_whole_held_back_thinking_part_agrees_with_the_reader(judged):
    """The census: every held-back thinking completion not read in development, read once. The reward (correct or
    not) must agree on >= 99.5 %; the three statuses are reported too (no_answer against incorrect matters to a
    reader of the tables, not to the reward)."""
    mine = [(r, d) for r, d, _ in judged if r["split"] == "held_back" and r["model"] == "thinking_model"]
    assert len(mine) >= 700  # 40 drawn + the census: all 703 of the part's 706 not read in development
    reward = [(r["file"], r["task"], r["grade"], d) for r, d in mine if (d == "correct") != (r["grade"] == "correct")]
    assert 1 - len(reward) / len(mine) >= 0.995, reward
    assert Counter(r["grade"] for r, _ in mine)["correct"] >= 450 and Counter(r["grade"] for r, _ in mine)["incorrect"] >= 30
    three_way = sum(d == r["grade"] for r, d in mine) / len(mine)
    assert three_way >= 0.99, three_way


def test_no_answer_a_reader_refuses_is_paid(judged):
    for extractors, column in (("default", 1), ("prose_final", 2)):
        paid = [(r["file"], r["task"], r["model"]) for r, *s in judged if s[column - 1] == "correct"
                and r["grade"] != "correct"]
        assert paid == [], extractors


def test_stated_values_are_paid_as_read(judged):
    rows = [(r, d) for r, d, _ in judged if r["read_because"] == "stated_value"]
    assert len(rows) >= 25 and all(d == r["grade"] == "correct" for r, d in rows), rows


def test_prose_endings_need_prose_final(judged):
    """Base models end in prose ("Therefore, Lindsay has missed 15 socks."): the default extractors leave most of those
    as no_answer, prose_final reads them, and neither pays a refused one (above)."""
    mine = [(r, d, p) for r, d, p in judged if r["model"] != "thinking_model" and r["read_because"] == "random"]
    default = sum((d == "correct") == (r["grade"] == "correct") for r, d, _ in mine) / len(mine)
    prose = sum((p == "correct") == (r["grade"] == "correct") for r, _, p in mine) / len(mine)
    assert len(mine) >= 80 and prose >= 0.85 and prose > default, (default, prose)
    assert Counter(r["grade"] for r, _, _ in mine)["correct"] >= 50  # mostly right answers in prose: a real test
