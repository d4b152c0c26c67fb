"""Versioned prompt templates: one file each, ``pipeline/prompts/<name>.yaml`` (or a user's own, listed in params.yaml's
``plugins``: docs/operations.md).

A template renders a question either as raw completion text (``chat: false``) or as chat
messages that the engine passes through the model's own chat template (``chat: true``)::

    >>> render(load_template("fewshot_arith"), "What is 3 + 5?").text.splitlines()[-2:]
    ['Q: What is 3 + 5?', 'A:']

Its name, version and a digest of everything that shapes the rendered text (system prompt,
examples, template) are part of the policy_id, so an edited template never reuses rollouts
made with the old text, even when someone forgets to bump the version.

A third kind, ``apply_chat_template: true`` (with ``chat: true``), is rendered by passband itself
with the policy model's own tokenizer into the text the engine completes, ``enable_thinking``
and a ``generation_prefix`` included (pipeline/rollout/chat_template.py); the presets for the
common math prompts (``qwen25_math_cot``, ``r1_distill``, ``qwen3_thinking``, ``qwen3_nothinking``)
are of that kind. Those fields at their defaults are left out of the digest, so the templates
that do not use them keep their digests (and their policies their ids).
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from pipeline.config import NAME_PATTERN, ConfigError, Model, Name, format_error, unknown_name
from pipeline.engines import Prompt
from pipeline.keys import canonical_json, digest
from pipeline.plugins import YAML_LOADERS, Registry

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
PLACEHOLDER = "{question}"
CHAT_TEMPLATE_FIELDS = ("apply_chat_template", "enable_thinking", "generation_prefix")


class Example(Model):
    question: str
    answer: str


class PromptTemplate(Model):
    """One prompt template file."""

    name: Name
    version: str
    description: str = ""
    chat: bool
    system: str | None = None
    template: str
    examples: list[Example] = Field(default_factory=list)
    separator: str = Field("\n\n", description="between the blocks of a raw (chat: false) prompt")
    apply_chat_template: bool = Field(
        False, description="render with the policy model's own tokenizer (tokenizer.apply_chat_template, "
                           "add_generation_prompt=True) into the text the engine completes; needs chat: true")
    enable_thinking: bool | None = Field(
        None, description="passed to the chat template (Qwen3's switch); None: not passed. An error for a model "
                          "whose chat template does not use it")
    generation_prefix: str | None = Field(
        None, description="appended after the chat template's generation prompt unless it already ends with it "
                          "(R1 distills: '<think>\\n')")

    @field_validator("version", mode="before")
    @classmethod
    def _version_str(cls, v):
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("template")
    @classmethod
    def _has_placeholder(cls, v: str) -> str:
        if v.count(PLACEHOLDER) != 1:
            raise ValueError(f"template must contain {PLACEHOLDER} exactly once, got {v!r}")
        return v

    @model_validator(mode="after")
    def _chat_template_fields(self) -> PromptTemplate:
        if self.apply_chat_template and not self.chat:
            raise ValueError("apply_chat_template: true renders chat messages; it needs chat: true")
        if not self.apply_chat_template:
            used = [f for f in ("enable_thinking", "generation_prefix") if getattr(self, f) is not None]
            if used:
                raise ValueError(f"{', '.join(used)} only apply with apply_chat_template: true")
        return self

    @property
    def digest(self) -> str:
        """sha256 prefix of everything that shapes the rendered prompt (not the description).

        The chat-template fields count only when set, so templates without them keep the digest
        they had before those fields existed.
        """
        data = self.model_dump(exclude={"description"})
        for name in CHAT_TEMPLATE_FIELDS:
            if data[name] == type(self).model_fields[name].default:
                del data[name]
        return digest(canonical_json(data))

    def fill(self, question: str) -> str:
        # str.replace, not str.format: questions and templates hold braces (\frac{a}{b}, \boxed{}).
        return self.template.replace(PLACEHOLDER, question)


def render(template: PromptTemplate, question: str, *, system: str | None = None) -> Prompt:
    """Render ``question``; ``system`` (when given) replaces the template's system prompt.

    An ``apply_chat_template`` template gives its chat messages here (what a trainer's own chat
    template takes, as in the published ``prompt`` column); a policy renders them to text with its
    model's tokenizer (:class:`pipeline.rollout.chat_template.ChatTemplateRenderer`).
    """
    system = template.system if system is None else system
    if template.chat:
        messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
        for ex in template.examples:
            messages.append({"role": "user", "content": template.fill(ex.question)})
            messages.append({"role": "assistant", "content": ex.answer})
        messages.append({"role": "user", "content": template.fill(question)})
        return Prompt(messages=tuple(messages))
    blocks = [system] if system else []
    blocks += [f"{template.fill(ex.question)} {ex.answer}" for ex in template.examples]
    blocks.append(template.fill(question))
    return Prompt(text=template.separator.join(blocks))


def _scan(registry: Registry[Path]) -> None:
    for path in sorted(PROMPTS_DIR.glob("*.yaml")):
        registry.add(path.stem, path, origin=str(path))


# name -> its file: the templates of pipeline/prompts/ and a user's own (a .yaml in params.yaml's plugins)
PROMPTS: Registry[Path] = Registry("prompt template", scan=_scan)


def add_template_file(path: Path) -> None:
    """Register the template in ``path`` (a user's plugin), checked as :func:`load_template` checks it."""
    path = Path(path).resolve()
    PROMPTS.add(_load(path, path.stat().st_mtime_ns).name, path, origin=str(path))


YAML_LOADERS["prompt template"] = ("template", add_template_file)


def known_templates(directory: Path = PROMPTS_DIR) -> list[str]:
    if Path(directory) == PROMPTS_DIR:
        return sorted(PROMPTS)
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


@functools.cache
def _load(path: Path, mtime_ns: int) -> PromptTemplate:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping")
    try:
        tpl = PromptTemplate.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_error(exc, str(path))) from None
    if tpl.name != path.stem:
        raise ConfigError(f"{path}: declares name {tpl.name!r}, expected {path.stem!r} (the file name)")
    return tpl


def load_template(name: str, *, directory: Path = PROMPTS_DIR) -> PromptTemplate:
    """The template ``<directory>/<name>.yaml``; an unknown name lists the known ones."""
    path = Path(directory) / f"{name}.yaml"
    if Path(directory) == PROMPTS_DIR and NAME_PATTERN.fullmatch(name) and name in PROMPTS:
        path = PROMPTS[name]
    if not NAME_PATTERN.fullmatch(name) or not path.is_file():  # a name is a file name, never a path
        raise unknown_name(f"prompt template (in {directory})", name, known_templates(directory))
    return _load(path, path.stat().st_mtime_ns)
