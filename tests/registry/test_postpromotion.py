"""The post-promotion check on a real Temporal dev server: the promoted harness runs on the
preservation split (embedded sim generator and inspector) and the regression it sees versus
the previously served harness is returned and exported as a Prometheus gauge."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from temporalio.worker import Worker

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.tasks.models import Constraint, Task
from harness_registry import Lineage
from workflows.activities import TraceActivities
from workflows.backends import WorkerSection, WorkerSettings
from workflows.params import Backends, TaskSource
from workflows.postpromotion import (
    PostPromotionActivities,
    PostPromotionInput,
    PostPromotionResult,
    PostPromotionWorkflow,
    start_postpromotion,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

OBJECTS = ["dog", "car", "bench", "cup"]
PRESERVATION = [
    Task(
        task_id=f"pp/{o}",
        prompt=f"a photo of a {o}",
        task_family="single_object",
        constraints=[Constraint(constraint_id="c0", type="object", subject=o)],
    )
    for o in OBJECTS
]
SMALL = [
    {"op": "replace", "path": f"/policy/params/{k}", "value": 256} for k in ("width", "height")
]


def _gauge(name: str, channel: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"channel": channel})


async def test_postpromotion_reports_regression(temporal_env, tmp_path: Path, repo_root) -> None:  # type: ignore[no-untyped-def]
    base = apply_patch(
        load_dir(repo_root / "harnesses" / "baseline"), {"responsibility": "policy", "ops": SMALL}
    )
    # The broken harness sends every preservation object to the negative prompt, which the
    # simulated generator honours by leaving the object out.
    broken = apply_patch(
        base,
        {
            "responsibility": "policy",
            "ops": [{"op": "replace", "path": "/policy/negative_terms", "value": OBJECTS}],
        },
    )
    settings = WorkerSettings(
        worker=WorkerSection(store="local", local_dir=str(tmp_path / "store"))
    )
    acts = PostPromotionActivities(TraceActivities(settings))
    queue = f"pp-{uuid.uuid4().hex[:8]}"
    client = temporal_env.client  # type: ignore[attr-defined]
    ex = concurrent.futures.ThreadPoolExecutor(4)
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[PostPromotionWorkflow],
            activities=acts.all(),
            activity_executor=ex,
        ):
            common = {
                "preservation": TaskSource(tasks=PRESERVATION),
                "seeds": [0, 1],
                "backends": Backends(generator="sim", verifier="sim"),
            }
            bad = await start_postpromotion(
                client,
                PostPromotionInput(
                    channel="pp-bad",
                    registration_id="reg-broken",
                    version=2,
                    harness=broken,
                    previous_registration_id="reg-base",
                    previous=base,
                    **common,
                ),
                queue,
            )
            res_bad: PostPromotionResult = await bad.result()
            same = await start_postpromotion(
                client,
                PostPromotionInput(
                    channel="pp-same",
                    registration_id="reg-base2",
                    version=2,
                    harness=base,
                    previous_registration_id="reg-base",
                    previous=base,
                    **common,
                ),
                queue,
            )
            res_same: PostPromotionResult = await same.result()
    finally:
        ex.shutdown(wait=True)

    assert res_bad.n_tasks == 4 and res_bad.n_seeds == 2 and res_bad.n_verdicts == 8
    assert res_bad.pass_rate_previous is not None
    assert res_bad.pass_rate_previous > res_bad.pass_rate_promoted
    assert res_bad.regression == pytest.approx(
        res_bad.pass_rate_previous - res_bad.pass_rate_promoted
    )
    assert res_bad.epsilon == pytest.approx(1 / 8) and res_bad.exceeds_epsilon == (
        res_bad.regression > 1 / 8
    )
    assert _gauge("evoharness_postpromotion_regression", "pp-bad") == pytest.approx(
        res_bad.regression
    )
    assert _gauge("evoharness_postpromotion_epsilon", "pp-bad") == pytest.approx(1 / 8)
    # the same document promoted again: identical executions, no regression
    assert res_same.regression == 0.0
    assert res_same.pass_rate_previous == res_same.pass_rate_promoted
    assert _gauge("evoharness_postpromotion_regression", "pp-same") == 0.0


async def test_promotion_through_the_registry_starts_the_check(
    temporal_env,
    tmp_path: Path,
    repo_root,  # type: ignore[no-untyped-def]
) -> None:
    from evoharness.local_store import LocalArtifactStore
    from harness_registry import open_registry
    from services.common.server import ServiceRegistration, build_server
    from services.common.settings import ServerSettings
    from services.protos.evoharness.v1 import registry_pb2_grpc
    from services.registry.client import RegistryClient
    from services.registry.server import (
        SERVICE_NAME,
        HarnessRegistryServicer,
        PostPromotionTrigger,
    )
    from services.registry.settings import PostPromotionSection
    from workflows.postpromotion import workflow_id

    tasks_file = tmp_path / "preservation.jsonl"
    tasks_file.write_text("".join(t.model_dump_json() + "\n" for t in PRESERVATION[:2]))
    client = temporal_env.client  # type: ignore[attr-defined]
    queue = f"pp-{uuid.uuid4().hex[:8]}"
    reg = open_registry(f"sqlite:///{tmp_path / 'r.db'}", LocalArtifactStore(tmp_path / "b"))
    trigger = PostPromotionTrigger(
        reg,
        PostPromotionSection(
            temporal_address=client.service_client.config.target_host,
            task_queue=queue,
            preservation_uri=f"file://{tasks_file}",
            seeds=[0],
            generator="sim",
            verifier="sim",
        ),
    )
    running = build_server(
        ServerSettings(port=0, metrics_port=-1),
        [
            ServiceRegistration(
                HarnessRegistryServicer(reg, trigger),
                registry_pb2_grpc.add_HarnessRegistryServicer_to_server,
                SERVICE_NAME,
            )
        ],
    )
    base = apply_patch(
        load_dir(repo_root / "harnesses" / "baseline"), {"responsibility": "policy", "ops": SMALL}
    )
    settings = WorkerSettings(
        worker=WorkerSection(store="local", local_dir=str(tmp_path / "store"))
    )
    ex = concurrent.futures.ThreadPoolExecutor(2)
    channel = f"pp-{uuid.uuid4().hex[:6]}"
    try:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[PostPromotionWorkflow],
            activities=PostPromotionActivities(TraceActivities(settings)).all(),
            activity_executor=ex,
        ):
            with RegistryClient(f"127.0.0.1:{running.port}") as rc:
                rid, _, _ = rc.put(base, Lineage(registered_by="t"))
                ev = rc.promote(channel, rid, expected=None)
            for t in trigger.threads:
                await asyncio.to_thread(t.join, 60)
            handle = client.get_workflow_handle(
                workflow_id(channel, ev.version), result_type=PostPromotionResult
            )
            res = await handle.result()
    finally:
        running.stop(0)
        ex.shutdown(wait=True)
        reg.engine.dispose()
    assert res.channel == channel and res.registration_id == rid
    assert res.n_tasks == 2 and res.pass_rate_previous is None and res.regression == 0.0
    assert _gauge("evoharness_postpromotion_regression", channel) == 0.0
