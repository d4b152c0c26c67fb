"""``passband verify``: the thin shell of the verify stage."""

from __future__ import annotations

import click

from pipeline.cli_options import progress_option, with_params
from pipeline.tablesets import SETS
from pipeline.verify import run


@click.command()
@click.option("--set", "set_name", type=click.Choice(SETS), default="main", show_default=True,
              help="Table set: the main problems or the reformulated ones.")
@click.option("--retry-failed", is_flag=True,
              help="Verify again the rollouts whose verdict from the current verifier is `timeout` or `error` "
                   "(replacing those verdicts).")
@with_params
@progress_option
def command(*, params, root, set_name: str, progress: bool, retry_failed: bool) -> None:
    """Turn rollouts into verdicts: extract the final answer, grade it against the gold with math-verify.

    Each check runs in a worker process with a CPU-time bound (verify.timeout_s) and a memory
    limit (verify.memory_mb); a check past its bound is killed and recorded as `timeout`.
    Rollouts that already have a verdict from the same verifier_id are skipped; with
    --retry-failed, those whose verdict is `timeout` or `error` are verified again. Rollouts of
    problems no longer in the problems table (a narrowed source) are kept as a cache and skipped.
    """
    result = run(params, root=root, set_name=set_name, progress=progress, retry_failed=retry_failed)
    m = result.metrics()
    statuses = ", ".join(f"{status} {n}" for status, n in m["status"].items() if n)
    click.echo(f"verify[{set_name}]: {result.verdicts.num_rows} new verdicts ({result.verifier_id}), "
               f"{result.checks} distinct checks, {result.restarts} worker restarts" + (f"; {statuses}" if statuses else ""))
