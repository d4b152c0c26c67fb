"""The reformulated set's annotate config: the wrong-setup check of unsupported_answer is off there.

A step-rung child asks for an intermediate and keeps every number of its parent (and states the
parent's answer); the real row below, from the main job's full ladder, is right and supported.
"""

from pipeline.annotate import set_config
from pipeline.annotate.unsupported import check_working
from pipeline.config import AnnotateConfig

CHILD = ("Sam has 8 coins. He buys 6 more and then gives 10 to a friend. How many coins does Sam have now? "
         "The answer to this question is 4. One step of its solution reads 8 + 6 = ?. What number is ?")
COMPLETION = " 8 + 6 = 14. The answer is 14."


def test_setup_check_is_off_for_reformulated_children_only():
    cfg = AnnotateConfig(options={"answer_repetition": {"answer_min": 4}, "unsupported_answer": {}})
    assert set_config(cfg, "main") is cfg
    child = set_config(cfg, "reformulated")
    assert child.options == {"answer_repetition": {"answer_min": 4}, "unsupported_answer": {"setup": False}}
    assert cfg.options == {"answer_repetition": {"answer_min": 4}, "unsupported_answer": {}}  # not changed in place


def test_the_real_child_row_is_flagged_only_with_the_setup_check():
    hit = check_working(COMPLETION, "14", CHILD, setup=True)
    assert hit is not None and "never computes with" in hit.evidence
    assert check_working(COMPLETION, "14", CHILD, setup=False) is None
    # a false step is still caught on a child
    assert check_working(" 8 + 6 = 15. The answer is 14.", "14", CHILD, setup=False) is not None
