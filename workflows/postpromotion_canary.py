"""Post-promotion canary check on live sampled traffic (issue 34): ``CanaryCheckWorkflow``.

After a harness becomes a channel's canary (``TrafficEvolutionWorkflow`` awaits this workflow
as a child; anyone may start it for a canary set by hand), the runtime service samples the
Render requests both arms serve. This workflow looks at them with the activity
``canary_check`` — one look of ``services.registry.canary.check_canary``, the same function
``evoharness traffic canary-check`` runs — and:

- rolls the canary back when it does worse than the stable registration (Fisher's exact
  test, one-sided, on the requests served since the promotion), by a compare-and-set on the
  channel version that set the canary: a channel moved meanwhile is reported (``lost_race``,
  ``channel_moved``), never overwritten;
- keeps it when both arms have ``min_requests`` decided requests and it is not worse;
- otherwise sleeps ``poll_s`` (a durable Temporal timer) and looks again, until
  ``deadline_s`` after the workflow started; then ends ``inconclusive``, without rolling
  back — a canary too little used to judge keeps its share until a person or the next run
  decides.

Each look is one activity and one timer in the history (``deadline_s / poll_s`` looks at
most: a day at the 10-minute default is 144, well within a history's limits).
"""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

#: The workflow's final outcomes: those of one look (``services.registry.canary``) less
#: ``waiting`` and ``worse``, plus ``inconclusive`` (the deadline came first).
FinalOutcome = Literal["rolled_back", "kept", "inconclusive", "channel_moved", "lost_race"]


class CanaryCheckInput(BaseModel):
    """Judge ``canary_registration_id``, set as ``channel``'s canary at channel version
    ``channel_version`` at ``since`` (None: read from the channel history). Thresholds as
    ``evoharness.traffic.canary``; ``prefix``: where the runtime samples traffic."""

    model_config = ConfigDict(extra="forbid")

    channel: str = Field(min_length=1)
    canary_registration_id: str = Field(min_length=1)
    channel_version: int = Field(ge=1)
    since: dt.datetime | None = None
    prefix: str = "traffic"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    epsilon: float = Field(default=0.0, ge=0, lt=1)
    min_requests: int = Field(default=30, ge=1)
    poll_s: float = Field(default=600, gt=0)
    deadline_s: float = Field(default=6 * 3600, gt=0)
    activity_timeout_s: float = Field(default=120, gt=0)


class CanaryLook(BaseModel):
    """One look's result (``services.registry.canary.CanaryCheck.as_dict``'s fields)."""

    outcome: str
    detail: str
    channel_version: int
    stable: str
    since: dt.datetime
    n_canary: int = 0
    n_stable: int = 0
    pass_rate_canary: float = 0.0
    pass_rate_stable: float = 0.0
    p_value: float = 1.0


class CanaryCheckResult(BaseModel):
    """The check's verdict, the last look's figures and how many looks it took."""

    channel: str
    canary_registration_id: str
    stable_registration_id: str
    outcome: FinalOutcome
    detail: str
    looks: int
    n_canary: int
    n_stable: int
    pass_rate_canary: float
    pass_rate_stable: float
    p_value: float


def registry_of(trace: Any) -> Any:
    """The registry client of a worker's ``TraceActivities`` (its registrar's). Raises a
    non-retryable ``ApplicationError`` when the worker has none."""
    client = getattr(trace.registrar, "client", None)
    if client is None:
        raise ApplicationError(
            "the canary check and scheduled evolution need the registry service (the "
            "worker's registrar has no registry client: set EVOHARNESS_REGISTRY_TARGET)",
            non_retryable=True,
        )
    return client


class CanaryCheckActivities:
    """The look activity on a worker's ``workflows.activities.TraceActivities`` (its artifact
    store, where the runtime samples traffic, and its registry client)."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace

    @activity.defn(name="canary_check")
    def look(self, inp: CanaryCheckInput) -> CanaryLook:
        """One look (``check_canary`` with rollback on)."""
        from services.registry.canary import CanaryLookSpec, check_canary

        spec = CanaryLookSpec(
            canary_id=inp.canary_registration_id,
            expected_version=inp.channel_version,
            since=inp.since,
            prefix=inp.prefix,
            alpha=inp.alpha,
            epsilon=inp.epsilon,
            min_requests=inp.min_requests,
            rollback=True,
            actor="post-promotion canary check",
        )
        c = check_canary(registry_of(self.trace), self.trace.store, inp.channel, spec)
        activity.logger.info("canary check %s: %s: %s", inp.channel, c.outcome, c.detail)
        cmp = c.comparison
        return CanaryLook(
            outcome=c.outcome,
            detail=c.detail,
            channel_version=c.channel_version,
            stable=c.stable_id,
            since=c.since,
            n_canary=cmp.n_canary if cmp else 0,
            n_stable=cmp.n_stable if cmp else 0,
            pass_rate_canary=cmp.pass_rate_canary if cmp else 0.0,
            pass_rate_stable=cmp.pass_rate_stable if cmp else 0.0,
            p_value=cmp.p_value if cmp else 1.0,
        )

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [self.look]


@workflow.defn
class CanaryCheckWorkflow:
    """Look, sleep, look again until the canary is judged or the deadline passes (module
    docstring)."""

    @workflow.run
    async def run(self, inp: CanaryCheckInput) -> CanaryCheckResult:
        deadline = workflow.now() + timedelta(seconds=inp.deadline_s)
        looks = 0
        while True:
            look = await workflow.execute_activity_method(
                CanaryCheckActivities.look,
                inp,
                start_to_close_timeout=timedelta(seconds=inp.activity_timeout_s),
                retry_policy=RetryPolicy(maximum_attempts=5),
            )
            looks += 1
            inp = inp.model_copy(update={"since": look.since})  # every look: the same window
            outcome = look.outcome
            if outcome == "waiting":
                if workflow.now() + timedelta(seconds=inp.poll_s) > deadline:
                    outcome = "inconclusive"
                else:
                    await workflow.sleep(timedelta(seconds=inp.poll_s))
                    continue
            return CanaryCheckResult(
                channel=inp.channel,
                canary_registration_id=inp.canary_registration_id,
                stable_registration_id=look.stable,
                outcome=outcome,  # type: ignore[arg-type]  # "worse" needs rollback=False
                detail=(
                    f"{look.detail}; deadline {inp.deadline_s:.0f} s passed after {looks} looks"
                    if outcome == "inconclusive"
                    else look.detail
                ),
                looks=looks,
                n_canary=look.n_canary,
                n_stable=look.n_stable,
                pass_rate_canary=look.pass_rate_canary,
                pass_rate_stable=look.pass_rate_stable,
                p_value=look.p_value,
            )


def check_id(channel: str, version: int) -> str:
    """The check's workflow id for the canary set at ``channel``'s ``version`` (one check per
    move: starting it twice raises ``WorkflowAlreadyStartedError``)."""
    return f"canary-check-{channel}-v{version}"


if __name__ == "__main__":  # Temporal workflow modules need a __main__ guard
    pass
