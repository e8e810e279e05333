"""The main job's evolution run through Temporal: start ``EvolutionWorkflow`` on the stack,
show its progress, wait for its result, and end it on Ctrl-C (``run_evolution``).

Progress comes from the workflow's ``progress`` query, completion from ``describe`` polling;
a Ctrl-C terminates the workflow, so it does not carry on unseen at the next
``evoharness up`` (``end_interrupted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def run_evolution(temporal: str, params: Any, console: Any, progress_bar: Callable[[], Any]) -> Any:
    """The evolution run of ``params`` through the Temporal server at ``temporal``
    (``follow``), shown on ``console`` with ``progress_bar()``; returns its
    ``EvolutionResult``. Ctrl-C ends the run
    with the job: its workflow is terminated (left alone it would sit in the stack's
    Temporal database and carry on unseen at the next ``evoharness up``, with nothing
    evaluated, reported or promoted), one line says so, and ``KeyboardInterrupt``
    propagates (the stack started here is then stopped)."""
    try:
        return asyncio.run(follow(temporal, params, console, progress_bar))
    except KeyboardInterrupt:
        console.print(end_interrupted(temporal, params.run_id), highlight=False)
        raise


def end_interrupted(temporal: str, run_id: str) -> str:
    """Terminate run ``run_id``'s workflow on the Temporal server at ``temporal`` after a
    Ctrl-C; the line to print."""
    from temporalio.service import RPCError, RPCStatusCode

    from workflows import client as wf
    from workflows.worker import connect

    wid = wf.workflow_id(run_id)

    async def terminate() -> None:
        client = await connect(temporal)
        await client.get_workflow_handle(wid).terminate(
            reason="interrupted (Ctrl-C) in evoharness evolve main"
        )

    try:
        asyncio.run(asyncio.wait_for(terminate(), 15))
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:  # not started yet, or already closed
            return f"interrupted: run {run_id} (workflow {wid}) was not running"
        return _left_running(run_id, wid, exc.message)
    except (OSError, RuntimeError, TimeoutError) as exc:
        return _left_running(run_id, wid, str(exc) or type(exc).__name__)
    return (
        f"interrupted: run {run_id} terminated (workflow {wid}); nothing was evaluated or promoted"
    )


def _left_running(run_id: str, wid: str, why: str) -> str:
    """The line for a run the Ctrl-C could not end, and how to end it."""
    return (
        f"interrupted: run {run_id} (workflow {wid}) could not be terminated ({why}); it "
        f"carries on at the next `evoharness up`: end it with `evoharness evolve stop "
        f"{run_id}`"
    )


async def follow(temporal: str, params: Any, console: Any, progress_bar: Callable[[], Any]) -> Any:
    """Start the workflow of ``params`` and follow it until it closes; its result. Progress comes from the
    ``progress`` query; completion from ``describe`` polling (robust to a slow dev
    server, unlike one long-poll on the result)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from workflows import client as wf
    from workflows.worker import connect

    client = await connect(temporal)
    await wf.start(client, params)
    handle = wf.handle(client, params.run_id)
    console.print(f"started workflow {handle.id} on task queue evoharness")
    with progress_bar() as bar:
        task = bar.add_task("evolution", total=None)
        while True:
            try:
                p = await wf.progress(client, params.run_id)
                desc = (
                    f"round {p.round} {p.phase:<9} calls {p.generator_calls:>5} "
                    f"cache hits {p.cache_hits:>5}"
                )
                bar.update(task, description=desc, completed=p.done, total=p.total or None)
            except RPCError:
                pass  # between two runs of continue_as_new, or a busy server
            try:
                d = await handle.describe()
                if d.status not in (None, WorkflowExecutionStatus.RUNNING):
                    break
            except RPCError:
                pass
            await asyncio.sleep(0.5)
    for attempt in range(5):
        try:
            return await handle.result()
        except RPCError:
            if attempt == 4:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")
