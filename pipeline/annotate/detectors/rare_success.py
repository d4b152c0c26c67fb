"""``rare_success``: a success in a group whose pass rate is so low that GRPO amplifies it.

One real row (SmolLM2-135M, 3-shot, k = 8)::

    "What is 52 - 27?"  completion "52 - 27 = 25. The answer is 25."  1 of 8 correct
    -> score 2.47 (= 7 / sqrt(8)), evidence "1 of 8 correct (pass rate 0.125): GRPO advantage 2.47 (TRL, sample std)"
"""

from __future__ import annotations

from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.config import AnnotateConfig, Model, field_default
from pipeline.pass_rate_stats import TRL_STD_EPS, grpo_advantage

# TRL's advantage of a success (pipeline.pass_rate_stats.grpo_advantage) over `samples` columns
ADVANTAGE_SQL = (f"CASE WHEN n_correct = n THEN 0 ELSE (1 - pass_rate) / (sqrt(n * pass_rate * (1 - pass_rate) / (n - 1))"
                 f" + {TRL_STD_EPS}) END")


@register
class RareSuccess(Detector):
    """Correct in a group whose pass rate is at or below ``annotate.rare_success_max_pass_rate``.

    Score: the advantage this sample gets in TRL's GRPOTrainer (group rewards over their sample
    std + 1e-4; :func:`pipeline.pass_rate_stats.grpo_advantage`): 2.47 for one success in 8, the
    amplification of a possibly lucky success.
    """

    name = "rare_success"
    kind = "risk"
    side = "verdicts"
    where = "status = 'correct' AND pass_rate <= {opts.max_pass_rate}"
    score_sql = ADVANTAGE_SQL
    evidence_sql = ("format('{{}} of {{}} correct (pass rate {{:.3f}}): GRPO advantage {{:.2f}} (TRL, sample std)', n_correct,"
                    f" n, pass_rate, {ADVANTAGE_SQL})")

    class Options(Model):
        # set by the stage from annotate.rare_success_max_pass_rate (its one home: the card and the docs name it),
        # never from annotate.options (refused there)
        max_pass_rate: float = Field(field_default(AnnotateConfig, "rare_success_max_pass_rate"), ge=0, le=1,
                                     description="set from annotate.rare_success_max_pass_rate")

    def detect(self, row: dict) -> Hit | None:
        adv = grpo_advantage(row["n_correct"], row["n"])
        return Hit(adv, f"{row['n_correct']} of {row['n']} correct (pass rate {row['pass_rate']:.3f}): "
                        f"GRPO advantage {adv:.2f} (TRL, sample std)")
