"""The same evolution through the gRPC services (generation: sim backend, verification: sim
inspector, proposer: rule backend) started as subprocesses: the activities reach every port
over gRPC and the decision equals the in-process sim run's (the reference run)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.services import s3_config
from tests.workflows.conftest import Reference, make_params, run_in_process
from workflows.backends import WorkerSection, WorkerSettings
from workflows.params import Backends

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_round_through_grpc_services_makes_the_same_decision(
    reference: Reference, temporal_env: Any, s3_server: Any, service_factory: Any, split: Any
) -> None:
    bucket = f"evo-grpc-{uuid.uuid4().hex[:8]}"
    s3, env = s3_config(s3_server, bucket)
    gen = service_factory("generation", {"backend": "sim", "s3": s3}, env=env)
    ver = service_factory("verification", {"backend": "sim", "s3": s3}, env=env)
    prop = service_factory("proposer", {"backend": "rule"})
    settings = WorkerSettings(
        s3=s3_server.settings.model_copy(update={"bucket": bucket}),
        worker=WorkerSection(
            store="s3",
            generation_address=gen.address,
            verification_address=ver.address,
            proposer_address=prop.address,
        ),
    )
    params = make_params(
        f"grpc-{uuid.uuid4().hex[:6]}",
        split,
        max_rounds=1,
        backends=Backends(generator="grpc", verifier="grpc", proposer="grpc"),
    )
    _, result = await run_in_process(temporal_env.client, settings, params)
    ref = reference.result.decisions[0]
    got = result.decisions[0]
    assert (got["kind"], got["harness_id"]) == (ref["kind"], ref["harness_id"])
    assert result.generator_calls > 0
    assert "evoharness_generation_requests" in gen.metrics_text()
