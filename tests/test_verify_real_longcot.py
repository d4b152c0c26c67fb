"""Real long-CoT completions graded by reading: passband's verdict against a reader's, on a dev part and a held-back part.

The completions are the four THIP evaluation dumps in ../shared/data/real_outputs (7B RL checkpoints on MATH-500,
AIME and Minerva-Math, 1,302 completions, 126 cut at the token limit; provenance in that folder's README), never
copied here. tests/data/real_longcot_grades.jsonl holds the grades read by hand, by the rules in docs/verifier.md
("Real long-CoT set"): every completion where passband and the dump's own grader disagreed, every completion cut at
the token limit that passband pays, 40 drawn at random per part, and the 31 read while the rules were written
(dev). The held-back part (``sha256(file:line:sample) % 3 == 0``, minus what was read during development) was read
only to grade it, after the rules were fixed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from shared_data import shared_path

from pipeline.config import VerifyConfig
from pipeline.verify.judge import judge_batch

pytestmark = pytest.mark.slow
GRADES = Path(__file__).parent / "data" / "real_longcot_grades.jsonl"


@pytest.fixture(scope="module")
def judged() -> list[tuple[dict, str]]:
    folder = shared_path("real_outputs")
    rows = [json.loads(line) for line in GRADES.read_text().splitlines()]
    files: dict[str, list[dict]] = {}
    pairs, cut = [], []
    for r in rows:
        if r["file"] not in files:
            files[r["file"]] = [json.loads(x) for x in (folder / r["file"]).read_text(encoding="utf-8").splitlines()]
        item = files[r["file"]][r["line"]]
        assert item.get("expected_answer", item.get("answer")) == r["gold"], r  # the file is the one graded
        pairs.append((r["gold"], item["response"][r["sample"]]))
        cut.append(item["finish_reason"][r["sample"]] == "length")
    # the checkpoints answer inside the thinking their prompt opens: thinking "off", as docs/import.md declares them
    js = judge_batch(pairs, config=VerifyConfig(), modes=["off"] * len(pairs), cut=cut).judgements
    return [(r, j.status) for r, j in zip(rows, js, strict=True)]


@pytest.mark.parametrize("split", ["dev", "held_back"])
def test_the_reward_agrees_with_the_reader(judged, split):
    mine = [(r, s) for r, s in judged if r["split"] == split]
    agree = sum((s == "correct") == (r["grade"] == "correct") for r, s in mine)
    assert len(mine) >= 40 and agree / len(mine) >= 0.995, [(r["file"], r["line"], r["grade"], s) for r, s in mine
                                                           if (s == "correct") != (r["grade"] == "correct")]


def test_no_answer_a_reader_refuses_is_paid(judged):
    paid = [(r["file"], r["line"]) for r, s in judged if s == "correct" and r["grade"] != "correct"]
    assert paid == []
    assert Counter(r["read_because"] for r, _ in judged)["cut_correct"] >= 50  # the cut completions were read
