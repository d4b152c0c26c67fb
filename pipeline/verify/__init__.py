"""Verify stage: rollouts -> verdicts, incrementally (rollout keys already verified by the same verifier_id are skipped).

Each verdict records the digest of the gold it was graded against: when a problem's gold changes, the
current verifier's verdicts on that problem's rollouts are stale; they are removed from their shards
and exactly those rollouts are verified again. Shards written before the digest was recorded get the
column (null) on the first run.

With ``retry_failed``, rollouts whose verdict from the current verifier is ``timeout`` or ``error``
are verified again (a worker lost to the machine's OOM killer, a starved machine past the wall
limit). Their old verdicts are first removed from the shards that hold them (each shard rewritten
atomically), then the new ones are written: a crash in between leaves those rollouts without a
verdict, which the next run verifies; never two verdicts for one key.
"""

from __future__ import annotations

from pipeline.verify.stage import Judgement, VerifyError, VerifyResult, gold_digest, judge, judge_many, run, verifier_id, verify

__all__ = ["Judgement", "VerifyError", "VerifyResult", "gold_digest", "judge", "judge_many", "run", "verifier_id", "verify"]
