"""Reformulators behind one signature, looked up by name.

A reformulator is a small class: built from its validated options (and, for the ones that
hold a model, a ``generate`` callable), it turns a batch of hard parent problems into one
outcome per parent, in order: a :class:`Child` (a new verifiable problem) or a :class:`Skip`
(one of its documented ``reasons`` and a human-readable detail)::

    class Fobar(Reformulator):
        name, version = "fobar", "1"
        reasons = {"no_number": "...", ...}
        Options = FobarOptions

        def one(self, parent):  # or override reformulate(parents) to batch (llm_backward)
            ...

``method_version`` (stored on every child, part of its identity) is the code version plus a
digest of everything else that shapes the output (options, prompt text, generator), so a
changed option or prompt never passes for the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from pipeline.config import ConfigError, parse_options
from pipeline.keys import canonical_json, digest
from pipeline.plugins import NoOptions, Plugin, Registry


@dataclass(frozen=True, slots=True)
class Parent:
    """A too-hard problem selected for reformulation (a row of ``problems``)."""

    problem_id: str
    source: str
    question: str
    answer: str
    solution: str | None = None
    split: str | None = None
    subject: str | None = None
    level: str | None = None


@dataclass(frozen=True, slots=True)
class Child:
    """A reformulation: the new question, its verifiable gold, and what the method recorded."""

    question: str
    answer: str
    solution: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Skip:
    """No reformulation for this parent: a machine-readable reason and a detail."""

    reason: str
    detail: str


Outcome = Child | Skip
Rung = tuple[str, Outcome]  # (label, what the method made for that rung)

# prompts in, one completion per prompt out (the engine behind llm_backward)
Generate = Callable[[list[str]], list[str]]


class Reformulator(Plugin):
    """A reformulation method (the one plugin shape, :class:`pipeline.plugins.Plugin`): its knobs under
    ``reformulate.options.<name>``, and one method, ``one(parent)`` (or ``reformulate(parents)``, to batch)."""

    name: ClassVar[str]
    version: ClassVar[str]
    reasons: ClassVar[dict[str, str]]
    Options: ClassVar[type[BaseModel]] = NoOptions
    needs_engine: ClassVar[bool] = False
    # rungs are ordered by how much they help: a rung already too easy ends the ladder
    monotone: ClassVar[bool] = False

    def __init__(self, options: BaseModel, *, generate: Generate | None = None, generator: dict[str, Any] | None = None):
        super().__init__(options, where=f"reformulate.options.{self.name}")
        if self.needs_engine and generate is None:
            raise ConfigError(f"reformulation method {self.name!r} needs an engine to generate with")
        self.generate = generate
        self.generator = generator or {}

    def identity(self) -> dict[str, Any]:
        """Everything besides the code version that shapes the output."""
        return {"options": self.options.model_dump(mode="json")}

    @property
    def writer(self) -> str:
        """Who wrote the children: ``rules`` for the deterministic methods, else the generating model."""
        g = self.generator
        if not g:
            return "rules"
        return f"{g.get('model')}@{str(g.get('revision'))[:19]} ({g.get('engine')})"

    @property
    def method_version(self) -> str:
        return f"{self.version}-{digest(canonical_json(self.identity()), length=8)}"

    def reformulate(self, parents: Sequence[Parent]) -> list[Outcome]:
        """One outcome per parent, in order; methods that batch (an engine) override this."""
        return [self.one(p) for p in parents]

    def one(self, parent: Parent) -> Outcome:
        raise NotImplementedError

    def ladder(self, parents: Sequence[Parent]) -> list[list[Rung]]:
        """Per parent, the rungs to measure, least help first (one rung, labelled ``1``, unless overridden)."""
        return [[("1", out)] for out in self.reformulate(parents)]

    def skip(self, reason: str, detail: str) -> Skip:
        if reason not in self.reasons:
            raise AssertionError(f"{self.name}: undocumented reason {reason!r}")
        return Skip(reason, detail)


# the methods: one module each in pipeline/reformulate/methods/ (found by a folder scan the first time the registry is
# read), and a user's own (a plugin file params.yaml lists: docs/operations.md)
METHODS: Registry[type[Reformulator]] = Registry("reformulation method", package="pipeline.reformulate.methods")
register = METHODS.register


def get_method(name: str) -> type[Reformulator]:
    return METHODS.lookup(name)


def build(
    name: str, options: dict[str, Any], *, generate: Generate | None = None, generator: dict[str, Any] | None = None
) -> Reformulator:
    """The reformulator ``name`` with its options validated (``reformulate.options.<name>``).

    ``generate`` and ``generator`` (the identity of the policy behind it) are for the methods
    that need an engine; the others ignore them.
    """
    cls = get_method(name)
    opts = parse_options(cls.Options, options, where=f"reformulate.options.{name}")
    return cls(opts, generate=generate, generator=generator)

