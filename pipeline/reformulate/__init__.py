"""Reformulate stage: too-hard problems in, easier backward forms with verifiable golds out.

The shell reads the main set's ``difficulty``, ``problems`` and resolves the policies the
selection is relative to, calls the core, and writes the ``reformulated`` table set's
``problems`` and ``rejects`` (rewritten whole: the deterministic methods cost milliseconds)
plus ``reformulate.json`` metrics. The only expensive method, ``llm_backward``, keeps its
generations in ``<paths.reformulated>/generations`` keyed by method_version and prompt, so a
re-run (or a new parent) only generates what is missing. The reformulated set then goes
through ``rollout/verify/annotate --set reformulated`` for the same policies, and
``passband reformulate-report`` (see :mod:`pipeline.reformulate.report`) compares parents
and children.

The package itself exports only the methods' registry (what params.yaml's names are checked against when the
params load: importing the stage there would make every DVC stage depend on it); the stage's entry points are in
:mod:`pipeline.reformulate.stage`.
"""

from __future__ import annotations

from pipeline.reformulate.registry import METHODS, Child, Parent, Reformulator, Skip, build, get_method, register

__all__ = ["METHODS", "Child", "Parent", "Reformulator", "Skip", "build", "get_method", "register"]
