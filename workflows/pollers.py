"""Who polls a task queue: Temporal's ``DescribeTaskQueue`` for the workflow and the activity
side of one queue, read as the worker's health (``evoharness status``).

A worker's PID tells only that its process exists; a worker that lost its connection, or one
stuck before polling, still has a PID. Temporal itself knows who polls: every long poll
updates the poller's ``last_access_time``. Imports nothing but ``temporalio``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

#: A poller last seen longer ago than this no longer counts. A worker keeps one long poll open
#: per side; the server answers an empty poll after about 60 s (its long-poll expiry) and the
#: worker polls again at once, so a live worker is seen at least once a minute. The server
#: itself keeps listing a poller for minutes after it stopped, hence this cut.
POLLER_FRESH_SECONDS = 90.0


@dataclass(frozen=True)
class QueuePollers:
    """Pollers of ``task_queue`` seen within ``POLLER_FRESH_SECONDS``: ``workflow`` and
    ``activity`` count them per side; ``identities`` names them (``pid@host``)."""

    task_queue: str
    workflow: int
    activity: int
    identities: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        """Both sides are polled: workflows and activities of this queue will run."""
        return self.workflow > 0 and self.activity > 0

    def summary(self) -> str:
        """One line: ``polling: 1 workflow, 1 activity poller(s) (123@host)`` or what is
        missing."""
        who = f" ({', '.join(self.identities)})" if self.identities else ""
        counts = f"{self.workflow} workflow, {self.activity} activity poller(s)"
        if self.healthy:
            return f"polling: {counts}{who}"
        return f"NOT polling task queue {self.task_queue!r}: {counts}{who}"


async def describe_pollers(
    client: Client, task_queue: str, now: datetime | None = None
) -> QueuePollers:
    """``DescribeTaskQueue`` for both sides of ``task_queue`` in the client's namespace.
    ``now`` (UTC) is the reference time for freshness (default: the clock). Raises the
    client's ``RPCError`` when Temporal does not answer."""
    now = now or datetime.now(UTC)
    counts: dict[int, int] = {}
    names: list[str] = []
    for side in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=side,
            )
        )
        fresh = [
            p
            for p in resp.pollers
            if (now - p.last_access_time.ToDatetime(UTC)).total_seconds() <= POLLER_FRESH_SECONDS
        ]
        counts[side] = len(fresh)
        names += [p.identity for p in fresh if p.identity not in names]
    return QueuePollers(
        task_queue=task_queue,
        workflow=counts[TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW],
        activity=counts[TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY],
        identities=tuple(names),
    )


__all__ = ["POLLER_FRESH_SECONDS", "QueuePollers", "describe_pollers"]
