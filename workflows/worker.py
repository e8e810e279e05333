"""The evolution worker: ``python -m workflows.worker [--config worker.yaml]``.

Polls task queue ``evoharness`` (``worker.task_queue``) on ``worker.temporal_address``, runs
``EvolutionWorkflow``/``RoundWorkflow`` (sandboxed, pydantic data converter) and the TRACE
activities in a thread pool, and serves Prometheus metrics on ``server.metrics_port``
(``services.common.metrics``; -1 disables). Stops cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from workflows.activities import TraceActivities
from workflows.backends import WorkerSection, WorkerSettings, load_worker_settings
from workflows.evolution import EvolutionWorkflow
from workflows.postpromotion import PostPromotionActivities, PostPromotionWorkflow
from workflows.postpromotion_canary import CanaryCheckActivities, CanaryCheckWorkflow
from workflows.registrar import ResultRegistrar
from workflows.round_workflow import RoundWorkflow
from workflows.search_activities import SearchActivities
from workflows.status import connect
from workflows.tracking_activities import TrackingActivities
from workflows.traffic_evolution import TrafficActivities, TrafficEvolutionWorkflow

log = logging.getLogger("evoharness.worker")


def build_worker(
    client: Client,
    settings: WorkerSettings,
    registrar: ResultRegistrar | None = None,
    *,
    task_queue: str | None = None,
) -> tuple[Worker, concurrent.futures.ThreadPoolExecutor]:
    """A ``Worker`` for every workflow and activity, polling ``task_queue`` (default
    ``settings.worker.task_queue``). Its activities run on a thread pool of
    ``worker.activity_threads`` threads, and it takes at most
    ``worker.max_concurrent_activities`` activities at once (keep the two equal, as
    ``local_worker_settings`` does: Temporal warns when it may hand a worker more activities
    than it has threads). Returns it with its activity executor (shut it down after the worker
    stops; ``running_worker`` does both)."""
    acts = TraceActivities(settings, registrar)
    ex = concurrent.futures.ThreadPoolExecutor(settings.worker.activity_threads)
    worker = Worker(
        client,
        task_queue=task_queue or settings.worker.task_queue,
        workflows=[
            EvolutionWorkflow,
            RoundWorkflow,
            PostPromotionWorkflow,
            TrafficEvolutionWorkflow,
            CanaryCheckWorkflow,
        ],
        activities=[
            *acts.all(),
            *PostPromotionActivities(acts).all(),
            *TrafficActivities(acts).all(),
            *CanaryCheckActivities(acts).all(),
            *TrackingActivities(acts).all(),
            *SearchActivities(acts).all(),
        ],
        activity_executor=ex,
        max_concurrent_activities=settings.worker.max_concurrent_activities,
    )
    return worker, ex


@contextlib.asynccontextmanager
async def running_worker(
    client: Client,
    settings: WorkerSettings,
    registrar: ResultRegistrar | None = None,
    *,
    task_queue: str | None = None,
) -> AsyncIterator[Worker]:
    """``build_worker``'s worker, running for the ``async with`` block; its activity threads
    are joined after it stops."""
    worker, ex = build_worker(client, settings, registrar, task_queue=task_queue)
    try:
        async with worker:
            yield worker
    finally:
        ex.shutdown(wait=True)


def local_worker_settings(local_dir: str | Path, threads: int | None = None) -> WorkerSettings:
    """Settings of an in-process worker on the embedded world with a local artifact store
    under ``local_dir`` (``evolve local``, benches, tests): ``threads`` activity threads and
    as many concurrent activities (None: ``WorkerSection``'s defaults)."""
    section = WorkerSection(store="local", local_dir=str(local_dir))
    if threads is not None:
        section = WorkerSection.model_validate(
            {
                **section.model_dump(),
                "activity_threads": threads,
                "max_concurrent_activities": threads,
            }
        )
    return WorkerSettings(worker=section)


async def serve(settings: WorkerSettings, stop: asyncio.Event | None = None) -> None:
    """Run a worker until ``stop`` is set (or SIGINT/SIGTERM)."""
    if settings.server.metrics_port >= 0:
        from prometheus_client import start_http_server

        start_http_server(settings.server.metrics_port, addr=settings.server.metrics_host)
    client = await connect(settings.worker.temporal_address, settings.worker.namespace)
    from services.registry.registrar import registrar_from_env

    # outgoing calls carry the deployment's token and trust client.tls_ca_file
    opts = settings.client.channel_options(settings.server.auth_token)
    worker, ex = build_worker(client, settings, registrar_from_env(**opts))
    ev = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, ev.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass
    log.info(
        "worker polling %s on %s", settings.worker.task_queue, settings.worker.temporal_address
    )
    async with worker:
        if settings.server.ready_file:
            with open(settings.server.ready_file, "w", encoding="utf-8") as f:
                f.write("ready\n")
        await ev.wait()
    ex.shutdown(wait=False, cancel_futures=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point. ``--config`` YAML (see ``workflows.backends.WorkerSettings``);
    ``--address``, ``--store``, ``--local-dir``, ``--call-log``, ``--metrics-port`` override."""
    ap = argparse.ArgumentParser(prog="python -m workflows.worker", description=__doc__)
    ap.add_argument("--config")
    ap.add_argument("--address")
    ap.add_argument("--task-queue")
    ap.add_argument("--store", choices=["s3", "local"])
    ap.add_argument("--local-dir")
    ap.add_argument("--call-log")
    ap.add_argument("--metrics-port", type=int)
    ap.add_argument("--ready-file")
    a = ap.parse_args(argv)
    worker: dict[str, Any] = {}
    server: dict[str, Any] = {}
    for k, v in (
        ("temporal_address", a.address),
        ("task_queue", a.task_queue),
        ("store", a.store),
        ("local_dir", a.local_dir),
        ("call_log", a.call_log),
    ):
        if v is not None:
            worker[k] = v
    if a.metrics_port is not None:
        server["metrics_port"] = a.metrics_port
    if a.ready_file is not None:
        server["ready_file"] = a.ready_file
    try:
        settings = load_worker_settings(a.config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    merged = settings.model_copy(
        update={
            "worker": settings.worker.model_copy(update=worker),
            "server": settings.server.model_copy(update=server),
        }
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(serve(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
