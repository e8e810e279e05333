"""How the workflows dispatch their activities: one retry policy and the timeouts of a run's
``Dispatch`` (``workflows.params``), shared by ``EvolutionWorkflow`` and ``RoundWorkflow``.

Deterministic and free of I/O (imported by workflow code)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from workflows.params import Dispatch

#: Exponential backoff from 1 s to 30 s, six attempts; bad input (``BadInput``,
#: ``workflows.errors.bad_input``) is never retried.
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["BadInput"],
)


def activity_options(d: Dispatch, long: bool = False) -> dict[str, Any]:
    """Keyword options of ``workflow.execute_activity_method`` for dispatch ``d``: its
    start-to-close timeout (``activity_timeout_s``) and ``RETRY``; ``long``: also the
    heartbeat timeout (``heartbeat_timeout_s``), for activities that heartbeat while they
    run executions."""
    o: dict[str, Any] = {
        "start_to_close_timeout": timedelta(seconds=d.activity_timeout_s),
        "retry_policy": RETRY,
    }
    if long:
        o["heartbeat_timeout"] = timedelta(seconds=d.heartbeat_timeout_s)
    return o
