"""Scheduled evolution from production traffic (issue 34), end to end on a real Temporal dev
server, a real S3 server and the real registry service: sampled traffic of one channel is in
the store, a Temporal Schedule of ``TrafficEvolutionWorkflow`` is created and triggered by
hand, the run builds label-free tasks from that traffic, evolves the harness the channel serves
on them, and sets the accepted result as the channel's canary (the stable registration keeps
serving the rest); the schedule is listed, paused and deleted."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import Worker

from evoharness.harness.io import load_dir
from evoharness.runtime.extract import RuleExtractor
from evoharness.tasks.builders import build_geneval
from evoharness.traffic.records import TrafficRecord, batch_key, dump_batch
from harness_registry import Lineage
from services.registry.registrar import RegistryResultRegistrar
from services.storage.s3 import S3ArtifactStore
from tests.workflows.conftest import ROOT, settings_for
from workflows import schedules
from workflows.activities import TraceActivities
from workflows.evolution import EvolutionWorkflow
from workflows.round_workflow import RoundWorkflow
from workflows.tracking_activities import TrackingActivities
from workflows.traffic_evolution import (
    TrafficActivities,
    TrafficEvolutionInput,
    TrafficEvolutionResult,
    TrafficEvolutionWorkflow,
)

# slow: one evolution round on 30 tasks x 4 seeds (minutes on 2 cores)
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


def _traffic(shared: Path, channel: str, reg: str) -> list[TrafficRecord]:
    """Sampled requests: GenEval counting prompts (counts >= 3, where the served harness fails
    most) and single objects, each asked twice."""
    tasks = build_geneval(shared / "data" / "geneval" / "evaluation_metadata.jsonl")
    counting = [
        t for t in tasks if t.task_family == "counting" and (t.constraints[0].min_count or 0) >= 3
    ]
    single = [t for t in tasks if t.task_family == "single_object"]
    ex = RuleExtractor()
    now = dt.datetime.now(dt.UTC)
    return [
        TrafficRecord(
            time=now,
            channel=channel,
            registration_id=reg,
            harness_id="h",
            prompt=t.prompt,
            constraints=ex.extract(t.prompt),
        )
        for t in counting[:24] + single[:6]
        for _ in range(2)
    ]


async def test_a_triggered_schedule_evolves_on_traffic_and_sets_a_canary(
    temporal_env: Any, s3_server: Any, registry_client: Any, shared_dir: Path
) -> None:
    client = temporal_env.client
    bucket = f"traffic-evo-{uuid.uuid4().hex[:10]}"
    settings = settings_for(s3_server, bucket)
    store = S3ArtifactStore.from_settings(settings.s3)
    store.ensure_bucket()
    channel = f"traffic-{uuid.uuid4().hex[:6]}"
    base = load_dir(ROOT / "harnesses" / "baseline")
    stable, _, _ = registry_client.put(base, Lineage(registered_by="traffic-evolution-test"))
    registry_client.promote(channel, stable, expected=None, actor="test")
    records = _traffic(shared_dir, channel, stable)
    store.put(batch_key("traffic", channel, records[0].time), dump_batch(records))

    inp = TrafficEvolutionInput(
        channel=channel,
        window_days=1,
        sizes=[18, 6, 6],
        min_tasks=10,
        canary_weight=0.2,
        evolution={
            "seeds": [0, 1, 2, 3],
            "max_rounds": 1,
            "max_clusters": 1,
            "candidates_per_cluster": 2,
            "concurrency": 2,
            "batch_size": 2,
            "heartbeat_timeout_s": 5,
            "activity_timeout_s": 300,
            "backends": {"proposer": "rule"},
            # the tests' world prices no cost (tests/workflows/conftest.py, make_params)
            "gate": {"mu": 0.0},
        },
    )
    queue = f"traffic-evo-{uuid.uuid4().hex[:8]}"
    sid = f"traffic-evolution-{channel}"
    acts = TraceActivities(settings, RegistryResultRegistrar(registry_client))
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[TrafficEvolutionWorkflow, EvolutionWorkflow, RoundWorkflow],
            activities=[
                *acts.all(),
                *TrafficActivities(acts).all(),
                *TrackingActivities(acts).all(),
            ],
            activity_executor=ex,
        ):
            await schedules.create(client, sid, inp, every=dt.timedelta(days=1), task_queue=queue)
            assert sid in await schedules.list_ids(client)
            await schedules.trigger(client, sid)
            started: list[str] = []
            for _ in range(300):  # the schedule starts the run a moment after the trigger
                started = (await schedules.describe(client, sid)).recent_workflow_ids
                if started:
                    break
                await asyncio.sleep(0.2)
            assert started, "the triggered schedule started no workflow"
            handle = client.get_workflow_handle(started[-1], result_type=TrafficEvolutionResult)
            result = await handle.result()
            await schedules.pause(client, sid, "test")
            assert (await schedules.describe(client, sid)).paused
            await schedules.delete(client, sid)
            assert sid not in await schedules.list_ids(client)

    assert result.n_records == 60 and result.n_tasks == 30 and not result.skipped, result
    assert result.stable_registration_id == stable and result.accepted >= 1
    res = registry_client.resolve(channel, with_document=False)
    assert res.registration_id == stable  # the stable registration keeps serving
    assert res.canary_registration_id == result.canary_registration_id is not None
    assert res.canary_weight == pytest.approx(0.2)
    last = max(registry_client.history(channel), key=lambda e: e.version)
    assert last.actor == "scheduled evolution" and "patch(es) accepted" in last.reason
