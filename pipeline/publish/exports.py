"""Trainer exports: the published rows in verl's, TRL's and OpenRLHF's own formats.

- **verl** (``exports/verl/<config>/<split>.parquet``): the fields of verl's "Prepare Data for
  Post-Training" page: ``data_source``, ``prompt`` (chat messages), ``ability``,
  ``reward_model = {style: "rule", ground_truth}`` and ``extra_info`` (split, index and the
  difficulty fields). ``data_source`` is ``passband/<source>``, which verl's built-in
  ``default_compute_score`` does not know, so ``exports/verl/reward.py`` ships
  ``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` (passband's own
  verifier, :mod:`pipeline.rewards`) for ``custom_reward_function.path``.
- **TRL** (``exports/trl/<config>/<split>.parquet``): ``prompt`` (conversational), ``answer`` (the
  gold, what :func:`pipeline.rewards.accuracy_reward` reads) and ``solution`` = the gold in
  ``$...$``, the column ``trl.rewards.accuracy_reward`` reads; every extra column reaches a GRPO
  reward function as a keyword argument.
- **OpenRLHF** (``exports/openrlhf/<config>/<split>.jsonl``): ``{"input": messages, "label": gold, ...}``
  for ``--input_key input --label_key label --apply_chat_template``, with ``exports/openrlhf/reward_func.py``
  (``reward_func(queries, prompts, labels)``, passband's verifier) for ``--remote_rm_url``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa

from pipeline import rewards
from pipeline.publish.core import MESSAGE
from pipeline.publish.shards import BATCH_ROWS, Shards

FORMATS = ("verl", "trl", "openrlhf")
ABILITY = "math"

EXTRA_INFO = pa.struct([
    pa.field("split", pa.string()),
    pa.field("index", pa.int64()),
    pa.field("problem_id", pa.string()),
    pa.field("question", pa.string()),
    pa.field("answer", pa.string()),
    pa.field("source", pa.string()),
    pa.field("parent_id", pa.string()),
    pa.field("method", pa.string()),
    pa.field("policy_id", pa.string()),
    pa.field("pass_rate", pa.float64()),
    pa.field("ci_low", pa.float64()),
    pa.field("ci_high", pa.float64()),
    pa.field("band", pa.string()),
    pa.field("band_confidence", pa.float64()),
    pa.field("n", pa.int64()),
    pa.field("n_correct", pa.int64()),
    pa.field("learnability", pa.float64()),
    pa.field("flagged_correct_rate", pa.float64()),
])

VERL_SCHEMA = pa.schema([
    pa.field("data_source", pa.string(), nullable=False),
    pa.field("prompt", pa.list_(MESSAGE), nullable=False),
    pa.field("ability", pa.string(), nullable=False),
    pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())]),
             nullable=False),
    pa.field("extra_info", EXTRA_INFO, nullable=False),
])

TRL_SCHEMA = pa.schema([
    pa.field("prompt", pa.list_(MESSAGE), nullable=False),
    pa.field("answer", pa.string(), nullable=False),
    pa.field("solution", pa.string(), nullable=False),
    pa.field("problem_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("pass_rate", pa.float64(), nullable=False),
    pa.field("band", pa.string(), nullable=False),
    pa.field("band_confidence", pa.float64(), nullable=False),
])

# The reward files shipped beside the exports: thin imports of passband's verifier (pipeline.rewards).
VERL_REWARD = rewards.VERL_REWARD_FILE  # exports/verl/reward.py: compute_score, compute_score_batch
OPENRLHF_REWARD = rewards.OPENRLHF_REWARD_FILE  # exports/openrlhf/reward_func.py: reward_func


_EXTRA_NAMES = tuple(f.name for f in EXTRA_INFO)
_TRL_NAMES = tuple(f.name for f in TRL_SCHEMA if f.name != "solution")


def trl_solution(answer: str) -> str:
    """The gold as TRL's accuracy_reward parses it: inside $...$ unless it is already boxed or delimited."""
    return answer if answer.startswith("$") or "\\boxed" in answer else f"${answer}$"


def _batches(rows: Shards, names) -> Iterator[list[dict]]:
    """``rows``' columns in ``names`` (those it has), as Python rows, :data:`BATCH_ROWS` at a time (the whole
    config's were 129 MiB at 15,750 items)."""
    cols = [c for c in rows.schema.names if c in set(names)]
    for batch in rows.batches(cols, BATCH_ROWS):
        yield batch.to_pylist()


def verl_batches(rows: Shards, *, split: str) -> Iterator[pa.RecordBatch]:
    i = 0
    for part in _batches(rows, ("source", "prompt", "answer", *_EXTRA_NAMES)):
        out = []
        for r in part:
            out.append({
                "data_source": f"passband/{r['source']}",
                "prompt": r["prompt"],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": r["answer"]},
                "extra_info": {"split": split, "index": i, **{k: r[k] for k in _EXTRA_NAMES if k in r}},
            })
            i += 1
        yield pa.RecordBatch.from_pylist(out, schema=VERL_SCHEMA)


def trl_batches(rows: Shards) -> Iterator[pa.RecordBatch]:
    for part in _batches(rows, (*_TRL_NAMES, "answer")):
        out = [{**{k: r[k] for k in _TRL_NAMES}, "solution": trl_solution(r["answer"])} for r in part]
        yield pa.RecordBatch.from_pylist(out, schema=TRL_SCHEMA)


def openrlhf_lines(rows: Shards) -> Iterator[str]:
    for part in _batches(rows, ("prompt", "answer", "problem_id", "source", "pass_rate", "band", "band_confidence")):
        for r in part:
            rec = {"input": r["prompt"], "label": r["answer"], "problem_id": r["problem_id"], "source": r["source"],
                   "pass_rate": r["pass_rate"], "band": r["band"], "band_confidence": r["band_confidence"]}
            yield json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n"
