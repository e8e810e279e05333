"""Client helpers: start, inspect, stop and approve evolution runs.

The workflow id of a run is ``evolve-<run_id>``. Equivalent Temporal CLI::

    temporal workflow start --type EvolutionWorkflow --task-queue evoharness \\
        --workflow-id evolve-demo --input-file params.json
    temporal workflow query --workflow-id evolve-demo --type progress
    temporal workflow signal --workflow-id evolve-demo --name stop --input '"enough"'
    temporal workflow signal --workflow-id evolve-demo --name stop_graceful --input '"enough"'
    temporal workflow update execute --workflow-id evolve-demo --name approve_promotion \\
        --input '{"approver": "alice"}'
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from workflows.evolution import EvolutionWorkflow
from workflows.params import TASK_QUEUE, Approval, EvolutionParams, EvolutionResult, Progress


def workflow_id(run_id: str) -> str:
    """The workflow id of run ``run_id``."""
    return f"evolve-{run_id}"


async def start(
    client: Client, params: EvolutionParams, task_queue: str = TASK_QUEUE
) -> WorkflowHandle[Any, Any]:
    """Start ``EvolutionWorkflow`` for ``params``; returns its handle. A run id is started
    once: while its workflow runs (conflict policy ``FAIL``) and after it has closed, however
    it ended (reuse policy ``REJECT_DUPLICATE``; the SDK's default would start a second run
    of a completed one), Temporal refuses and ``WorkflowAlreadyStartedError`` is raised.
    ``continue_as_new`` is not a new start and is unaffected."""
    return await client.start_workflow(
        EvolutionWorkflow.run,
        params,
        id=workflow_id(params.run_id),
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )


def handle(client: Client, run_id: str) -> WorkflowHandle[Any, Any]:
    """The handle of a run (latest run of the chain, across ``continue_as_new``)."""
    return client.get_workflow_handle(workflow_id(run_id), result_type=EvolutionResult)


async def progress(client: Client, run_id: str) -> Progress:
    """Query ``progress``."""
    return await handle(client, run_id).query(EvolutionWorkflow.progress)  # type: ignore[no-any-return]


async def stop(
    client: Client, run_id: str, reason: str = "stop requested", graceful: bool = False
) -> None:
    """Signal ``stop`` (the current phase finishes), or with ``graceful`` ``stop_graceful``
    (the current round finishes, then the run ends as when a budget stops it)."""
    h = handle(client, run_id)
    if graceful:
        await h.signal(EvolutionWorkflow.stop_graceful, reason)
    else:
        await h.signal(EvolutionWorkflow.stop, reason)


async def approve(client: Client, run_id: str, approval: Approval) -> str:
    """Execute the ``approve_promotion`` update; returns the approved harness id."""
    return await handle(client, run_id).execute_update(  # type: ignore[no-any-return]
        EvolutionWorkflow.approve_promotion, approval
    )
