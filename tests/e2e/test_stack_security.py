"""The local stack's security: bearer-token auth on by default, TLS between every service.

One stack (``services.stack.up``) with TLS from a throw-away CA (``tests.fixtures.tls``) and
the default auth: every gRPC service refuses a call without the token (UNAUTHENTICATED) and a
plaintext or wrongly trusting client; the callers inside the stack (the runtime, the worker)
send the token over TLS, shown by a Render through the runtime (registry, generation and
verification behind it) and a one-round evolution on the stack's worker with every port on
gRPC; ``evoharness env`` exports the token and the CA.
"""

from __future__ import annotations

import asyncio
import os
import stat
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from harness_registry import Lineage
from services import stack
from services.common.channel import open_channel
from tests.conftest import SHARED, require
from tests.fixtures.tls import throwaway_ca

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: One protected method per service (any request bytes: auth is checked before parsing).
PROTECTED = {
    "registry": "/evoharness.v1.HarnessRegistry/List",
    "generation": "/evoharness.v1.GenerationService/Describe",
    "verification": "/evoharness.v1.VerificationService/Verify",
    "proposer": "/evoharness.v1.ProposerService/ExtractPolicy",
    "runtime": "/evoharness.v1.Runtime/Render",
}


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    certs = throwaway_ca(tmp_path_factory.mktemp("ca"))
    run_dir = tmp_path_factory.mktemp("stack")
    tls = stack.TlsFiles(str(certs["server.pem"]), str(certs["server.key"]), str(certs["ca.pem"]))
    state = stack.up(run_dir, security=stack.StackSecurity(tls=tls))
    try:
        yield run_dir, state, certs
    finally:
        stack.down(run_dir)


def _code(address: str, method: str, **channel: Any) -> grpc.StatusCode:
    with open_channel(address, **channel) as ch:
        try:
            ch.unary_unary(method)(b"", timeout=10)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_every_service_refuses_calls_without_the_token_or_tls(secure_stack: Any) -> None:
    run_dir, state, certs = secure_stack
    token = state.env[stack.TOKEN_ENV]
    assert len(token) >= 43  # 32 random bytes, base64url
    assert stat.S_IMODE(os.stat(Path(run_dir) / stack.STATE_FILE).st_mode) == 0o600
    ca = str(certs["ca.pem"])
    for name, method in PROTECTED.items():
        address = state.address(name)
        # TLS, no token: refused before the request is read
        assert _code(address, method, tls_ca_file=ca) == grpc.StatusCode.UNAUTHENTICATED, name
        # TLS, a wrong token
        assert (
            _code(address, method, tls_ca_file=ca, token="x" * 43)
            == grpc.StatusCode.UNAUTHENTICATED
        ), name
        # plaintext, or a CA that did not sign the certificate: no connection at all
        assert _code(address, method, token=token) == grpc.StatusCode.UNAVAILABLE, name
        assert (
            _code(address, method, token=token, tls_ca_file=str(certs["other.pem"]))
            == grpc.StatusCode.UNAVAILABLE
        ), name
        # the token over TLS gets past auth (empty request bytes: a real answer or a field
        # error, never UNAUTHENTICATED)
        assert _code(address, method, tls_ca_file=ca, token=token) not in (
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.UNAVAILABLE,
        ), name


def test_env_exports_the_token_and_ca(secure_stack: Any, capsys: Any) -> None:
    from evoharness_app.cli import main

    run_dir, state, certs = secure_stack
    assert main(["env", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"export EVOHARNESS_TOKEN={state.env[stack.TOKEN_ENV]}" in out
    assert f"export EVOHARNESS_CLIENT__TLS_CA_FILE={Path(certs['ca.pem']).resolve()}" in out


def test_runtime_calls_the_other_services_with_the_token_over_tls(secure_stack: Any) -> None:
    from evoharness.harness.io import load_dir
    from services.protos.evoharness.v1 import runtime_pb2, runtime_pb2_grpc
    from services.registry.client import RegistryClient

    _, state, _ = secure_stack
    opts = stack.client_options(state)
    registry = RegistryClient(
        state.address("registry"), token=opts["token"], tls_ca_file=opts["tls_ca_file"]
    )
    rid, _, _ = registry.put(
        load_dir(Path(__file__).resolve().parents[2] / "harnesses" / "baseline"),
        Lineage(registered_by="test"),
    )
    registry.close()
    with open_channel(state.address("runtime"), **opts) as ch:
        resp = runtime_pb2_grpc.RuntimeStub(ch).Render(
            runtime_pb2.RenderRequest(prompt="a photo of two cats", registration_id=rid, seed=1),
            timeout=120,
        )
    assert resp.registration_id == rid and resp.generator_id.startswith("sim/")
    assert resp.image.key and resp.image.sha256


def test_worker_calls_every_port_with_the_token_over_tls(secure_stack: Any) -> None:
    from tests.workflows.splits import small_split
    from workflows.evolution import EvolutionWorkflow
    from workflows.params import (
        Backends,
        EvolutionParams,
        EvolutionResult,
        HarnessRef,
        Splits,
        TaskSource,
    )
    from workflows.worker import connect

    _, state, _ = secure_stack
    split = small_split(SHARED, n_target=2, n_synthetic=0)
    root = Path(__file__).resolve().parents[2]
    params = EvolutionParams(
        run_id=f"sec-{uuid.uuid4().hex[:6]}",
        harness=HarnessRef(uri=f"file://{root / 'harnesses' / 'baseline'}"),
        splits=Splits(
            target=TaskSource(tasks=split["target"]),
            heldout=TaskSource(tasks=split["heldout"][:1]),
            preservation=TaskSource(tasks=split["preservation"][:1]),
        ),
        seeds=[0],
        max_rounds=1,
        max_clusters=1,
        candidates_per_cluster=1,
        backends=Backends(generator="grpc", verifier="grpc", proposer="grpc"),
        activity_timeout_s=120,
    )

    async def run() -> EvolutionResult:
        client = await connect(state.address("temporal"))
        return await client.execute_workflow(  # type: ignore[no-any-return]
            EvolutionWorkflow.run,
            params,
            id=f"evolve-{params.run_id}",
            task_queue="evoharness",
            result_type=EvolutionResult,
        )

    result = asyncio.run(asyncio.wait_for(run(), 300))
    # every execution went through the generation and verification services
    assert result.rounds == 1 and result.generator_calls > 0
    assert result.decisions[0]["kind"] in ("accepted", "no_patch")
