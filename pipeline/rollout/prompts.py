"""Versioned prompt templates: one file each, ``pipeline/prompts/<name>.yaml``.

A template renders a question either as raw completion text (``chat: false``) or as chat
messages that the engine passes through the model's own chat template (``chat: true``)::

    >>> render(load_template("fewshot_arith"), "What is 3 + 5?").text.splitlines()[-2:]
    ['Q: What is 3 + 5?', 'A:']

Its name, version and a digest of everything that shapes the rendered text (system prompt,
examples, template) are part of the policy_id, so an edited template never reuses rollouts
made with the old text, even when someone forgets to bump the version.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator

from pipeline.config import ConfigError, Model, _format_error, unknown_name
from pipeline.engines.registry import Prompt
from pipeline.keys import canonical_json, digest

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
PLACEHOLDER = "{question}"


class Example(Model):
    question: str
    answer: str


class PromptTemplate(Model):
    """One prompt template file."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    version: str
    description: str = ""
    chat: bool
    system: str | None = None
    template: str
    examples: list[Example] = Field(default_factory=list)
    separator: str = Field("\n\n", description="between the blocks of a raw (chat: false) prompt")

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

    @property
    def digest(self) -> str:
        """sha256 prefix of everything that shapes the rendered prompt (not the description)."""
        return digest(canonical_json(self.model_dump(exclude={"description"})))

    def fill(self, question: str) -> str:
        # str.replace, not str.format: questions and templates hold braces (\frac{a}{b}, \boxed{}).
        return self.template.replace(PLACEHOLDER, question)


def render(template: PromptTemplate, question: str, *, system: str | None = None) -> Prompt:
    """Render ``question``; ``system`` (when given) replaces the template's system prompt."""
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


def known_templates(directory: Path = PROMPTS_DIR) -> list[str]:
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
        raise ConfigError(_format_error(exc, str(path))) from None
    if tpl.name != path.stem:
        raise ConfigError(f"{path}: declares name {tpl.name!r}, expected {path.stem!r} (the file name)")
    return tpl


def load_template(name: str, *, directory: Path = PROMPTS_DIR) -> PromptTemplate:
    """The template ``<directory>/<name>.yaml``; an unknown name lists the known ones."""
    path = Path(directory) / f"{name}.yaml"
    if not path.is_file():
        raise unknown_name(f"prompt template (in {directory})", name, known_templates(directory))
    return _load(path, path.stat().st_mtime_ns)
