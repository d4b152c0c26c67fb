"""Every flag against completions labelled by reading (pipeline/annotate/flag_labels.jsonl, docs/flags.md).

The real verify core (math-verify in its worker pool) and the real annotate core run on the
labelled completions; each flag's precision and recall must stay at or above the figures
measured when the set was labelled (pipeline/annotate/flag_quality.yaml, written by
``benchmarks/flag_quality.py --write``), and verify must agree with the labelled correctness.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pipeline.annotate.detectors import DETECTORS
from pipeline.annotate.measured import MEASURED, LabelsError, measured
from pipeline.annotate.quality import FLAG_LABEL, LABELLED_SET, load_labels, measure

ROWS = load_labels()
FIGURES = measured()
FIGURES_ALL = yaml.safe_load(MEASURED.read_text())


@pytest.fixture(scope="module")
def quality():
    return measure(ROWS)


def test_the_labelled_set_is_real_and_large_enough():
    assert len(ROWS) >= 500
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    for label in ("correct", "unsupported", "hedged", "repetition", "truncated"):
        assert any(r[label] for r in ROWS), f"no completion is labelled {label}"
    # unsupported and copied describe a right answer
    assert all(r["correct"] for r in ROWS if r["unsupported"] or r["copied"])


def test_every_measured_flag_is_held(quality):
    assert set(FIGURES) == {f for f in FLAG_LABEL if f in DETECTORS}
    for f in quality.flags:
        want = FIGURES[f.flag]
        assert (f.labelled, f.label) == (want["labelled"], want["label"]), f"{f.flag}: the labelled set changed"
        for key in ("precision", "recall"):
            got, floor = getattr(f, key), want[key]
            if floor is not None:
                assert got is not None and round(got, 4) >= floor, f"{f.flag} {key} {got} fell below {floor}"


def test_the_targets_of_issue_18(quality):
    for f in quality.flags:
        if f.kind == "shortcut" and f.flagged:
            assert f.precision >= 0.9, f"{f.flag} precision {f.precision:.2f}"
    assert quality.of("unsupported_answer").recall >= 0.8


def test_verify_agrees_with_the_labels(quality):
    assert quality.verify_agreement >= 0.99
    assert round(quality.verify_agreement, 4) >= FIGURES_ALL["verify_agreement"]


def test_a_damaged_or_unlabelled_row_is_a_one_line_error(tmp_path):
    row = json.loads(LABELLED_SET.read_text().splitlines()[0])
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({**row, "unsupported": None}) + "\n")
    with pytest.raises(LabelsError, match=r"labels\.jsonl:1: labels \['unsupported'\] must be true or false"):
        load_labels(bad)
    bad.write_text("{not json\n")
    with pytest.raises(LabelsError, match=r"labels\.jsonl:1: not JSON"):
        load_labels(bad)
