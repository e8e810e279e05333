"""The post-promotion check as the registry sees it: a Temporal workflow started *by name*.

The registry service starts ``PostPromotionWorkflow`` (defined in ``workflows.postpromotion``)
after every channel move, without importing workflow code: services never import
``workflows`` (an import contract in ``.importlinter``). The input is plain JSON with the fields
of ``workflows.postpromotion.PostPromotionInput``; the worker's pydantic data converter
validates it on arrival. This module owns the workflow's type name and id scheme; the workflow
module imports them from here.
"""

from __future__ import annotations

from typing import Any

#: Temporal workflow type of the check (``@workflow.defn(name=...)`` in workflows.postpromotion).
WORKFLOW_TYPE = "PostPromotionWorkflow"


def workflow_id(channel: str, version: int) -> str:
    """The check's workflow id for a channel move (one check per move)."""
    return f"postpromotion-{channel}-v{version}"


async def start_by_name(client: Any, payload: dict[str, Any], task_queue: str) -> Any:
    """Start the check with ``payload`` (the JSON of a ``PostPromotionInput``) on ``task_queue``.

    ``client``: a temporalio ``Client``. Returns the workflow handle; starting the same move
    twice raises ``temporalio.exceptions.WorkflowAlreadyStartedError``."""
    return await client.start_workflow(
        WORKFLOW_TYPE,
        payload,
        id=workflow_id(payload["channel"], payload["version"]),
        task_queue=task_queue,
    )
