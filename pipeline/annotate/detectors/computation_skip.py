"""``computation_skip``: a correct answer reached with far fewer steps than the problem needs."""

from __future__ import annotations

from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.config import Model


@register
class ComputationSkip(Detector):
    """Correct with far fewer reasoning steps ('=' signs) than the problem needs.

    Needed steps: the reference solution's, else the median of the group's correct samples
    (when there are at least ``min_correct``). Fires below
    ``ratio`` of it. Score: steps / needed.
    """

    name = "computation_skip"
    kind = "shortcut"
    label = "unsupported"
    where = ("status = 'correct' AND CASE WHEN coalesce(ref_steps, 0) > 0"
             " THEN steps < {opts.ratio} * ref_steps"
             " ELSE n_correct >= {opts.min_correct}"
             " AND steps < {opts.ratio} * median_correct_steps END")
    scan = ("steps < {opts.ratio}"
            " * CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END")
    score_sql = "steps / CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END"
    evidence_sql = ("format('{{}} steps where {{}} has {{:g}}', steps,"
                    " CASE WHEN coalesce(ref_steps, 0) > 0 THEN 'the reference solution' ELSE 'the median correct sample' END,"
                    " (CASE WHEN coalesce(ref_steps, 0) > 0 THEN ref_steps ELSE median_correct_steps END)::DOUBLE)")

    class Options(Model):
        ratio: float = Field(0.67, gt=0, le=1, description="fire below this share of the reference's steps"
                                                           " (chosen on the labelled set: docs/flags.md)")
        min_correct: int = Field(3, ge=2, description="correct samples needed when there is no reference solution")

    def detect(self, row: dict) -> Hit | None:
        need, basis = row.get("ref_steps"), "the reference solution"
        if not need:
            if row["n_correct"] < self.options.min_correct or not row.get("median_correct_steps"):
                return None
            need, basis = row["median_correct_steps"], "the median correct sample"
        have = row["steps"]
        if have >= self.options.ratio * need:
            return None
        return Hit(have / need, f"{have} steps where {basis} has {need:g}")
