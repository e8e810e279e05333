"""The state of an evolution run, for ``evoharness evolve status``: light on purpose.

It imports only ``temporalio.client`` and the pydantic data converter (not the workflow
definitions, whose parameters pull in scipy for the gates), so the command answers in well
under a second. The run's Temporal status comes from ``describe``; a running run adds the
``progress`` query, a failed one its error (the chain of failure causes), a completed one its
result.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

#: Temporal statuses that mean the run ended without a result.
FAILED_STATUSES = frozenset({"failed", "terminated", "timed_out", "canceled"})

#: What ``run_status`` says while the first round runs (no scores exist yet).
NO_ROUND_YET = "no round finished yet"

#: How long the ``progress`` query may wait for a worker to answer.
QUERY_TIMEOUT = timedelta(seconds=5)


class RunNotFound(LookupError):
    """No workflow ``evolve-<run_id>`` in the namespace."""


async def connect(address: str, namespace: str = "default") -> Client:
    """A Temporal client on ``address`` with the pydantic data converter: the one way the
    CLI, the worker and the tests connect (``workflows.worker`` re-exports it)."""
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter
    )


def failure_message(exc: BaseException) -> str:
    """The failure chain of a ``WorkflowFailureError`` as one line, outermost first
    (``workflow failed: activity load_splits failed: splits.target: ... does not exist``),
    repeated messages dropped."""
    parts: list[str] = []
    cur: BaseException | None = exc.cause if isinstance(exc, WorkflowFailureError) else exc
    while cur is not None:
        msg = str(getattr(cur, "message", "") or cur).strip()
        if msg and msg not in parts:
            parts.append(msg)
        cur = getattr(cur, "cause", None) or cur.__cause__
    return ": ".join(parts) or type(exc).__name__


def ended_as(exc: BaseException) -> str:
    """How a run whose result raised ``exc`` ended, for a sentence "run X <ended_as>: why":
    ``was terminated``, ``was cancelled``, ``timed out`` or ``failed`` (any other cause)."""
    from temporalio.exceptions import CancelledError, TerminatedError, TimeoutError

    cause = exc.cause if isinstance(exc, WorkflowFailureError) else exc
    if isinstance(cause, TerminatedError):
        return "was terminated"
    if isinstance(cause, CancelledError):
        return "was cancelled"
    if isinstance(cause, TimeoutError):
        return "timed out"
    return "failed"


async def run_status(client: Client, run_id: str) -> dict[str, Any]:
    """``{"run_id", "workflow_id", "status", "error"?, "progress"?, "note"?, "result"?}``
    for the run's latest execution; ``note`` is ``NO_ROUND_YET`` while the first round runs
    (``progress.scores`` is then empty). ``status`` is Temporal's, lower-case (``running``,
    ``completed``, ``failed``, ``terminated``, ``timed_out``, ``canceled``). Raises
    ``RunNotFound`` when the workflow does not exist."""
    wid = f"evolve-{run_id}"
    handle = client.get_workflow_handle(wid)
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise RunNotFound(f"no run {run_id!r} (workflow {wid})") from None
        raise
    status = (desc.status or WorkflowExecutionStatus.RUNNING).name.lower()
    out: dict[str, Any] = {"run_id": run_id, "workflow_id": wid, "status": status}
    if status == "running":
        try:
            progress = await handle.query("progress", rpc_timeout=QUERY_TIMEOUT)
            out["progress"] = progress
            if isinstance(progress, dict) and not progress.get("decisions"):
                # every finished round records a decision: until then the starting harness
                # has no measured pass rate (a worker before this change reported 0.0)
                progress["scores"] = {}
                out["note"] = NO_ROUND_YET
        except RPCError as exc:
            out["progress"] = None
            out["note"] = f"progress query not answered (is a worker running?): {exc.message}"
    elif status == "completed":
        result = await handle.result()
        if isinstance(result, dict):
            result.pop("best_harness", None)  # the whole document; best_harness_id names it
        out["result"] = result
    else:
        try:
            await handle.result(follow_runs=False)
        except WorkflowFailureError as exc:
            out["error"] = failure_message(exc)
        except Exception as exc:  # noqa: BLE001 - any failure is the run's error to report
            out["error"] = failure_message(exc)
        else:
            out["error"] = f"the run ended as {status}"
    return out
