"""``unsupported_answer`` on real reasoning models' working, every flag read: precision over everything it flags.

The completions are the thinking models' GSM8K rollouts of thaotnguyen/thinking-llms-interp@501921e
(``hybrid/results/benchmark_results_<name>_gsm8k.json``, the four GSM8K files: DeepSeek-R1-Distill Llama-8B, Qwen-1.5B
and Qwen-32B, QwQ-32B; 1,788 completions, 1,441 graded correct), fetched, never copied here (``PASSBAND_FETCHED`` or
``../shared/data/real_outputs``; the tests skip without them). tests/data/real_unsupported_labels.jsonl holds what
reading found in the 47 rollouts the flag fired on before the working was read as algebra, conversions and roundings
(7 Dec 2026): 5 real (a false sum the model was paid for, ``50 - 40 = 20``), 42 false alarms, each with its reason.
Development figures: the rules were written after reading them.
Every rollout the flag fires on now must have been read; the figures are in docs/flags.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_data import fetched_path

from pipeline.annotate.unsupported import check_working
from pipeline.config import VerifyConfig
from pipeline.verify.judge import judge_batch

pytestmark = pytest.mark.slow
LABELS = Path(__file__).parent / "data" / "real_unsupported_labels.jsonl"
UPSTREAM = "github.com/thaotnguyen/thinking-llms-interp@501921e: hybrid/results/"
FILES = [f"thinking-llms-interp__benchmark_results_{name}_gsm8k.json" for name in
         ("llama-3.1-8b", "qwen2.5-32b", "qwen2.5-32b-on-deepseek-r1-distill-qwen-32b", "qwen2.5-math-1.5b")]


@pytest.fixture(scope="module")
def flagged() -> tuple[int, dict[tuple[str, int], str]]:
    """(correct rollouts, {(file, task): evidence} of the flagged ones), with the annotate stage's options (setup on)."""
    rows = []
    for name in FILES:
        tasks = json.loads(fetched_path(name, UPSTREAM + name.split("__", 1)[1]).read_text(encoding="utf-8"))["tasks"]
        for i, t in enumerate(tasks):
            if text := t["model_answers"].get("thinking_model"):
                rows.append((name, i, t["question"], str(t["correct_answer"]).split("####")[-1].strip().replace(",", ""),
                             text))
    judged = judge_batch([(gold, text) for *_, gold, text in rows], config=VerifyConfig(), modes=["tags"] * len(rows),
                         cut=[False] * len(rows)).judgements
    correct = [(r, j) for r, j in zip(rows, judged, strict=True) if j.status == "correct"]
    hits = {}
    for (name, i, question, _, text), j in correct:
        if hit := check_working(text, j.extracted, question, setup=True):
            hits[(name, i)] = hit.evidence
    return len(correct), hits


@pytest.fixture(scope="module")
def labels() -> dict[tuple[str, int], dict]:
    return {(r["file"], r["task"]): r for r in map(json.loads, LABELS.read_text().splitlines())}


def test_every_flag_was_read(flagged, labels):
    correct, hits = flagged
    assert correct >= 1400  # the run the labels were read on
    unread = {k: v for k, v in hits.items() if k not in labels}
    assert not unread, f"read these and add them to {LABELS.name}: {unread}"


def test_precision_over_everything_flagged(flagged, labels):
    """A user filtering on the flag sees every flagged rollout: they must be real (5 of 5 when measured)."""
    _, hits = flagged
    real = [k for k in hits if labels[k]["label"] == "real"]
    assert len(hits) <= 8 and len(real) / len(hits) >= 0.9, {k: (labels[k]["reading"], v) for k, v in hits.items()}


def test_the_real_ones_stay_flagged(flagged, labels):
    _, hits = flagged
    missed = [(k, r["reading"]) for k, r in labels.items() if r["label"] == "real" and k not in hits]
    assert not missed


def test_the_false_alarms_read_stay_quiet(flagged, labels):
    """The forms read (an equation solved for the answer, a conversion, a rounding, a note in brackets, a statement
    run across lines) no longer fire, nor do the ones this reader cannot check (algebra in two unknowns, working in
    words only: a long working with no computation of the answer is undecided, never flagged)."""
    _, hits = flagged
    still = sorted(labels[k]["reading"] for k in hits if labels[k]["label"] == "false_alarm")
    assert still == [], still
