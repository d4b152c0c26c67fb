"""How far each flag can be trusted: precision and recall against completions labelled by reading.

The labelled set (``flag_labels.jsonl`` beside this module in a checkout; the wheel leaves it out, since only the
repository's benchmarks and tests and ``passband probe report --labelled`` read it, and ships ``flag_quality.yaml``
instead, the figures measured on it; made by
``benchmarks/make_flag_set.py`` and labelled by hand following docs/flags.md) holds real completions of the
embedded model with what a careful reader says about each: its final answer, whether it is correct, and the labels
below. :func:`measure` runs the real verify core (math-verify in its worker pool) and the real
annotate core on those completions, then compares every flag with the label it claims::

    unsupported_answer  42 flagged, 45 labelled unsupported, precision 0.93 [0.81, 0.98], recall 0.87 ...

Precision = flagged and labelled / flagged; recall = flagged and labelled / labelled; both with
Wilson 95 % intervals (:func:`pipeline.pass_rate_stats.wilson`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from pipeline.annotate.core import annotate_tables
from pipeline.annotate.detectors import DETECTORS, labels
from pipeline.annotate.measured import LabelsError
from pipeline.config import AnnotateConfig, VerifyConfig
from pipeline.pass_rate_stats import wilson
from pipeline.verify.core import verify

# the labels a reader gives (docs/flags.md, "Labelling guide"), each a boolean
LABELS = ("correct", "unsupported", "hedged", "repetition", "copied", "truncated")
# the label each flag claims, read from its detector file; rare_success is a risk (the group's pass rate), which no
# reading of one completion decides, so it claims none
FLAG_LABEL = labels()
FIELDS = ("id", "source", "question", "gold", "solution", "completion", "n_tokens", "finish_reason", "final_answer",
          *LABELS, "note")
LABELLED_SET = Path(__file__).resolve().with_name("flag_labels.jsonl")


def load_labels(path: Path = LABELLED_SET) -> list[dict]:
    """The labelled rows; a row missing a field or with a non-boolean label is a one-line error naming it."""
    rows = []
    if Path(path) == LABELLED_SET and not LABELLED_SET.is_file():
        raise LabelsError(f"the labelled flag set is the repository's (pipeline/annotate/{LABELLED_SET.name}), not the "
                          "installed package's: run from a checkout of passband, or without it (--no-labelled)")
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise LabelsError(f"cannot read the labelled set {path}: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{path}:{n}: not JSON ({exc.msg}); fix or remove the line") from None
        if missing := [f for f in FIELDS if f not in row]:
            raise LabelsError(f"{path}:{n}: missing {missing}; every row needs {list(FIELDS)}")
        if bad := [f for f in LABELS if not isinstance(row[f], bool)]:
            raise LabelsError(f"{path}:{n}: labels {bad} must be true or false (is the row labelled yet?)")
        rows.append(row)
    return rows


@dataclass(frozen=True)
class FlagQuality:
    flag: str
    kind: str
    label: str
    flagged: int
    labelled: int
    both: int

    @property
    def precision(self) -> float | None:
        return self.both / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.both / self.labelled if self.labelled else None

    @property
    def precision_ci(self) -> tuple[float, float] | None:
        return wilson(self.both, self.flagged) if self.flagged else None

    @property
    def recall_ci(self) -> tuple[float, float] | None:
        return wilson(self.both, self.labelled) if self.labelled else None


@dataclass(frozen=True)
class Quality:
    rows: int
    flags: list[FlagQuality]
    # verify's status against the labelled correctness: (status, labelled correct) -> count
    verify: dict[tuple[str, bool], int]
    hits: dict[str, set[str]]  # flag -> ids of the rows it fired on

    @property
    def verify_agreement(self) -> float:
        agree = sum(n for (status, correct), n in self.verify.items() if (status == "correct") == correct)
        return agree / self.rows

    def of(self, flag: str) -> FlagQuality:
        return next(q for q in self.flags if q.flag == flag)


def tables(rows: Sequence[dict]) -> tuple[pa.Table, pa.Table]:
    """(rollouts, problems) for the labelled rows: one problem per question, the rows' ids as sample keys."""
    pids = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(r["question"] for r in rows))}
    problems = {r["question"]: r for r in rows}
    rollouts = pa.table({
        "problem_id": [pids[r["question"]] for r in rows],
        "policy_id": ["labelled"] * len(rows),
        "sample_idx": pa.array(range(len(rows)), pa.int64()),
        "completion": [r["completion"] for r in rows],
        "n_tokens": pa.array([r["n_tokens"] for r in rows], pa.int64()),
        "finish_reason": [r["finish_reason"] for r in rows],
    })
    probs = pa.table({
        "problem_id": [pids[q] for q in problems],
        "question": list(problems),
        "answer": [r["gold"] for r in problems.values()],
        "solution": [r["solution"] for r in problems.values()],
    })
    return rollouts, probs


def verify_rows(rows: Sequence[dict], *, config: VerifyConfig | None = None):
    """The real verify core (math-verify in its worker pool) on the labelled rows: a ``VerifyResult``."""
    rollouts, problems = tables(rows)
    return verify(rollouts, problems, config=config or VerifyConfig())


def measure(rows: Sequence[dict], *, annotate: AnnotateConfig | None = None, verified=None) -> Quality:
    """Verify (unless ``verified`` is given) and annotate the labelled rows with the real cores; compare each flag
    with its label."""
    rollouts, problems = tables(rows)
    result = verified if verified is not None else verify_rows(rows)
    _, flags = annotate_tables(result.verdicts, rollouts, problems, config=annotate or AnnotateConfig(),
                               verifier_id=result.verifier_id)
    hits: dict[str, set[str]] = {name: set() for name in DETECTORS}
    for name, idx in zip(flags.column("flag").to_pylist(), flags.column("sample_idx").to_pylist(), strict=True):
        hits[name].add(rows[idx]["id"])
    out = []
    for name, label in FLAG_LABEL.items():
        if name not in DETECTORS:
            continue
        positive = {r["id"] for r in rows if r[label]}
        out.append(FlagQuality(name, DETECTORS[name].kind, label, len(hits[name]), len(positive),
                               len(hits[name] & positive)))
    agreement: dict[tuple[str, bool], int] = {}
    for status, r in zip(result.verdicts.column("status").to_pylist(), rows, strict=True):
        agreement[(status, r["correct"])] = agreement.get((status, r["correct"]), 0) + 1
    return Quality(len(rows), out, agreement, hits)


def to_yaml(q: Quality) -> str:
    """The measured figures as :data:`pipeline.annotate.measured.MEASURED` holds them."""
    flags = {f.flag: {"label": f.label, "flagged": f.flagged, "labelled": f.labelled, "both": f.both,
                      "precision": None if f.precision is None else round(f.precision, 4),
                      "recall": None if f.recall is None else round(f.recall, 4)} for f in q.flags}
    head = ("# Written by `python benchmarks/flag_quality.py --write` from pipeline/annotate/flag_labels.jsonl; do not edit.\n"
            "# Each flag against the label it claims (docs/flags.md); "
            "tests/test_annotate_flag_quality.py holds these as floors.\n")
    return head + yaml.safe_dump({"labelled_rows": q.rows, "verify_agreement": round(q.verify_agreement, 4),
                                  "flags": flags}, sort_keys=False)


def _ratio(x: float | None, ci: tuple[float, float] | None) -> str:
    return "-" if x is None or ci is None else f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def render(q: Quality) -> str:
    """The table ``benchmarks/flag_quality.py`` prints (Markdown)."""
    lines = [f"{q.rows} labelled completions", "",
             "| flag | kind | label | flagged | labelled | both | precision [95 % CI] | recall [95 % CI] |",
             "|---|---|---|---:|---:|---:|---|---|"]
    for f in q.flags:
        lines.append(f"| {f.flag} | {f.kind} | {f.label} | {f.flagged} | {f.labelled} | {f.both} | "
                     f"{_ratio(f.precision, f.precision_ci)} | {_ratio(f.recall, f.recall_ci)} |")
    lines += ["", f"verify vs labelled correctness: agreement {q.verify_agreement:.3f} on {q.rows}", "",
              "| verify status | labelled correct | labelled not correct |", "|---|---:|---:|"]
    for status in sorted({s for s, _ in q.verify}):
        lines.append(f"| {status} | {q.verify.get((status, True), 0)} | {q.verify.get((status, False), 0)} |")
    return "\n".join(lines)
