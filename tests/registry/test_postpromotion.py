"""The post-promotion check on a real Temporal dev server: the promoted harness runs on the
preservation split (embedded sim generator and inspector) and the regression it sees versus
the previously served harness is returned and exported as a Prometheus gauge."""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from temporalio.worker import Worker

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.tasks.models import Constraint, Task
from workflows.activities import TraceActivities
from workflows.params import Backends, TaskSource
from workflows.ports import WorkerSection, WorkerSettings
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
