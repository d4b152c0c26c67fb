"""Rollouts, verdicts and flags for the publish tables (tests/support/publish_tables.py): what the rollouts config is built from.

Every (problem, policy) with a difficulty row gets K + 2 rollouts: the first n_correct of the K counted ones are
verified correct under the difficulty's verifier, the others incorrect, and the 2 past K are extra samples the pass
rate does not count (a lowered k). A second verifier's verdicts call everything correct (they must not be read).
Flags: every third sample gets ``unsupported_answer``, every fifth ``truncated`` (with finish_reason length).
The unmeasured problems get rollouts too (they are not published, so their rollouts must not be).
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from publish_tables import MAIN, OTHER_ID, OTHER_MEASURED, PRIMARY_ID, REFORM, VERIFIER, K

from pipeline.io import write_table
from pipeline.schema import schema

OTHER_VERIFIER = "math-verify/0.8.0/cfg_ffffffffffff"
EXTRA = 2  # samples past K per (problem, policy)
LONG = 800_000  # characters a completion after long_texts


def measured() -> list[tuple[str, str, int | None, bool]]:
    """(problem_id, policy_id, n_correct or None for unmeasured, reformulated?) for every rollout group written."""
    out = [(pid, PRIMARY_ID, c, False) for pid, *_, c in MAIN]
    out += [(pid, OTHER_ID, c, False) for pid, c in OTHER_MEASURED.items()]
    out += [(pid, PRIMARY_ID, c, True) for pid, *_, c in REFORM]
    return out


def completion(pid: str, pol: str, i: int) -> str:
    return f"<think>working {pid[-2:]} {i}</think> For {pol[-4:]}, sample {i}: the answer is \\boxed{{{i}}}."


def add_rollouts(root: Path) -> Path:
    groups: dict[bool, dict[str, list]] = {False: {"r": [], "v": [], "f": []}, True: {"r": [], "v": [], "f": []}}
    for pid, pol, c, reform in measured():
        g = groups[reform]
        for i in range(K + EXTRA):
            flags = [f for f, every in (("unsupported_answer", 3), ("truncated", 5)) if i % every == 0]
            g["r"].append({"problem_id": pid, "policy_id": pol, "sample_idx": i, "seed": i,
                           "completion": completion(pid, pol, i), "n_tokens": 10 + i,
                           "finish_reason": "length" if "truncated" in flags else "stop"})
            status = "correct" if c is not None and i < c else ("no_answer" if i == K - 1 else "incorrect")
            for ver, st in ((VERIFIER, status), (OTHER_VERIFIER, "correct")):
                g["v"].append({"problem_id": pid, "policy_id": pol, "sample_idx": i, "verifier_id": ver, "status": st,
                               "extracted": None if st == "no_answer" else str(i), "extractor": "boxed",
                               "detail": None, "gold_digest": None, "thinking_chars": 9, "thinking_closed": True})
            g["f"] += [{"problem_id": pid, "policy_id": pol, "sample_idx": i, "flag": f, "score": None, "evidence": "x"}
                       for f in flags]
    for reform, base in ((False, root / "data"), (True, root / "data/reformulated")):
        g = groups[reform]
        write_table(schema("rollouts").from_rows(g["r"]), base / "rollouts/part-0.parquet", name="rollouts")
        write_table(schema("verdicts").from_rows(g["v"]), base / "verdicts/part-0.parquet", name="verdicts")
        write_table(schema("flags").from_rows(g["f"]), base / "flags/part-0.parquet", name="flags")
    return root


def long_texts(root: Path, *, shuffle: bool) -> None:
    """Each set's rollouts with ``LONG``-character completions; ``shuffle``: their rows in random order over three
    shards of several row groups each, so no consumer's order is the shards' order."""
    for base in (root / "data/rollouts", root / "data/reformulated/rollouts"):
        (path,) = base.glob("*.parquet")
        table = pq.read_table(path)
        pad = [(c + " " + f"step {i}; " * (LONG // 6))[:LONG] for i, c in enumerate(table["completion"].to_pylist())]
        table = table.set_column(table.schema.get_field_index("completion"), "completion", pa.array(pad))
        if not shuffle:
            pq.write_table(table, path, compression="zstd")
            continue
        path.unlink()
        order = list(range(table.num_rows))
        random.Random(7).shuffle(order)
        table = table.take(order)
        third = -(-table.num_rows // 3)
        for i in range(3):
            pq.write_table(table.slice(i * third, third), base / f"part-{i}.parquet", compression="zstd",
                           row_group_size=17)
