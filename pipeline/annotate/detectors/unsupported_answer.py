"""``unsupported_answer``: a right final answer whose own working does not produce it (:mod:`pipeline.annotate.unsupported`
holds the decision, :func:`~pipeline.annotate.unsupported.check_working`)."""

from __future__ import annotations

from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.annotate.graded import thinking_read
from pipeline.annotate.unsupported import check_working
from pipeline.config import Model
from pipeline.numbers import IN_TEXT_SQL

# The commonest correct completion, "52 - 27 = 25. The answer is 25." with true arithmetic and every number of the
# question an operand (or the setup check off), never fires: SQL decides it, so that only the other correct rows reach
# Python (the stage streams every candidate row through it). tests/test_annotate_arith.py checks the two agree.
_SHAPE = r"^\s*(\d{{1,9}}) ([-+*]) (\d{{1,9}}) = (\d{{1,12}})\. The answer is (\d{{1,12}})\.\s*$"
_M = f"regexp_extract(completion, '{_SHAPE}', ['a', 'op', 'b', 'c', 'd'])"
_QNUMS_SQL = f"list_transform(regexp_extract_all(question, '{IN_TEXT_SQL}'), lambda x: replace(x, ',', ''))"
_N = {k: f"TRY_CAST({_M}.{k} AS HUGEINT)" for k in "abc"}
SIMPLE_TRUE_SQL = (f"coalesce({_M}.c = {_M}.d AND {_N['c']} = CASE {_M}.op WHEN '+' THEN {_N['a']} + {_N['b']}"
                   f" WHEN '-' THEN {_N['a']} - {_N['b']} WHEN '*' THEN {_N['a']} * {_N['b']} END, false)")


@register
class UnsupportedAnswer(Detector):
    """A correct final answer that the completion's own working does not produce.

    Every arithmetic statement is evaluated exactly: fires on a false one ("21 - 15 = 3 is false (6)"),
    or when no true computation gives the answer although it is not a number of the question.
    Score: the number of false statements (0 when the working is missing or not arithmetic).
    """

    name = "unsupported_answer"
    kind = "shortcut"
    label = "unsupported"
    side = "verdicts"
    scan = "status = 'correct' AND extracted IS NOT NULL"
    where = (f"status = 'correct' AND extracted IS NOT NULL AND NOT ({SIMPLE_TRUE_SQL} AND (NOT {{opts.setup}}"
             f" OR list_has_all([{_M}.a, {_M}.b], {_QNUMS_SQL})))")

    class Options(Model):
        setup: bool = Field(True, description="unsupported_answer also fires when the working never uses a "
                                              "number of the question (wrong setup; docs/flags.md)")

    def detect(self, row: dict) -> Hit | None:
        if row.get("status") != "correct" or row.get("extracted") is None:  # the rule is whole without its SQL prefilter
            return None
        return check_working(row["completion"], row["extracted"], row["question"], setup=self.options.setup,
                             thinking=thinking_read(row))
