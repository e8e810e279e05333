"""Post-promotion check: a small Temporal workflow that runs a just-promoted harness on the
preservation split and exports the regression it sees, so the regression alert has real
data.

``PostPromotionWorkflow`` runs one activity, ``postpromotion_check``, which executes the
promoted harness and the harness the channel served before it on every (preservation task,
seed) with the worker's TRACE ports (the same runtime, generator and verifier the gate
uses), then computes, over the matched (task, seed, constraint) verdicts
(docs/architecture.md, "Gates are statistical"):

- ``regression = max(0, pass_rate(previous) - pass_rate(promoted))``;
- ``epsilon = max(0.01, 1 / n_verdicts)`` (the gate's default: one net flip);

and sets ``evoharness_postpromotion_regression{channel}`` and
``evoharness_postpromotion_epsilon{channel}`` on the worker's metrics endpoint. With no
previous harness (a channel's first promotion) the regression is 0.

The registry service starts this workflow after every successful promotion when its
``registry.postpromotion`` settings name a Temporal address and a preservation split
(``start_postpromotion``); the workflow id ``postpromotion-<channel>-v<version>`` makes the
start idempotent.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from evoharness.harness.schema import Harness
    from evoharness.trace.models import DEFAULT_SEEDS
    from services.registry.postpromotion import WORKFLOW_TYPE, workflow_id
    from workflows.params import Backends, TaskSource


class PostPromotionInput(BaseModel):
    """What to check: the promoted harness (``registration_id`` on ``channel`` at channel
    ``version``), the one served before it (None for a first promotion), the preservation
    split and the seeds."""

    model_config = ConfigDict(extra="forbid")

    channel: str
    registration_id: str
    version: int = 0
    harness: Harness
    previous_registration_id: str | None = None
    previous: Harness | None = None
    preservation: TaskSource
    seeds: list[int] = Field(default_factory=lambda: list(DEFAULT_SEEDS), min_length=1)
    backends: Backends = Field(default_factory=Backends)
    timeout_s: int = Field(default=3600, ge=10)
    heartbeat_timeout_s: int = Field(default=120, ge=5)


class PostPromotionResult(BaseModel):
    """The check's outcome. Pass rates are over matched (task, seed, constraint) verdicts."""

    channel: str
    registration_id: str
    n_tasks: int
    n_seeds: int
    n_verdicts: int
    pass_rate_promoted: float
    pass_rate_previous: float | None
    regression: float
    epsilon: float
    exceeds_epsilon: bool


def regression_report(
    promoted: list[Any], previous: list[Any] | None
) -> tuple[int, float, float | None, float, float]:
    """``(n_verdicts, pass_promoted, pass_previous, regression, epsilon)`` from executions
    (``evoharness.trace.models.Execution``) of the same (task, seed) pairs in the same
    order. Raises ``ValueError`` when the two lists do not match pair by pair."""
    from evoharness.trace.aggregate import pass_rate

    n = sum(len(e.evidence) for e in promoted)
    p_new = pass_rate(promoted)
    if previous is None:
        return n, p_new, None, 0.0, max(0.01, 1.0 / n) if n else 0.01
    keys_new = [(e.task_id, e.seed, len(e.evidence)) for e in promoted]
    keys_old = [(e.task_id, e.seed, len(e.evidence)) for e in previous]
    if keys_new != keys_old:
        raise ValueError("promoted and previous executions are not matched by (task, seed)")
    p_old = pass_rate(previous)
    return n, p_new, p_old, max(0.0, p_old - p_new), max(0.01, 1.0 / n) if n else 0.01


class PostPromotionActivities:
    """The check activity, on a worker's ``workflows.activities.TraceActivities`` (its
    store, ports and split loading)."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace

    @activity.defn(name="postpromotion_check")
    def check(self, inp: PostPromotionInput) -> PostPromotionResult:
        """Run both harnesses on the preservation split; export and return the regression."""
        from services.common.metrics import POSTPROMOTION_EPSILON, POSTPROMOTION_REGRESSION

        tasks = self.trace.split_tasks("preservation", inp.preservation)
        ports = self.trace.ports(inp.backends)
        done = 0

        def run(h: Harness) -> list[Any]:
            nonlocal done
            out = []
            for t in tasks:
                for s in inp.seeds:
                    out.append(ports.execute(h, t, s))
                    done += 1
                    activity.heartbeat(done)
            return out

        promoted = run(inp.harness)
        previous = run(inp.previous) if inp.previous is not None else None
        n, p_new, p_old, regression, eps = regression_report(promoted, previous)
        POSTPROMOTION_REGRESSION.labels(channel=inp.channel).set(regression)
        POSTPROMOTION_EPSILON.labels(channel=inp.channel).set(eps)
        activity.logger.info(
            "post-promotion %s %s: pass %.4f vs %s, regression %.4f (epsilon %.4f)",
            inp.channel,
            inp.registration_id,
            p_new,
            "n/a" if p_old is None else f"{p_old:.4f}",
            regression,
            eps,
        )
        return PostPromotionResult(
            channel=inp.channel,
            registration_id=inp.registration_id,
            n_tasks=len(tasks),
            n_seeds=len(inp.seeds),
            n_verdicts=n,
            pass_rate_promoted=p_new,
            pass_rate_previous=p_old,
            regression=regression,
            epsilon=eps,
            exceeds_epsilon=regression > eps,
        )

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [self.check]


@workflow.defn(name=WORKFLOW_TYPE)
class PostPromotionWorkflow:
    """Runs ``postpromotion_check`` once (retried up to 3 times on failure)."""

    @workflow.run
    async def run(self, inp: PostPromotionInput) -> PostPromotionResult:
        return await workflow.execute_activity(
            "postpromotion_check",
            inp,
            result_type=PostPromotionResult,
            start_to_close_timeout=timedelta(seconds=inp.timeout_s),
            heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )


async def start_postpromotion(client: Any, inp: PostPromotionInput, task_queue: str) -> Any:
    """Start the check on ``task_queue`` (``client``: a temporalio ``Client`` with the pydantic
    data converter). Returns the workflow handle; starting the same move twice raises
    ``temporalio.exceptions.WorkflowAlreadyStartedError``."""
    return await client.start_workflow(
        PostPromotionWorkflow.run,
        inp,
        id=workflow_id(inp.channel, inp.version),
        task_queue=task_queue,
    )


if __name__ == "__main__":  # Temporal workflow modules need a __main__ guard
    pass
