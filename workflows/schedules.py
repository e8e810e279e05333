"""Temporal Schedules of scheduled evolution (issue 34): create, list, pause, unpause,
trigger and delete the schedules that start ``TrafficEvolutionWorkflow``
(``evoharness schedule ...``). A schedule's action starts the workflow with a fixed input on a
task queue; Temporal appends the start time to the workflow id, and skips a start while the
previous run of the same schedule is still going (``ScheduleOverlapPolicy.SKIP``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from workflows.traffic_evolution import TrafficEvolutionInput, TrafficEvolutionWorkflow


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule as listed: its id, whether it is paused, its note, and the workflow ids
    of its most recent starts (oldest first)."""

    schedule_id: str
    paused: bool
    note: str
    recent_workflow_ids: list[str]


async def create(
    client: Client,
    schedule_id: str,
    inp: TrafficEvolutionInput,
    *,
    every: timedelta,
    task_queue: str,
    paused: bool = False,
) -> str:
    """Create schedule ``schedule_id`` starting ``TrafficEvolutionWorkflow(inp)`` every
    ``every`` on ``task_queue``; returns its id. Raises temporalio's
    ``ScheduleAlreadyRunningError`` when the id is taken and ``ValueError`` for ``every`` under
    one minute."""
    if every < timedelta(minutes=1):
        raise ValueError(f"every {every}: a scheduled evolution runs at most once a minute")
    await client.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                TrafficEvolutionWorkflow.run,
                inp,
                id=f"{schedule_id}-run",
                task_queue=task_queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            state=ScheduleState(paused=paused, note="created paused" if paused else ""),
        ),
    )
    return schedule_id


async def describe(client: Client, schedule_id: str) -> ScheduleInfo:
    """The schedule's state and recent starts."""
    d = await client.get_schedule_handle(schedule_id).describe()
    recent = [
        a.action.workflow_id for a in d.info.recent_actions if hasattr(a.action, "workflow_id")
    ]
    return ScheduleInfo(schedule_id, d.schedule.state.paused, d.schedule.state.note or "", recent)


async def list_ids(client: Client) -> list[str]:
    """Ids of every schedule in the namespace."""
    return [s.id async for s in await client.list_schedules()]


async def pause(client: Client, schedule_id: str, note: str = "paused") -> None:
    """Pause the schedule (no new starts; a run in flight goes on)."""
    await client.get_schedule_handle(schedule_id).pause(note=note)


async def unpause(client: Client, schedule_id: str, note: str = "unpaused") -> None:
    """Resume the schedule."""
    await client.get_schedule_handle(schedule_id).unpause(note=note)


async def trigger(client: Client, schedule_id: str) -> None:
    """Start one run now (by hand), whatever the interval."""
    await client.get_schedule_handle(schedule_id).trigger(overlap=ScheduleOverlapPolicy.SKIP)


async def delete(client: Client, schedule_id: str) -> None:
    """Delete the schedule (runs it started are not touched)."""
    await client.get_schedule_handle(schedule_id).delete()
