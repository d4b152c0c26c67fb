"""``verl``: verl's rollout dump (``trainer.rollout_data_dir``: ``<step>.jsonl``), one sample a line.

Each line holds the prompt as the policy saw it (``input``, chat template applied), the completion (``output``),
its reward (``score``, kept as upstream correctness when it is 0 or 1) and the training ``step``. A training run
changes the policy every step, so one step is one snapshot: ``step`` selects it (lines of other steps are skipped,
and counted). The question is read out of the prompt by ``question_pattern`` (its group ``question``), from which
``strip`` texts (an instruction the data preparation appended) are removed before matching::

    {"input": "<|im_start|>user\\nWhat is 2 + 3? Let's think step by step...<|im_end|>\\n<|im_start|>assistant\\n",
     "output": "2 + 3 = 5 ... #### 5", "score": 1.0, "step": 1}
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import Field, field_validator

from pipeline.config import Model
from pipeline.rollout.layout import LAYOUTS, DumpRecord, Layout, LayoutError, Sample, correct, first_of, text_of

QWEN_USER = r"(?s)<\|im_start\|>user\n(?P<question>.*?)<\|im_end\|>"


@LAYOUTS.register
class Verl(Layout):
    name = "verl"
    format = "jsonl"
    grouped = False
    upstream = "the trainer's reward (`score`, when 0 or 1)"

    class Options(Model):
        step: int | None = Field(None, ge=0, description="the training step whose samples to read (None: the file "
                                                         "must hold one step)")
        question_pattern: str = Field(QWEN_USER, description="regex whose group `question` is the question inside "
                                                             "`input` (default: the user turn of a ChatML prompt)")
        strip: list[str] = Field(default_factory=list, description="texts removed from the question before matching "
                                                                   "(an appended instruction)")

        @field_validator("question_pattern")
        @classmethod
        def _compiles(cls, v: str) -> str:
            try:
                if "question" not in re.compile(v).groupindex:
                    raise ValueError("the pattern has no group named `question`")
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
            return v

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pattern = re.compile(self.options.question_pattern)
        self._steps: set[Any] = set()

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        step = row.get("step")
        if self.options.step is not None and step != self.options.step:
            return
        if self.options.step is None:
            self._steps.add(step)
            if len(self._steps) > 1:
                raise LayoutError("several_steps", f"the dump holds steps {sorted(map(str, self._steps))}: each is "
                                                   "another policy; name one in dump.options.step")
        prompt = text_of(first_of(row, ["input", "prompt"]), "input")
        m = self._pattern.search(prompt)
        if m is None:
            raise LayoutError("no_question", "question_pattern does not match the prompt")
        question = m.group("question")
        for s in self.options.strip:
            question = question.replace(s, "")
        yield DumpRecord([Sample(text_of(first_of(row, ["output", "response"]), "output"),
                                 upstream_correct=correct(row.get("score")))], question=question)
