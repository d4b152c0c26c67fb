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
"""

from __future__ import annotations

from pipeline.reformulate.stage import (
    METHODS,
    STAGE_REASONS,
    ReformulateResult,
    generations_dir,
    ladder_dir,
    reformulate,
    run,
    select_parents,
)

__all__ = ["METHODS", "STAGE_REASONS", "ReformulateResult", "generations_dir", "ladder_dir", "reformulate", "run",
           "select_parents"]
