"""Prompts rendered with the policy model's own chat template (``tokenizer.apply_chat_template``).

A prompt template with ``apply_chat_template: true`` is rendered by passband, not by the engine:
its chat messages (the system line, the user turn) go through the chat template of the policy
model's tokenizer with ``add_generation_prompt=True`` (and ``enable_thinking`` where the template
sets it), a ``generation_prefix`` is added when the template does not already end with it, and
every engine completes the same text. With the ``qwen3_thinking`` preset and Qwen3's tokenizer::

    <|im_start|>user
    What is 3 + 5?
    Please reason step by step, and put your final answer within \\boxed{}.<|im_end|>
    <|im_start|>assistant

(``qwen3_nothinking`` ends in ``<think>\\n\\n</think>\\n\\n``; ``r1_distill`` in ``<｜Assistant｜><think>\\n``.)

Engines tokenize a text prompt with the tokenizer's special tokens (vLLM's ``generate``, ``vllm
serve``'s ``/v1/completions``), so a BOS token that the template writes and the tokenizer adds
anyway (the R1 distills) is taken off the rendered text: the model sees it once.

What shapes the text is part of ``policy_id`` (:meth:`ChatTemplateRenderer.identity`): a digest
of the chat template itself and the prompt rendered around the placeholder ``{question}``. A new
tokenizer revision with an edited template is a new policy; the same template is the same one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import ConfigError
from pipeline.engines import Prompt
from pipeline.keys import digest
from pipeline.rollout.prompts import PLACEHOLDER, PromptTemplate, render

THINKING_VARIABLE = "enable_thinking"


def template_variables(chat_template: str) -> set[str]:
    """The variables a jinja chat template reads from its context (``messages``, ``enable_thinking``, ...)."""
    import jinja2
    import jinja2.ext
    import jinja2.meta
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(extensions=[jinja2.ext.loopcontrols])
    try:
        return set(jinja2.meta.find_undeclared_variables(env.parse(chat_template)))
    except jinja2.TemplateSyntaxError:  # a tag only transformers knows ({% generation %}): look for the name
        return {THINKING_VARIABLE} if THINKING_VARIABLE in chat_template else set()


@functools.lru_cache(maxsize=16)
def load_tokenizer(source: str, *, revision: str | None = None) -> Any:
    """The tokenizer of ``source`` (a local directory, or a hub id at ``revision``); a ConfigError if it cannot load."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ConfigError(f"chat-template prompts need transformers (pip install 'passband[cpu]' or '[gpu]'): {exc}") from None
    local = Path(source).is_dir()
    try:
        return AutoTokenizer.from_pretrained(source, revision=None if local else revision)
    except (OSError, ValueError) as exc:
        where = f"{source} at revision {revision}" if revision and not local else source
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot load the tokenizer of {where} ({first}); set the policy's `tokenizer` to a local "
                          f"directory holding its tokenizer_config.json") from None


def _adds_bos(tokenizer: Any) -> bool:
    """Does encoding a text with special tokens put the BOS token first (as the R1 distills' tokenizer does)?"""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return bool(with_special) and with_special[0] == bos_id and (not without or without[0] != bos_id)


@dataclass(frozen=True)
class ChatTemplateRenderer:
    """Renders one ``apply_chat_template`` prompt template with one tokenizer (``source`` names it in errors)."""

    template: PromptTemplate
    tokenizer: Any = field(repr=False, compare=False)
    source: str
    system: str | None = None
    chat_template: str = field(init=False, default="")  # the jinja text, from the tokenizer
    strip_bos: str | None = field(init=False, default=None)  # the BOS the engine's tokenization adds anyway

    def __post_init__(self) -> None:
        if not self.template.apply_chat_template:
            raise ValueError(f"prompt template {self.template.name!r} does not set apply_chat_template")
        try:
            text = self.tokenizer.get_chat_template()
        except ValueError:
            raise ConfigError(f"prompt {self.template.name!r} renders with the model's chat template, but the "
                              f"tokenizer of {self.source} has none; pick a prompt with apply_chat_template: false "
                              f"or set the policy's `tokenizer` to one that has a chat template") from None
        thinking = self.template.enable_thinking
        if thinking is not None and THINKING_VARIABLE not in template_variables(text):
            raise ConfigError(f"prompt {self.template.name!r} sets enable_thinking: {str(thinking).lower()}, "
                              f"but the chat template of {self.source} does not use enable_thinking; pick a prompt "
                              f"without it (e.g. zeroshot_boxed or qwen25_math_cot)")
        bos = getattr(self.tokenizer, "bos_token", None)
        object.__setattr__(self, "chat_template", text)  # frozen: set once, here
        object.__setattr__(self, "strip_bos", bos if bos and _adds_bos(self.tokenizer) else None)

    def kwargs(self) -> dict[str, Any]:
        """What apply_chat_template gets besides the messages."""
        out: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True}
        if self.template.enable_thinking is not None:
            out[THINKING_VARIABLE] = self.template.enable_thinking
        return out

    def text(self, question: str) -> str:
        messages = list(render(self.template, question, system=self.system).messages or ())
        text = self.tokenizer.apply_chat_template(messages, **self.kwargs())
        if self.strip_bos and text.startswith(self.strip_bos):
            text = text[len(self.strip_bos):]
        prefix = self.template.generation_prefix
        if prefix and not text.endswith(prefix):
            text += prefix
        return text

    def render(self, question: str) -> Prompt:
        return Prompt(text=self.text(question))

    def identity(self) -> dict[str, Any]:
        """What policy_id adds for this kind: the chat template's digest and the prompt around ``{question}``."""
        return {"digest": digest(self.chat_template), "rendered": self.text(PLACEHOLDER)}
