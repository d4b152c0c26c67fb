"""Generation engines behind one interface, picked by name.

Every engine is a small class with the same life cycle and the same two calls::

    engine = create_engine("fake", ModelSpec("m", "m", "r1", "float32"))
    with engine:                                   # start() ... close()
        samples = engine.generate([Request("p1", Prompt(text="Q: 1 + 1?\\nA:"), seeds=(7, 8), sampling=s)])

A :class:`Request` is one rendered prompt with ``n = len(seeds)`` samples; every sample has
its own seed, so its text depends only on (prompt, sampling, seed), never on what else is
in the batch. ``stream()`` yields each :class:`Sample` as soon as it is finished (what the
rollout stage uses, to write shards while the engine keeps running); ``generate()`` collects
them in request order.

An engine is one module of this folder (or a user's plugin file: docs/operations.md), a subclass of
:class:`Engine` decorated with ``@ENGINES.register``, with its ``name`` and an ``Options`` model (its knobs
under ``rollout.engine_options.<name>`` in params.yaml; unknown options are errors). An engine module imports
its heavy library (vLLM, Ray) inside its methods, so the folder scan that finds the engines stays cheap.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pipeline.config import Model, SamplingConfig, parse_options
from pipeline.errors import EngineError
from pipeline.plugins import NoOptions, Plugin, Registry

FINISH_REASONS = ("stop", "length")

@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: raw completion text, or chat messages for the model's chat template."""

    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a Prompt has exactly one of text or messages")

    @property
    def chat(self) -> bool:
        return self.messages is not None


@dataclass(frozen=True)
class ModelSpec:
    """What an engine loads: ``path`` (local checkpoint, hub id or served name) of ``model_id`` at ``revision``."""

    model_id: str
    path: str
    revision: str
    dtype: str


@dataclass(frozen=True)
class Request:
    """One prompt, ``len(seeds)`` samples, one seed per sample."""

    id: str
    prompt: Prompt
    seeds: tuple[int, ...]
    sampling: SamplingConfig

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError(f"request {self.id!r} has no seeds (n must be >= 1)")

    @property
    def n(self) -> int:
        return len(self.seeds)


@dataclass(frozen=True)
class Sample:
    """Sample ``index`` (position in the request's seeds) of request ``request_id``."""

    request_id: str
    index: int
    seed: int
    text: str
    n_tokens: int
    finish_reason: str


@dataclass
class Engine(Plugin, ABC):
    """Base class: life cycle, options and ``generate`` on top of the engine's own ``stream``."""

    name: ClassVar[str] = "?"
    Options: ClassVar[type[Model]] = NoOptions
    # the environment variable through which the engine binds its CPU threads to cores (vLLM's CPU build), so a
    # scale-out wrapper (ray) can give each replica its own slice of the cores; None: the engine binds nothing
    cpu_bind_env: ClassVar[str | None] = None

    model: ModelSpec
    options: Any = None
    root: Path = Path(".")
    startup_s: float = field(default=0.0, init=False)
    started: bool = field(default=False, init=False)
    log_path: Path | None = field(default=None, init=False)  # where the engine's own log lines go, if a file

    def __post_init__(self) -> None:
        if not isinstance(self.options, self.Options):
            self.options = parse_options(self.Options, dict(self.options or {}), where=f"engine_options.{self.name}")

    # life cycle -----------------------------------------------------------------------
    def start(self) -> float:
        """Load the model (once); return the start-up seconds."""
        if not self.started:
            t0 = time.perf_counter()
            self._start()
            self.startup_s = time.perf_counter() - t0
            self.started = True
        return self.startup_s

    def close(self) -> None:
        if self.started:
            self._close()
            self.started = False

    def __enter__(self) -> Engine:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        pass

    def _close(self) -> None:
        pass

    # generation -------------------------------------------------------------------------
    def prompt_problem(self, request: Request) -> str | None:
        """Why this engine cannot generate for ``request`` at all (a prompt past its context length), or None.

        The rollout stage skips such a problem for the policy and records the reason; the default is None."""
        return None

    @abstractmethod
    def _stream(self, requests: Sequence[Request]) -> Iterator[Sample]:
        """Yield every sample of every request, in any order, as each finishes."""

    def stream(self, requests: Iterable[Request]) -> Iterator[Sample]:
        requests = list(requests)
        ids = [r.id for r in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("request ids must be unique within one call")
        if not requests:
            return
        self.start()
        yield from self._stream(requests)

    def generate(self, requests: Iterable[Request]) -> list[Sample]:
        """Every sample of every request, in request order then sample order."""
        requests = list(requests)
        order = {r.id: i for i, r in enumerate(requests)}
        return sorted(self.stream(requests), key=lambda s: (order[s.request_id], s.index))


ENGINES: Registry[type[Engine]] = Registry("engine", package="pipeline.engines")


def get_engine(name: str) -> type[Engine]:
    """The engine class registered as ``name``; an unknown name lists the known ones."""
    return ENGINES.lookup(name)


def create_engine(name: str, model: ModelSpec, options: dict[str, Any] | None = None, *, root: Path = Path(".")) -> Engine:
    """An unstarted engine ``name`` for ``model`` with validated ``options``."""
    return get_engine(name)(model=model, options=options or {}, root=root)


__all__ = ["ENGINES", "FINISH_REASONS", "Engine", "EngineError", "ModelSpec", "NoOptions", "Prompt", "Request", "Sample",
           "create_engine", "get_engine"]
