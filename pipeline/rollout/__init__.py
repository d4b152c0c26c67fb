"""Rollout stage: k sampled completions per problem for each policy snapshot, keyed and resumable.

The shell reads the table set's problems and the rollouts already written, starts an engine
only when some key is missing (one engine per distinct model/engine/options, shared by the
policies that need it), writes each finished shard atomically as the core yields it, then
the policies table and the run's metrics. Killed at any point, a re-run redoes at most the
shards that were not yet written.

A problem whose prompt the engine cannot take at all (longer than vLLM's ``max_model_len``) is
skipped for that policy and the rest of the run completes; the skip is a ``rejects`` row (stage
``rollout``, reason ``prompt_too_long``, source_id ``<policy_id>/<problem_id>``) under
``<rollouts>/rejects/``, which the catalog's ``rejects`` view includes::

    passband sql "select source_id, detail from rejects where stage = 'rollout'"
"""

from __future__ import annotations

from pipeline.rollout.stage import RolloutResult, rollout, run

__all__ = ["RolloutResult", "rollout", "run"]
