"""Where a feature fires hardest: the token rows (at most one per rollout) and their text windows, shown beside a
feature in the probe's tables. Display only: no SAE's weights depend on it (it is not in ``PROBE_MODULES``)."""

from __future__ import annotations

import numpy as np

BEFORE = 6  # tokens shown before the firing token
AFTER = 2  # and after it


def top_rows(values: np.ndarray, lengths: np.ndarray, *, n: int) -> list[tuple[int, int]]:
    """(rollout, token row) of the ``n`` highest positive ``values`` (one feature's codes over the concatenated
    rollouts, ``lengths`` tokens each), at most one row per rollout; ties go to the earlier row."""
    seq = np.repeat(np.arange(len(lengths)), lengths)
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    for t in np.argsort(-values, kind="stable"):
        if values[t] <= 0 or len(out) == n:
            break
        s = int(seq[t])
        if s not in seen:
            seen.add(s)
            out.append((s, int(t)))
    return out


def window(starts: np.ndarray, lengths: np.ndarray, seq: int, row: int) -> tuple[int, int]:
    """The token rows [lo, hi) shown around ``row``, kept inside its rollout ``seq``."""
    return max(int(starts[seq]), row - BEFORE), min(int(starts[seq] + lengths[seq]), row + AFTER + 1)


def text(tok, token_ids: np.ndarray, lo: int, row: int, hi: int) -> str:
    """The window's text with the firing token in ``[[...]]``."""
    return (f"{tok.decode(token_ids[lo:row].tolist())}[[{tok.decode([int(token_ids[row])])}]]"
            f"{tok.decode(token_ids[row + 1:hi].tolist())}")
