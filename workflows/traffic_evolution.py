"""Scheduled evolution from production traffic (issue 34): ``TrafficEvolutionWorkflow``.

Started by a Temporal Schedule (``workflows.schedules``, ``evoharness schedule create``) or by
hand, one run:

1. ``traffic_tasks``: reads the channel's sampled requests of the last ``window_days`` UTC days
   (``evoharness.traffic``), builds the label-free task set (one task per distinct prompt, the
   fixed extractor reads the constraints) and deals it into target / held-out / preservation
   splits (``evoharness.tasks.splits.compute_splits``, seeded); it also resolves what the
   channel serves (its stable registration, harness document and channel version).
2. When the window holds fewer than ``min_tasks`` tasks, stops there (``skipped``).
3. Runs ``EvolutionWorkflow`` as a child from the stable harness on those splits, with the
   run parameters of ``evolution`` (rounds, seeds, budgets, backends, gate).
4. The child's best harness beats the serving one on those tasks exactly when it is not the
   starting harness: every frontier entry was accepted by the gate against its parent on the
   same tasks and fresh validation seeds, with no preservation regression. Then
   ``promote_canary`` sets it as the channel's canary at ``canary_weight`` — a compare-and-set
   on the channel version read in step 1, so a promotion made meanwhile is never overwritten;
   the stable registration keeps serving the rest. Otherwise the channel is not moved.
5. Awaits ``CanaryCheckWorkflow`` (``workflows/postpromotion_canary.py``) as a child: the
   canary is judged against the stable registration on the live traffic sampled since its
   promotion and rolled back (compare-and-set) when it does worse; too few requests by the
   check's deadline end it ``inconclusive``, the canary left in place. ``canary_check=None``
   skips this step (judge by hand: ``evoharness traffic canary-check``). While the check
   waits the run stays open, and the schedule (overlap policy: skip) starts no other run of
   the channel: keep the check's ``deadline_s`` below the schedule's interval.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.evolution import EvolutionWorkflow
    from workflows.params import EvolutionParams, EvolutionResult, HarnessRef, Splits, TaskSource
    from workflows.postpromotion_canary import (
        CanaryCheckInput,
        CanaryCheckResult,
        CanaryCheckWorkflow,
        check_id,
        registry_of,
    )


class TrafficEvolutionInput(BaseModel):
    """One scheduled evolution of ``channel``. ``sizes``: target, held-out and preservation
    task counts (scaled down when the window holds fewer tasks); ``evolution``: fields of
    ``EvolutionParams`` for the child run (``run_id``, ``harness`` and ``splits`` are set
    here); ``canary_check``: fields of ``CanaryCheckInput`` for the post-promotion check
    (thresholds, ``poll_s``, ``deadline_s``; the rest is set here), None to skip it."""

    model_config = ConfigDict(extra="forbid")

    channel: str = Field(min_length=1)
    window_days: int = Field(default=7, ge=1, le=366)
    prefix: str = "traffic"
    sizes: list[int] = Field(default_factory=lambda: [40, 20, 20], min_length=3, max_length=3)
    split_seed: int = 0
    min_tasks: int = Field(default=20, ge=3)
    extractor: str = "rules-v1"
    canary_weight: float = Field(default=0.1, gt=0, le=1)
    evolution: dict[str, Any] = Field(default_factory=dict)
    canary_check: dict[str, Any] | None = Field(default_factory=dict)
    activity_timeout_s: float = Field(default=600, gt=0)

    @field_validator("canary_check")
    @classmethod
    def _check_fields(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        """Refuse at creation what the check would refuse after the evolution ran."""
        if v is not None:
            set_here = {"channel", "canary_registration_id", "channel_version", "since", "prefix"}
            if set_here & v.keys():
                raise ValueError(f"canary_check: {sorted(set_here & v.keys())} are set by the run")
            CanaryCheckInput(channel="c", canary_registration_id="r", channel_version=1, **v)
        return v


class TrafficTasksRequest(BaseModel):
    """What ``traffic_tasks`` reads and deals."""

    channel: str
    since: date
    until: date
    prefix: str
    sizes: list[int]
    split_seed: int
    extractor: str


class TrafficTasksResult(BaseModel):
    """The dealt splits and what the channel serves."""

    n_records: int
    n_tasks: int
    splits: Splits
    stable_registration_id: str
    stable_harness: dict[str, Any]
    channel_version: int


class CanaryRequest(BaseModel):
    """Set ``registration_id`` as ``channel``'s canary, if the channel still serves
    ``stable_registration_id`` at ``expected_version``."""

    channel: str
    stable_registration_id: str
    expected_version: int
    registration_id: str
    weight: float
    reason: str


class CanaryPromoted(BaseModel):
    """The canary move: who, at which channel version, when (the registry's time, UTC)."""

    registration_id: str
    channel_version: int
    at: datetime


class TrafficEvolutionResult(BaseModel):
    """What one scheduled evolution did. ``skipped``: why nothing was evolved (empty when it
    ran); ``canary_registration_id``: set when the channel got a canary."""

    channel: str
    since: date
    until: date
    n_records: int
    n_tasks: int
    stable_registration_id: str = ""
    run_id: str = ""
    best_harness_id: str = ""
    accepted: int = 0  # frontier harnesses the gate accepted (round > 0)
    canary_registration_id: str | None = None
    canary_check: CanaryCheckResult | None = None
    skipped: str = ""


def run_id_for(workflow_id: str) -> str:
    """The child run's id from this workflow's id (characters a run id may hold)."""
    return "traffic-" + re.sub(r"[^A-Za-z0-9._-]", "-", workflow_id)[-80:]


class TrafficActivities:
    """The activities of ``TrafficEvolutionWorkflow`` on a worker's
    ``workflows.activities.TraceActivities`` (its artifact store and registrar; promoting needs
    the registry service's registrar)."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace

    def _registry(self) -> Any:
        return registry_of(self.trace)

    @activity.defn(name="traffic_tasks")
    def traffic_tasks(self, req: TrafficTasksRequest) -> TrafficTasksResult:
        """Read, build and deal the window's tasks; resolve the channel."""
        from evoharness.tasks.splits import compute_splits
        from evoharness.traffic.records import read_window
        from evoharness.traffic.tasks import tasks_from_records

        registry = self._registry()
        res = registry.resolve(req.channel, with_document=True)
        if res.harness is None:
            raise ApplicationError(
                f"channel {req.channel!r}: no harness document", non_retryable=True
            )
        records, batches = read_window(
            self.trace.store, req.prefix, req.channel, req.since, req.until
        )
        tasks, _ = tasks_from_records(
            records,
            channel=req.channel,
            since=req.since,
            until=req.until,
            batches=batches,
            extractor=req.extractor,
        )
        splits: dict[str, list[Any]] = {"target": [], "heldout": [], "preservation": []}
        if len(tasks) >= 3:
            dealt = compute_splits(
                [(f"traffic:{req.channel}", tasks)], tuple(req.sizes), req.split_seed
            )
            splits.update(dealt.splits)
        return TrafficTasksResult(
            n_records=len(records),
            n_tasks=len(tasks),
            splits=Splits(
                target=TaskSource(tasks=splits["target"]),
                heldout=TaskSource(tasks=splits["heldout"]),
                preservation=TaskSource(tasks=splits["preservation"]),
            ),
            stable_registration_id=res.registration_id,
            stable_harness=res.harness.model_dump(mode="json"),
            channel_version=res.version,
        )

    @activity.defn(name="promote_canary")
    def promote_canary(self, req: CanaryRequest) -> CanaryPromoted:
        """Set the canary (compare-and-set on the channel version); returns the move. A
        channel moved meanwhile is not retried: the next scheduled run starts from what it
        serves."""
        from harness_registry.errors import StalePromotion

        try:
            entry = self._registry().promote(
                req.channel,
                req.stable_registration_id,
                expected=req.stable_registration_id,
                expected_version=req.expected_version,
                canary_registration_id=req.registration_id,
                canary_weight=req.weight,
                actor="scheduled evolution",
                reason=req.reason,
            )
        except StalePromotion as exc:
            raise ApplicationError(
                f"channel {req.channel!r} moved during the run: {exc}", non_retryable=True
            ) from None
        return CanaryPromoted(
            registration_id=req.registration_id,
            channel_version=entry.version,
            at=entry.created_at,
        )

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [self.traffic_tasks, self.promote_canary]


@workflow.defn
class TrafficEvolutionWorkflow:
    """Build tasks from a channel's recent traffic, evolve on them, promote a better harness to
    the channel's canary (module docstring)."""

    @workflow.run
    async def run(self, inp: TrafficEvolutionInput) -> TrafficEvolutionResult:
        until = workflow.now().date()
        since = until - timedelta(days=inp.window_days - 1)
        opts: dict[str, Any] = {
            "start_to_close_timeout": timedelta(seconds=inp.activity_timeout_s),
            "retry_policy": RetryPolicy(maximum_attempts=3),
        }
        t = await workflow.execute_activity_method(
            TrafficActivities.traffic_tasks,
            TrafficTasksRequest(
                channel=inp.channel,
                since=since,
                until=until,
                prefix=inp.prefix,
                sizes=inp.sizes,
                split_seed=inp.split_seed,
                extractor=inp.extractor,
            ),
            **opts,
        )
        out = TrafficEvolutionResult(
            channel=inp.channel,
            since=since,
            until=until,
            n_records=t.n_records,
            n_tasks=t.n_tasks,
            stable_registration_id=t.stable_registration_id,
        )
        if t.n_tasks < inp.min_tasks:
            out.skipped = (
                f"{t.n_tasks} tasks from {t.n_records} sampled requests (< {inp.min_tasks})"
            )
            return out
        run_id = run_id_for(workflow.info().workflow_id)
        params = EvolutionParams(
            **{
                **inp.evolution,
                "run_id": run_id,
                "harness": HarnessRef(document=t.stable_harness),
                "splits": t.splits,
                "promote_channel": None,
            }
        )
        res: EvolutionResult = await workflow.execute_child_workflow(
            EvolutionWorkflow.run, params, id=f"evolve-{run_id}"
        )
        out.run_id, out.best_harness_id = run_id, res.best_harness_id
        out.accepted = sum(1 for e in res.frontier if e.round > 0)
        best = res.frontier[0] if res.frontier else None  # best first; round 0: the start
        reg = res.registrations.get(res.best_harness_id)
        if best is None or best.round == 0 or not reg:
            out.skipped = (
                f"no patch accepted on {t.n_tasks} traffic tasks: the channel is not moved"
            )
            return out
        moved = await workflow.execute_activity_method(
            TrafficActivities.promote_canary,
            CanaryRequest(
                channel=inp.channel,
                stable_registration_id=t.stable_registration_id,
                expected_version=t.channel_version,
                registration_id=reg,
                weight=inp.canary_weight,
                reason=(
                    f"scheduled evolution {run_id} on {t.n_tasks} tasks from {since}..{until}: "
                    f"{out.accepted} patch(es) accepted by the gate"
                ),
            ),
            **opts,
        )
        out.canary_registration_id = moved.registration_id
        if inp.canary_check is None:
            return out
        out.canary_check = await workflow.execute_child_workflow(
            CanaryCheckWorkflow.run,
            CanaryCheckInput(
                **{
                    **inp.canary_check,
                    "channel": inp.channel,
                    "canary_registration_id": moved.registration_id,
                    "channel_version": moved.channel_version,
                    "since": moved.at,
                    "prefix": inp.prefix,
                }
            ),
            id=check_id(inp.channel, moved.channel_version),
        )
        return out
