"""``llm_backward``: the engine itself writes the backward version, and only checked ones are kept.

The model gets a versioned few-shot prompt (``prompts/llm_backward.yaml``) and answers with
the number it hides and the question with that number replaced by ``x``; the stage appends
the answer sentence itself (as ``fobar`` does), so the model never states a gold::

    Original: Tom has 12 apples. He buys 5 more apples. How many apples does Tom have now?
    Number: 12
    Backward: Tom has x apples. He buys 5 more apples. How many apples does Tom have now?

The gold is the hidden number, and it is *derived and checked*, never taken on trust:
the number occurs exactly once in the original question (by value) and differs from the
answer; the rewrite uses ``x`` exactly once; the rewrite's numbers plus the hidden one are
exactly the original's numbers (nothing invented, dropped or changed); substituting the
hidden number for ``x`` gives back the original question up to light rewording (difflib
ratio >= ``min_similarity``); and the question keeps at least one other number. An output
that fails any check is a reject with that check's reason.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import Field

from pipeline import arith
from pipeline.config import ConfigError, Model
from pipeline.keys import digest, normalize_question
from pipeline.numbers import STRICT
from pipeline.reformulate import backward_rules
from pipeline.reformulate.fobar import TEMPLATE, answer_text, backward_question, equals_answer
from pipeline.reformulate.numerals import count_x, find_numbers, gold_text, has_variable_x, substitute_x, to_value
from pipeline.reformulate.registry import Child, Outcome, Parent, Reformulator, Rung, Skip, register

PROMPT_FILE = Path(__file__).parents[1] / "prompts" / "llm_backward.yaml"
_OUTPUT = re.compile(rf"^\s*(?P<num>-?{STRICT})\s*\n\s*Backward:\s*(?P<q>.+)$", re.S)


class Prompt(Model):
    name: str
    version: str
    description: str = ""
    stop: list[str] = Field(default_factory=list)
    template: str

    @property
    def digest(self) -> str:
        return digest(self.template + "\x00" + "\x00".join(self.stop), length=12)

    def render(self, question: str) -> str:
        return self.template.replace("{question}", question)


@functools.cache
def load_prompt(path: Path = PROMPT_FILE) -> Prompt:
    try:
        raw = yaml.safe_load(Path(path).read_text())
        return Prompt.model_validate(raw)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"llm_backward prompt {path}: {exc}") from None


RULES = "rules"


class LlmBackwardOptions(Model):
    writer: str = Field(
        RULES, description="'rules' (the rule-based writer, no model) or a policy name in params.policies whose engine "
                           "writes (an `openai` policy on a stronger model is the normal case)",
    )
    max_tokens: int = Field(192, gt=0)
    temperature: float = Field(0.0, ge=0, description="0: greedy, one deterministic attempt per parent")
    min_similarity: float = Field(0.85, ge=0, le=1, description="difflib ratio of the un-masked rewrite to the original")


@functools.cache
def rules_digest() -> str:
    """A digest of the rule writer's code (the rules and the arithmetic package they recompute with): its identity."""
    files = [Path(backward_rules.__file__), *sorted(Path(arith.__file__).parent.glob("*.py"))]
    return digest("".join(f.read_text(encoding="utf-8") for f in files))


@register
class LlmBackward(Reformulator):
    name = "llm_backward"
    version = "2"
    Options = LlmBackwardOptions
    reasons: ClassVar[dict[str, str]] = {
        **backward_rules.REASONS,
        "x_in_question": "the question already uses a variable x (not sent to the engine)",
        "too_few_numbers": "the question has fewer than two standalone numbers (not sent to the engine)",
        "unparseable_output": "the output is not 'NUMBER\\nBackward: QUESTION'",
        "number_not_in_question": "the hidden number is not a standalone number of the original question",
        "number_repeated": "the hidden number occurs more than once in the original question",
        "masked_equals_answer": "the hidden number equals the answer",
        "unknown_count": "the rewrite does not use x exactly once",
        "numbers_changed": "the rewrite's numbers plus the hidden one are not the original's numbers",
        "rewritten_too_much": "the rewrite with x replaced by the hidden number differs too much from the original",
    }

    @property
    def needs_engine(self) -> bool:  # type: ignore[override]
        return self.options.writer != RULES

    def ladder(self, parents: Sequence[Parent]) -> list[list[Rung]]:
        """The rule writer's rungs per parent (input, then intermediates); an engine writer's one child."""
        if self.needs_engine:
            return super().ladder(parents)
        return [backward_rules.rungs(p) for p in parents]

    @property
    def prompt(self) -> Prompt:
        return load_prompt()

    def identity(self) -> dict[str, Any]:
        opts = self.options.model_dump(mode="json")
        if not self.needs_engine:
            return {"writer": RULES, "rules": rules_digest()}
        opts.pop("writer", None)  # the policy's name is not the identity; the generator's model and revision are
        p = self.prompt
        return {"options": opts, "prompt": [p.name, p.version, p.digest], "generator": self.generator}

    def prompts(self, parents: list[Parent]) -> list[str | None]:
        """The prompt per parent, or None for the parents that are skipped before generating."""
        return [None if self.pre_skip(p) else self.prompt.render(p.question) for p in parents]

    def pre_skip(self, parent: Parent) -> Skip | None:
        if has_variable_x(parent.question):
            return self.skip("x_in_question", "the question already uses the variable x")
        if len(find_numbers(parent.question)) < 2:
            return self.skip("too_few_numbers", f"{len(find_numbers(parent.question))} standalone number(s)")
        return None

    def reformulate(self, parents: list[Parent]) -> list[Outcome]:
        prompts = self.prompts(parents)
        todo = [p for p in prompts if p is not None]
        outputs = iter(self.generate(todo) if todo else [])
        out: list[Outcome] = []
        for parent, prompt in zip(parents, prompts, strict=True):
            if prompt is None:
                out.append(self.pre_skip(parent))  # type: ignore[arg-type]
            else:
                out.append(self.check(parent, next(outputs)))
        return out

    def check(self, parent: Parent, output: str) -> Outcome:
        """Parse one generation and keep it only when every check passes."""
        m = _OUTPUT.match(output)
        if not m:
            return self.skip("unparseable_output", f"output {output[:120]!r}")
        num_text, body = m.group("num"), normalize_question(m.group("q"))
        value = to_value(num_text)
        originals = find_numbers(parent.question)
        same = [n for n in originals if n.value == value]
        if not same:
            return self.skip("number_not_in_question", f"{num_text} is not among {[n.text for n in originals]}")
        if len(same) > 1:
            return self.skip("number_repeated", f"{num_text} occurs {len(same)} times")
        hidden = same[0]
        if equals_answer(hidden, parent.answer):
            return self.skip("masked_equals_answer", f"{num_text} is the answer")
        if (nx := count_x(body)) != 1:
            return self.skip("unknown_count", f"x occurs {nx} times in {body[:120]!r}")
        kept = Counter(n.value for n in find_numbers(body))
        if kept + Counter([hidden.value]) != Counter(n.value for n in originals):
            return self.skip("numbers_changed", f"rewrite has {sorted(map(str, kept.elements()))}, original "
                                                f"{[n.text for n in originals]} with {num_text} hidden")
        restored = substitute_x(body, hidden.text)
        ratio = difflib.SequenceMatcher(None, restored.casefold(), parent.question.casefold()).ratio()
        if ratio < self.options.min_similarity:
            return self.skip("rewritten_too_much", f"similarity {ratio:.3f} < {self.options.min_similarity}")
        question = backward_question_from_body(body, parent.answer)
        meta = {
            "masked": gold_text(hidden),
            "masked_text": hidden.text,
            "masked_index": originals.index(hidden),
            "similarity": round(ratio, 4),
            "output": output,
            "prompt_version": self.prompt.version,
            "generator": self.generator,
        }
        return Child(question, gold_text(hidden), None, meta)


def backward_question_from_body(body: str, answer: str) -> str:
    return TEMPLATE.format(question=body, answer=answer_text(answer))


__all__ = ["PROMPT_FILE", "LlmBackward", "LlmBackwardOptions", "backward_question", "load_prompt"]
