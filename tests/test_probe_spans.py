"""The probe's top-activating spans (pipeline/probe/spans.py): one row per rollout, positive codes only, windows
kept inside their rollout."""

import numpy as np

from pipeline.probe import spans


class CharTok:
    """A tokenizer stand-in: token id i decodes to chr(ord('a') + i)."""

    def decode(self, ids):
        return "".join(chr(ord("a") + int(i)) for i in ids)


def test_top_rows_one_per_rollout_highest_first_positive_only():
    # three rollouts of 3, 0 and 4 tokens; rows 0-2 belong to rollout 0, rows 3-6 to rollout 2
    lengths = np.array([3, 0, 4])
    values = np.array([0.5, 0.9, 0.1, 0.0, 0.8, 0.95, -1.0])
    assert spans.top_rows(values, lengths, n=5) == [(2, 5), (0, 1)]  # row 4 is rollout 2's second best
    assert spans.top_rows(values, lengths, n=1) == [(2, 5)]
    assert spans.top_rows(np.zeros(7), lengths, n=3) == []


def test_top_rows_ties_go_to_the_earlier_row():
    assert spans.top_rows(np.array([1.0, 1.0, 1.0, 1.0]), np.array([2, 2]), n=2) == [(0, 0), (1, 2)]


def test_window_stays_inside_its_rollout_and_text_marks_the_token():
    starts, lengths = np.array([0, 3, 13]), np.array([3, 10, 2])
    assert spans.window(starts, lengths, 1, 4) == (3, 4 + spans.AFTER + 1)
    assert spans.window(starts, lengths, 1, 12) == (12 - spans.BEFORE, 13)
    assert spans.window(starts, lengths, 0, 0) == (0, min(3, spans.AFTER + 1))
    ids = np.arange(15)
    lo, hi = spans.window(starts, lengths, 1, 5)
    assert spans.text(CharTok(), ids, lo, 5, hi) == "de[[f]]gh"
