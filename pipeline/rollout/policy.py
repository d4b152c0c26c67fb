"""Policy snapshots: what a pass rate is relative to, and its key.

``policy_id`` hashes everything that shapes a completion: the model id and revision (for the
embedded model, the sha256 of its GGUF file), the engine, the dtype, every sampling
parameter, the prompt template's name, version, digest and chat flag, and the system prompt.
A prompt rendered with the model's own chat template (``apply_chat_template: true``) adds
``prompt.chat_template``: the template's digest and the prompt rendered around ``{question}``
(pipeline/rollout/chat_template.py); other prompts add nothing, so their ids stay as they were.
A policy's thinking mode (where the verifier reads the answer: pipeline/thinking.py) adds ``thinking``
when it is set (``thinking:`` in params.yaml) or derived as ``tags`` from the prompt (a template with
``enable_thinking: true``, or a rendered prompt ending in an open ``<think>``: r1_distill, qwen3_thinking);
other policies leave it to ``verify.thinking`` (in verifier_id), so their ids stay as they were.
The policy's name in params.yaml is a label, not part of the hash::

    {"dtype": "float32", "engine": "vllm", "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
     "prompt": {"chat": false, "digest": "…", "name": "fewshot_arith", "version": "1"},
     "revision": "sha256:…", "sampling": {"max_tokens": 48, "stop": ["\\nQ:", "\\n\\n"], …},
     "system_prompt": null}                                      -> pol_3f0c…

The ``policies`` table holds every snapshot readably, one row per policy_id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import keys
from pipeline.config import ConfigError, DumpConfig, PolicyConfig, SamplingConfig
from pipeline.engines import ModelSpec, Prompt
from pipeline.model import read_manifest
from pipeline.rollout.chat_template import ChatTemplateRenderer, load_tokenizer
from pipeline.rollout.layout import get_layout
from pipeline.rollout.prompts import PromptTemplate, load_template, render
from pipeline.schema import schema
from pipeline.thinking import mode_for_prompt

EMBEDDED = "embedded"
EMBEDDED_DIR = "smollm2-135m-instruct"  # under paths.models, written by `passband prepare-model`


@dataclass(frozen=True)
class Policy:
    name: str
    policy_id: str
    identity: dict[str, Any]
    model: ModelSpec
    engine: str
    template: PromptTemplate
    system_prompt: str | None
    sampling: SamplingConfig
    engine_options: dict[str, Any] = field(default_factory=dict)
    renderer: ChatTemplateRenderer | None = None  # apply_chat_template prompts: the model's chat template
    thinking: str | None = None  # the verifier's thinking mode for this policy (None: verify.thinking's)
    dump: DumpConfig | None = None  # an imported policy: its completions are read from this dump, not generated
    dump_path: Path | None = None  # the dump file, resolved

    def render(self, question: str) -> Prompt:
        if self.renderer is not None:
            return self.renderer.render(question)
        return render(self.template, question, system=self.system_prompt)

    def row(self) -> dict[str, Any]:
        """This policy as a row of the ``policies`` table."""
        s = self.sampling
        return {
            "policy_id": self.policy_id, "name": self.name, "model": self.model.model_id,
            "revision": self.model.revision, "engine": self.engine, "dtype": self.model.dtype,
            "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "max_tokens": s.max_tokens,
            "stop": list(s.stop), "prompt_template": self.template.name, "prompt_version": self.template.version,
            "prompt_digest": self.template.digest, "system_prompt": self.system_prompt, "chat": self.template.chat,
            "identity": keys.canonical_json(self.identity),
        }


def identity(cfg: PolicyConfig, *, model_id: str, revision: str, template: PromptTemplate,
             chat_template: dict[str, Any] | None = None, thinking: str | None = None,
             dump: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything ``policy_id`` hashes (the effective system prompt, not whether it was overridden).

    ``chat_template`` (apply_chat_template prompts only): :meth:`ChatTemplateRenderer.identity`;
    ``thinking``: the policy's own thinking mode (None: the verifier's default, not hashed here); ``dump`` (an
    imported policy): the file's sha256, its layout and options and the match rule, with the engine ``import``.
    """
    prompt: dict[str, Any] = {"name": template.name, "version": template.version, "digest": template.digest,
                              "chat": template.chat}
    if chat_template is not None:
        prompt["chat_template"] = chat_template
    out = {
        "model": model_id,
        "revision": revision,
        "engine": "import" if dump is not None else cfg.engine,
        "dtype": cfg.dtype,
        "sampling": cfg.sampling.model_dump(mode="json"),
        "prompt": prompt,
        "system_prompt": cfg.system_prompt if cfg.system_prompt is not None else template.system,
    }
    if thinking is not None:
        out["thinking"] = thinking
    if dump is not None:
        out["dump"] = dump
    return out


def thinking_mode(cfg: PolicyConfig, template: PromptTemplate, prompt: Prompt) -> str | None:
    """The policy's thinking mode: its ``thinking`` setting, else ``tags`` when its prompt opens the thinking
    (:func:`pipeline.thinking.mode_for_prompt`), else None (the verifier's default). A policy that renders no text
    (an imported dump of a chat template) is read by its template's ``generation_prefix``: the completions of
    ``r1_distill`` began inside ``<think>`` whether or not passband rendered the prompt, so one cut before
    ``</think>`` holds no tag at all and must not be graded from its thinking."""
    if cfg.thinking is not None:
        return cfg.thinking
    rendered = prompt.text if prompt.text is not None else getattr(template, "generation_prefix", None)
    derived = mode_for_prompt(rendered, enable_thinking=getattr(template, "enable_thinking", None))
    return derived if derived != "auto" else None


def make_policy(name: str, cfg: PolicyConfig, *, model_id: str, revision: str, path: str,
                template: PromptTemplate | None = None, tokenizer: Any = None, dump_path: Path | None = None) -> Policy:
    """A policy from its config and a resolved model.

    Pure (no files beyond the template) unless the template renders with the model's chat template:
    then the tokenizer is loaded from the policy's ``tokenizer`` (else the model's ``path`` at its
    revision), unless one is given.
    """
    template = template or load_template(cfg.prompt)
    system = cfg.system_prompt if cfg.system_prompt is not None else template.system
    renderer = None
    if template.apply_chat_template and cfg.dump is None:  # an imported policy renders nothing: no tokenizer to load
        source = cfg.tokenizer or path
        try:
            if tokenizer is None:
                tokenizer = load_tokenizer(source, revision=None if cfg.tokenizer else revision)
            renderer = ChatTemplateRenderer(template, tokenizer, source=source, system=system)
        except ConfigError as exc:
            raise ConfigError(f"policy {name!r}: {exc}") from None
    probe = renderer.render("{question}") if renderer else render(template, "{question}", system=system)
    mode = thinking_mode(cfg, template, probe)
    dump = None
    if cfg.dump is not None:
        if dump_path is None:
            raise ConfigError(f"policy {name!r} imports a dump: resolve it with resolve_policy (the file's digest)")
        layout = get_layout(cfg.dump.layout)(cfg.dump.options, where=f"policies.{name}.dump.options")
        dump = {"sha256": keys.file_sha256(dump_path), "layout": cfg.dump.layout, "match": cfg.dump.match,
                "options": layout.options.model_dump(mode="json")}
    ident = identity(cfg, model_id=model_id, revision=revision, template=template,
                     chat_template=renderer.identity() if renderer else None, thinking=mode, dump=dump)
    return Policy(
        name=name, policy_id=keys.policy_id(ident), identity=ident,
        model=ModelSpec(model_id=model_id, path=path, revision=revision, dtype=cfg.dtype),
        engine=ident["engine"], template=template, system_prompt=ident["system_prompt"], sampling=cfg.sampling,
        engine_options=dict(cfg.engine_options), renderer=renderer, thinking=mode, dump=cfg.dump, dump_path=dump_path,
    )


def embedded_model_dir(models_dir: Path) -> Path:
    return Path(models_dir) / EMBEDDED_DIR


def resolve_policy(name: str, cfg: PolicyConfig, *, models_dir: Path, root: Path | None = None) -> Policy:
    """Resolve ``model: embedded`` to the converted checkpoint and its GGUF digest; others need ``revision``.
    An imported policy (``dump``) needs its file (relative to ``root``, the params folder) and a ``revision``."""
    if cfg.dump is not None:
        dump_path = Path(cfg.dump.path)
        dump_path = dump_path if dump_path.is_absolute() else Path(root if root is not None else ".") / dump_path
        if not dump_path.is_file():
            raise ConfigError(f"policy {name!r}: dump file not found: {dump_path}")
        if cfg.model == EMBEDDED or not cfg.revision:
            raise ConfigError(f"policy {name!r} imports a dump: declare the model that wrote it (model: a hub id, and "
                              f"its revision), since the file cannot prove it")
        return make_policy(name, cfg, model_id=cfg.model, revision=cfg.revision, path=cfg.model, dump_path=dump_path)
    if cfg.model == EMBEDDED:
        path = embedded_model_dir(models_dir)
        manifest = read_manifest(path)
        if manifest is None:
            raise ConfigError(f"policy {name!r} uses the embedded model, but {path} holds no converted checkpoint; "
                              f"run `passband prepare-model` (or `dvc repro prepare_model`) first")
        if cfg.revision is not None and cfg.revision != manifest["revision"]:
            raise ConfigError(f"policy {name!r}: revision {cfg.revision!r} does not match the embedded model's "
                              f"{manifest['revision']!r}; leave revision unset for model: embedded")
        return make_policy(name, cfg, model_id=manifest["model_id"], revision=manifest["revision"], path=str(path))
    if not cfg.revision:
        raise ConfigError(f"policy {name!r}: model {cfg.model!r} needs a revision (a commit hash or weight digest), "
                          f"so that its policy_id names one snapshot")
    return make_policy(name, cfg, model_id=cfg.model, revision=cfg.revision, path=cfg.model)


def check_distinct(policies: list[Policy]) -> None:
    """Two names for one snapshot would write the same keys twice: an error."""
    seen: dict[str, str] = {}
    for p in policies:
        if p.policy_id in seen:
            raise ConfigError(f"policies {seen[p.policy_id]!r} and {p.name!r} are the same snapshot ({p.policy_id})")
        seen[p.policy_id] = p.name


def policies_table(policies: list[Policy]) -> pa.Table:
    return schema("policies").from_rows([p.row() for p in policies])


__all__ = ["EMBEDDED", "EMBEDDED_DIR", "Policy", "check_distinct", "embedded_model_dir", "identity", "make_policy",
           "policies_table", "resolve_policy", "thinking_mode"]
