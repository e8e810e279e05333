"""Shared pieces of the workflow tests: run parameters, an in-process worker runner, and the
session-scoped reference run (real Temporal dev server, SeaweedFS, sim backends, hostile +
rule proposer) that several tests inspect or compare against."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.worker import Worker

from evoharness.tasks.models import Task
from evoharness.trace.gates import GateConfig
from services.common.process import ManagedProcess
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.temporal import worker_process
from tests.workflows.hostile import hostile_proposer
from tests.workflows.splits import small_split
from workflows.activities import TraceActivities
from workflows.backends import WorkerSection, WorkerSettings
from workflows.evolution import EvolutionWorkflow
from workflows.params import (
    Backends,
    EvolutionParams,
    EvolutionResult,
    HarnessRef,
    Progress,
    Splits,
    TaskSource,
)
from workflows.round_workflow import RoundWorkflow
from workflows.search_activities import SearchActivities
from workflows.tracking_activities import TrackingActivities

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = Path(__file__).parent / "histories"
#: SIGKILL the durability test's first worker once this many generator calls have completed.
KILL_AFTER_CALLS = 25


def make_params(run_id: str, split: dict[str, list[Task]], **kw: Any) -> EvolutionParams:
    """Small-run parameters: K=4 seeds, 2 rounds, 1 cluster x 2 candidates."""
    base: dict[str, Any] = {
        "run_id": run_id,
        "harness": HarnessRef(uri=f"file://{ROOT / 'harnesses' / 'baseline'}"),
        "splits": Splits(
            target=TaskSource(tasks=split["target"]),
            heldout=TaskSource(tasks=split["heldout"]),
            preservation=TaskSource(tasks=split["preservation"]),
        ),
        "seeds": [0, 1, 2, 3],
        "max_rounds": 2,
        "max_clusters": 1,
        "candidates_per_cluster": 2,
        "concurrency": 2,
        "batch_size": 2,
        "heartbeat_timeout_s": 5,
        "activity_timeout_s": 300,
        "backends": Backends(proposer="rule"),
        # these runs test the workflow (accept, continue, register, promote): cost is not
        # priced (mu=0), because in sd15-like the layout patch they rely on triples the
        # generator-seconds (cost_layout_factor 3.0) and the default price (mu=0.2) refuses it
        # (+16 pp for +152 % cost); tests/unit/test_gates*.py test the priced gate
        "gate": GateConfig(mu=0.0),
    }
    base.update(kw)
    return EvolutionParams(**base)


#: The world of these runs: the GLIGEN-class adapter profile (the strongest layout lever of
#: the shipped profiles). Layout is imperfect in every profile, so a 6-task × 4-seed target
#: split no longer shows a significant gain (sign test p ≈ 0.07 on sdxl-like, 0.13 on
#: sd15-like); the target split has 16 counting tasks (+1 synthetic) instead. (With 12, the
#: gate that pools held-out tasks as test units finds round 1's layout patch at p = 0.0309 at
#: look 2, just above alpha = 0.0294; with 16, p = 0.026 — decisions are deterministic, so
#: this is a fixed figure of this world, not a flaky one.)
PROFILE = "sd15-like"


def settings_for(s3_server: Any, bucket: str, call_log: Path | None = None) -> WorkerSettings:
    return WorkerSettings(
        s3=s3_server.settings.model_copy(update={"bucket": bucket}),
        worker=WorkerSection(
            store="s3", call_log=str(call_log) if call_log else None, sim_profile=PROFILE
        ),
    )


def log_keys(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line.split("\t")[0] for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Reference:
    result: EvolutionResult
    progress: Progress
    first_run_id: str
    workflow_id: str
    bucket: str
    store: S3ArtifactStore
    calls: list[str]
    settings: WorkerSettings
    client: Client
    params: EvolutionParams


async def run_in_process(
    client: Client,
    settings: WorkerSettings,
    params: EvolutionParams,
    *,
    on_handle: Any = None,
    after: Any = None,
    start: Any = None,
    task_queue: str | None = None,
    registrar: Any = None,
    search_proposers: Any = None,
) -> tuple[Any, EvolutionResult]:
    """Run one evolution with an in-process worker (hostile proposer registered).
    ``start``: an async callable that starts the workflow instead of the client;
    ``registrar``: the "register result" port (default: the S3 registrar);
    ``search_proposers``: search proposers by name (``workflows.search_activities``)."""
    queue = task_queue or f"evoharness-test-{uuid.uuid4().hex[:8]}"
    acts = TraceActivities(settings, registrar, proposers={"hostile": hostile_proposer()})
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[EvolutionWorkflow, RoundWorkflow],
            activities=[
                *acts.all(),
                *TrackingActivities(acts).all(),
                *SearchActivities(acts, search_proposers).all(),
            ],
            activity_executor=ex,
        ):
            if start is None:
                handle = await client.start_workflow(
                    EvolutionWorkflow.run,
                    params,
                    id=f"evolve-{params.run_id}",
                    task_queue=queue,
                    result_type=EvolutionResult,
                )
            else:  # started elsewhere (e.g. the Temporal CLI)
                await start(None)
                handle = client.get_workflow_handle(
                    f"evolve-{params.run_id}", result_type=EvolutionResult
                )
            if on_handle is not None:
                await on_handle(handle)
            result = await handle.result()
            if after is not None:
                await after(handle)
    return handle, result


def start_worker(
    name: str,
    tmp_path: Path,
    temporal_env: Any,
    s3_server: Any,
    bucket: str,
    queue: str,
    calls: Path,
) -> ManagedProcess:
    """A worker subprocess (``python -m workflows.worker``) on ``queue`` with the S3 store in
    ``bucket``, the reference runs' world (``PROFILE``) and its generator calls logged to
    ``calls``; returned once it is ready (the durability tests SIGKILL it)."""
    env = {
        "EVOHARNESS_S3__ENDPOINT": s3_server.endpoint,
        "EVOHARNESS_S3__ACCESS_KEY": s3_server.access_key,
        "EVOHARNESS_S3__SECRET_KEY": s3_server.secret_key,
        "EVOHARNESS_S3__BUCKET": bucket,
        "EVOHARNESS_WORKER__SIM_PROFILE": PROFILE,  # the same world as the reference run
        "OMP_NUM_THREADS": "1",
    }
    address = temporal_env.client.service_client.config.target_host
    return worker_process(tmp_path, name, address, queue, calls, env)


async def kill_after_calls(worker: ManagedProcess, calls: Path, n: int) -> int:
    """Wait (≤ 300 s) until ``calls`` logs ``n`` finished generator calls, then SIGKILL
    ``worker``; returns the calls logged at the kill. Fails when the worker died first."""
    for _ in range(6000):
        if len(log_keys(calls)) >= n or not worker.alive():
            break
        await asyncio.sleep(0.05)
    assert worker.alive(), worker.log_tail()
    worker.kill()
    return len(log_keys(calls))


@pytest.fixture(scope="session")
def split(shared_dir: Path) -> dict[str, list[Task]]:
    return small_split(shared_dir, n_target=16, n_synthetic=1)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def reference(
    temporal_env: Any, s3_server: Any, split: Any, tmp_path_factory: Any
) -> Reference:
    bucket = f"evo-ref-{uuid.uuid4().hex[:10]}"
    calls = tmp_path_factory.mktemp("ref") / "calls.log"
    settings = settings_for(s3_server, bucket, calls)
    client = temporal_env.client
    params = make_params(
        f"ref-{uuid.uuid4().hex[:6]}",
        split,
        backends=Backends(proposer="hostile"),
        budget_usd=100.0,
    )
    got: dict[str, Progress] = {}

    async def query(handle: Any) -> None:  # queries need a running worker
        got["p"] = await handle.query(EvolutionWorkflow.progress, result_type=Progress)

    handle, result = await run_in_process(client, settings, params, after=query)
    progress = got["p"]
    store = S3ArtifactStore.from_settings(settings.s3)
    if os.environ.get("EVOHARNESS_RECORD_HISTORIES") == "1":
        await record_histories(client, handle.id, handle.result_run_id, result.rounds)
    return Reference(
        result,
        progress,
        handle.result_run_id,
        handle.id,
        bucket,
        store,
        log_keys(calls),
        settings,
        client,
        params,
    )


async def record_histories(client: Client, wid: str, first_run_id: str | None, rounds: int) -> None:
    """Write the histories of the reference run (every run of the chain and each round) to
    ``tests/workflows/histories/<kind>__<workflow id>.json.gz`` for the replay test."""
    HISTORIES.mkdir(exist_ok=True)

    def write(kind: str, hist: Any) -> None:
        data = gzip.compress(hist.to_json().encode(), mtime=0)
        (HISTORIES / f"{kind}__{hist.workflow_id}.json.gz").write_bytes(data)

    run_id = first_run_id
    i = 0
    while run_id:
        hist = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        write(f"evolution-run{i}", hist)
        run_id = None
        last = hist.events[-1]
        if last.HasField("workflow_execution_continued_as_new_event_attributes"):
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        i += 1
    for n in range(1, rounds + 1):
        write(f"round-{n}", await client.get_workflow_handle(f"{wid}-round-{n}").fetch_history())


@pytest.fixture(scope="session")
def registry_client(s3_server: Any, tmp_path_factory: Any) -> Any:
    """A real registry gRPC service (SQLite metadata, documents in a fresh bucket of the
    session's SeaweedFS) and a ``RegistryClient`` on it, for the workflows' registrar."""
    from harness_registry import Registry
    from harness_registry.db import make_engine, upgrade
    from services.common.server import ServiceRegistration, build_server
    from services.common.settings import ServerSettings
    from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc
    from services.registry.client import RegistryClient
    from services.registry.server import SERVICE_NAME, HarnessRegistryServicer

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=f"reg-{uuid.uuid4().hex[:12]}")
    store.ensure_bucket()
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('registry') / 'registry.db'}")
    upgrade(engine)
    running = build_server(
        ServerSettings(port=0, metrics_port=-1),
        [
            ServiceRegistration(
                HarnessRegistryServicer(Registry(engine, store)),
                pb_grpc.add_HarnessRegistryServicer_to_server,
                SERVICE_NAME,
            )
        ],
    )
    client = RegistryClient(f"127.0.0.1:{running.port}")
    try:
        yield client
    finally:
        client.close()
        running.stop(0)
        engine.dispose()
