"""Chaos tests: one part of the platform dies (SIGKILL, by PID) or hangs (SIGSTOP) while a real
evolution round runs on a real Temporal dev server, SeaweedFS and the gRPC services, and the
run still ends with the control run's decisions, repeating no completed generator call.

- the S3 server dies mid-round and comes back (same ports, same data);
- the Temporal dev server dies mid-run and comes back from its database file;
- the generation service dies mid-batch and comes back on its address;
- the registry's database becomes unreachable during a promotion (a TCP relay in front of
  PostgreSQL is killed) and comes back;
- the proposer service hangs (SIGSTOP) for the whole round.

Each test checks that the fault was felt (an activity ran more than one attempt, or a
recorded failure), so none can pass without the fault happening.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from evoharness.execution_cache import execution_object_key
from evoharness.trace.gates import GateConfig
from services.storage.s3 import S3ArtifactStore
from tests.chaos.conftest import (
    Control,
    chaos_params,
    objects_are_whole,
    tcp_relay,
    temporal_dev_server,
)
from tests.fixtures.services import health_ok, s3_config
from tests.fixtures.temporal import worker_process
from tests.workflows.conftest import PROFILE, log_keys, run_in_process
from workflows.backends import WorkerSection, WorkerSettings
from workflows.evolution import EvolutionWorkflow
from workflows.params import Approval, Backends, EvolutionResult, Progress

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

#: kill the component once this many generator calls are stored (the control makes ~60)
KILL_AT = 12


async def wait_calls(calls: Path, n: int, timeout: float = 300.0) -> int:
    """Wait until the call log has ``n`` lines; returns the count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(log_keys(calls)) >= n:
            return len(log_keys(calls))
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {n} generator calls after {timeout:.0f}s")


async def max_attempt(client: Client, workflow_id: str, rounds: int = 1) -> int:
    """The highest attempt number of any activity of the run and its round workflows."""
    best = 0
    for wid in [workflow_id, *(f"{workflow_id}-round-{n}" for n in range(1, rounds + 1))]:
        hist = await client.get_workflow_handle(wid).fetch_history()
        for ev in hist.events:
            if ev.HasField("activity_task_started_event_attributes"):
                best = max(best, ev.activity_task_started_event_attributes.attempt)
    return best


def same_decisions(result: EvolutionResult, control: Control) -> None:
    """The run's decisions equal the control's: kind, harness, candidate and reason (the
    reason carries the gate's p-value and effect sizes)."""

    def key(d: dict[str, Any]) -> tuple[Any, ...]:
        return (d["kind"], d["harness_id"], d["candidate_id"], d["reason"])

    assert [key(d) for d in result.decisions] == [key(d) for d in control.result.decisions]


def no_repeated_calls(calls: Path, control: Control, store: S3ArtifactStore, slack: int) -> None:
    """No completed generator call was made twice; every call of the control was made (its
    execution record is stored) and no other. Calls whose record was stored but whose log
    line was lost with the fault (at most ``slack``) were then served from the cache."""
    keys = log_keys(calls)
    assert len(keys) == len(set(keys)), "a completed generator call was repeated"
    assert set(keys) <= set(control.calls)
    assert len(control.calls) - len(keys) <= slack
    assert all(store.exists(execution_object_key(k, ".json")) for k in control.calls)


# --------------------------------------------------------------------------------- S3


async def test_s3_server_dies_mid_round_and_comes_back(
    control: Control, temporal_env: Any, restartable_s3: Any, chaos_split: Any, tmp_path: Path
) -> None:
    weed, s3 = restartable_s3
    bucket = f"chaos-s3-{uuid.uuid4().hex[:8]}"
    calls = tmp_path / "calls.log"
    settings = WorkerSettings(
        s3=s3.model_copy(update={"bucket": bucket}),
        worker=WorkerSection(store="s3", call_log=str(calls), sim_profile=PROFILE),
    )
    params = chaos_params(f"s3-{uuid.uuid4().hex[:6]}", chaos_split)

    async def fault(handle: Any) -> None:
        await wait_calls(calls, KILL_AT)
        weed.kill()  # SIGKILL mid-round: uploads in flight are cut
        await asyncio.to_thread(weed.restart)  # same ports, same data folder

    handle, result = await asyncio.wait_for(
        run_in_process(temporal_env.client, settings, params, on_handle=fault), 600
    )
    assert await max_attempt(temporal_env.client, handle.id) > 1, "no activity felt the outage"
    same_decisions(result, control)
    store = S3ArtifactStore.from_settings(settings.s3)
    no_repeated_calls(calls, control, store, params.concurrency * params.batch_size)
    # nothing half-written: every object reads back whole, every execution record's image
    # has the sha256 the record names
    assert objects_are_whole(store) > 2 * len(control.calls)


# --------------------------------------------------------------------------- Temporal


async def _result_across_outage(handle: WorkflowHandle[Any, Any], timeout: float) -> Any:
    """``handle.result()``, retried while the server is unreachable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await handle.result()
        except RPCError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def test_temporal_server_restarts_mid_run_from_its_database(
    control: Control, s3_server: Any, chaos_split: Any, tmp_path: Path
) -> None:
    server, address = await asyncio.to_thread(temporal_dev_server, tmp_path)
    bucket = f"chaos-tmp-{uuid.uuid4().hex[:8]}"
    calls = tmp_path / "calls.log"
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    env = {
        "EVOHARNESS_S3__ENDPOINT": s3_server.endpoint,
        "EVOHARNESS_S3__ACCESS_KEY": s3_server.access_key,
        "EVOHARNESS_S3__SECRET_KEY": s3_server.secret_key,
        "EVOHARNESS_S3__BUCKET": bucket,
        "EVOHARNESS_WORKER__SIM_PROFILE": PROFILE,
    }
    worker = None
    try:
        worker = await asyncio.to_thread(
            worker_process, tmp_path, "worker", address, queue, calls, env
        )
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        params = chaos_params(f"tmp-{uuid.uuid4().hex[:6]}", chaos_split)
        handle = await client.start_workflow(
            EvolutionWorkflow.run,
            params,
            id=f"evolve-{params.run_id}",
            task_queue=queue,
            result_type=EvolutionResult,
        )
        await wait_calls(calls, KILL_AT)
        server.kill()
        at_kill = len(log_keys(calls))
        await asyncio.to_thread(server.restart)  # same port, same --db-filename
        result = await _result_across_outage(handle, 600)
        assert worker.alive(), worker.log_tail()
        assert len(log_keys(calls)) > at_kill  # the run went on after the restart
        same_decisions(result, control)
        store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
        no_repeated_calls(calls, control, store, params.concurrency * params.batch_size)
    finally:
        if worker is not None:
            worker.stop()
        server.stop()


# ------------------------------------------------------------------ generation service


async def test_generation_service_dies_mid_batch_and_comes_back(
    control: Control,
    temporal_env: Any,
    s3_server: Any,
    service_factory: Any,
    chaos_split: Any,
    tmp_path: Path,
) -> None:
    bucket = f"chaos-gen-{uuid.uuid4().hex[:8]}"
    s3, env = s3_config(s3_server, bucket)
    gen = service_factory(
        "generation", {"backend": "sim", "sim_profile": PROFILE, "s3": s3}, env=env
    )
    calls = tmp_path / "calls.log"
    settings = WorkerSettings(
        s3=s3_server.settings.model_copy(update={"bucket": bucket}),
        worker=WorkerSection(
            store="s3", call_log=str(calls), generation_address=gen.address, sim_profile=PROFILE
        ),
    )
    params = chaos_params(
        f"gen-{uuid.uuid4().hex[:6]}", chaos_split, backends=Backends(generator="grpc")
    )

    def restart() -> None:
        gen.process.start()  # same argv: same port
        gen.process.wait_healthy(lambda: health_ok(gen.address), timeout=120)

    async def fault(handle: Any) -> None:
        await wait_calls(calls, KILL_AT)
        gen.process.kill()  # SIGKILL mid-batch: calls in flight get UNAVAILABLE
        await asyncio.to_thread(restart)

    handle, result = await asyncio.wait_for(
        run_in_process(temporal_env.client, settings, params, on_handle=fault), 600
    )
    assert await max_attempt(temporal_env.client, handle.id) > 1, "no activity was retried"
    same_decisions(result, control)
    store = S3ArtifactStore.from_settings(settings.s3)
    no_repeated_calls(calls, control, store, params.concurrency * params.batch_size)


# --------------------------------------------------------------------- registry database


async def test_registry_database_unreachable_during_promotion(
    control: Control,
    temporal_env: Any,
    s3_server: Any,
    service_factory: Any,
    chaos_split: Any,
    tmp_path: Path,
) -> None:
    from sqlalchemy.engine import make_url

    from services.registry.client import RegistryClient
    from services.registry.registrar import RegistryResultRegistrar
    from tests.registry.conftest import _pg_fresh_db

    dbs = _pg_fresh_db()
    db_url = next(dbs)
    relay = None
    try:
        u = make_url(db_url)
        relay, port = tcp_relay(tmp_path, f"{u.host}:{u.port or 5432}")
        via_relay = u.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
        s3, env = s3_config(s3_server, control.bucket)
        reg = service_factory(
            "registry",
            {"s3": s3},
            env={**env, "EVOHARNESS_REGISTRY__DATABASE_URL": via_relay},
        )
        client = RegistryClient(reg.address, timeout=10.0)
        # the control's bucket: every execution is a cache hit; a permissive gate so the
        # small split's best candidate is accepted and there is something to promote
        settings = WorkerSettings(
            s3=s3_server.settings.model_copy(update={"bucket": control.bucket}),
            worker=WorkerSection(store="s3", sim_profile=PROFILE),
        )
        params = chaos_params(
            f"reg-{uuid.uuid4().hex[:6]}",
            chaos_split,
            gate=GateConfig(alpha=0.99, extend_below=0.995),
            promote_channel="staging",
            require_approval=True,
        )
        seen: dict[str, Any] = {}

        async def fault(handle: Any) -> None:
            for _ in range(6000):
                p = await handle.query(EvolutionWorkflow.progress, result_type=Progress)
                if p.phase == "awaiting_approval":
                    break
                await asyncio.sleep(0.05)
            assert p.phase == "awaiting_approval", p
            relay.kill()  # the database is now unreachable from the registry
            await handle.execute_update(
                EvolutionWorkflow.approve_promotion, Approval(approver="alice")
            )
            # the promotion activity fails and is retried (backoff 1, 2, 4 s ...)
            for _ in range(1200):
                desc = await handle.describe()
                pending = [
                    a
                    for a in desc.raw_description.pending_activities
                    if a.activity_type.name == "register_result"
                ]
                if pending and pending[0].attempt >= 2:
                    seen["failure"] = pending[0].last_failure.message
                    break
                await asyncio.sleep(0.1)
            assert "failure" in seen, "the promotion did not fail while the database was away"
            await asyncio.to_thread(relay.restart)

        _, result = await asyncio.wait_for(
            run_in_process(
                temporal_env.client,
                settings,
                params,
                on_handle=fault,
                registrar=RegistryResultRegistrar(client),
            ),
            600,
        )
        # it failed cleanly: UNAVAILABLE naming the database, not an internal error
        assert "UNAVAILABLE" in seen["failure"] or "unavailable" in seen["failure"].lower()
        assert "database" in seen["failure"].lower()
        assert result.decisions[0]["kind"] == "accepted"
        assert result.promoted
        # the channel points at a registration that exists, of the promoted harness, once
        state = client.resolve("staging", with_document=False)
        assert state.registration_id == result.promoted
        version = client.get(state.registration_id)
        assert version[0].harness_id == result.best_harness_id
        history = client.history("staging")
        assert [h.registration_id for h in history] == [result.promoted]
        client.close()
    finally:
        if relay is not None:
            relay.stop()
        for _ in dbs:  # drop the database
            pass


# ----------------------------------------------------------------------- hung proposer


async def test_hung_proposer_ends_the_round_in_no_patch_within_its_deadline(
    control: Control,
    temporal_env: Any,
    s3_server: Any,
    service_factory: Any,
    chaos_split: Any,
) -> None:
    prop = service_factory("proposer", {"backend": "rule"})
    pid = prop.process.pid
    os.kill(pid, signal.SIGSTOP)  # it accepts connections and never answers
    try:
        settings = WorkerSettings(
            s3=s3_server.settings.model_copy(update={"bucket": control.bucket}),
            worker=WorkerSection(
                store="s3",
                proposer_address=prop.address,
                proposer_timeout_s=2.0,
                sim_profile=PROFILE,
            ),
        )
        params = chaos_params(
            f"hang-{uuid.uuid4().hex[:6]}",
            chaos_split,
            backends=Backends(proposer="grpc"),
            activity_timeout_s=120,
        )
        handle, result = await asyncio.wait_for(
            run_in_process(temporal_env.client, settings, params), 300
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    (d,) = result.decisions
    assert d["kind"] == "no_patch" and d["harness_id"] == d["parent_harness_id"]
    # the failure is recorded in the round report, the activity was not retried into the hang
    store = S3ArtifactStore.from_settings(settings.s3)
    report = json.loads(store.get(d["report_key"]))
    reasons = [c["reject_reason"] for c in report["candidates"]]
    assert any(r.startswith("localizer_error") for r in reasons), reasons
    assert any(r.startswith("proposer_error") for r in reasons), reasons
    assert all("DEADLINE" in r or "deadline" in r.lower() for r in reasons), reasons
    assert all(c["gate"] is None for c in report["candidates"])
    assert await max_attempt(temporal_env.client, handle.id) == 1
