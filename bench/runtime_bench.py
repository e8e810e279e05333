"""Runtime.Render benchmark: latency (p50/p95), throughput, and the runtime's own overhead
versus calling the generation service directly (target: <= 10 ms at p50).

Starts, on loopback and free ports: SeaweedFS (S3), the generation service (sim backend),
the registry (SQLite) and the runtime service, each awaited on its gRPC health check and
stopped by PID at the end. Registers the baseline harness and promotes it to ``prod``.

Measured, per request, over real gRPC:

- ``render cached``: ``Render(prompt, channel=prod, seed)`` for (prompt, seed) pairs whose
  images already exist, so the generator itself does no work (content-addressed store);
- ``direct cached``: ``GenerationService.Generate`` of the exact program that Render
  compiled for the same pair (also a cache hit);
- ``overhead`` = render - direct, paired per request: the runtime's own cost (channel
  resolve, harness compile, one extra gRPC hop, presigned URL);
- ``render cold`` / ``direct cold``: fresh seeds, so the sim generator draws every image;
- throughput: ``--concurrency`` client threads issuing cached Renders.

The numbers depend on the machine and on whatever else runs on it (say so when quoting them).

Usage: ``python bench/runtime_bench.py [--requests 200] [--concurrency 4] [--size 256]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.harness.io import load_dir  # noqa: E402
from evoharness.harness.patch import apply_patch  # noqa: E402
from evoharness.program import Program  # noqa: E402
from harness_registry import Lineage  # noqa: E402
from services.common.process import ManagedProcess, free_port  # noqa: E402
from services.protos import convert  # noqa: E402
from services.protos.evoharness.v1 import (  # noqa: E402
    generation_pb2,
    generation_pb2_grpc,
    runtime_pb2,
    runtime_pb2_grpc,
)

PROMPTS = [
    "a photo of two red apples",
    "a cat to the left of a dog",
    "a photo of a blue bench and a yellow bicycle",
    "three cups on a table",
    'a sign that says "open"',
    "a photo of a bus without people",
]


def _health(address: str) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        return bool(r.status == health_pb2.HealthCheckResponse.SERVING)


def start(
    name: str, cfg: dict[str, Any], env: dict[str, str], work: Path
) -> tuple[ManagedProcess, str]:
    """``evoharness serve <name>`` on a free port, awaited on gRPC health."""
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    port = free_port()
    proc = ManagedProcess(
        name,
        [
            sys.executable,
            "-m",
            "evoharness_app",
            "serve",
            name,
            "--config",
            str(path),
            "--port",
            str(port),
            "--metrics-port",
            "-1",
            "--log-level",
            "WARNING",
        ],
        work / f"{name}.log",
        env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **env},
        cwd=str(ROOT),
    ).start()
    address = f"127.0.0.1:{port}"
    proc.wait_healthy(lambda: _health(address), timeout=120)
    return proc, address


def pct(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) of xs, linear interpolation (numpy's default method)."""
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def row(name: str, xs: list[float]) -> str:
    ms = [x * 1000 for x in xs]
    return (
        f"{name:<22} n={len(ms):<5} p50={pct(ms, 0.5):8.2f} ms  p95={pct(ms, 0.95):8.2f} ms"
        f"  mean={statistics.fmean(ms):8.2f} ms"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=200, help="requests per measured series")
    ap.add_argument("--cold", type=int, default=30, help="requests with fresh seeds")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--size", type=int, default=256, help="image width = height (pixels)")
    args = ap.parse_args()

    from services.registry.client import RegistryClient
    from services.storage.seaweed import start_seaweedfs

    procs: list[ManagedProcess] = []
    with tempfile.TemporaryDirectory(prefix="evoharness-runtime-bench-") as tmp:
        work = Path(tmp)
        try:
            weed, s3 = start_seaweedfs(work / "s3", work / "weed.log")
            procs.append(weed)
            s3cfg = {"endpoint": s3.endpoint, "secure": False, "bucket": "bench"}
            env = {
                "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
                "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
            }
            from services.storage.s3 import S3ArtifactStore

            S3ArtifactStore.from_settings(s3, bucket="bench").ensure_bucket()
            gen, gen_addr = start("generation", {"backend": "sim", "s3": s3cfg}, env, work)
            procs.append(gen)
            reg, reg_addr = start(
                "registry",
                {"registry": {"database_url": f"sqlite:///{work / 'r.db'}"}, "s3": s3cfg},
                env,
                work,
            )
            procs.append(reg)
            rt, rt_addr = start(
                "runtime",
                {
                    "runtime": {
                        "registry_address": reg_addr,
                        "generation_address": gen_addr,
                        "resolve_ttl_seconds": 1.0,
                    },
                    "s3": s3cfg,
                },
                env,
                work,
            )
            procs.append(rt)

            base = load_dir(ROOT / "harnesses" / "baseline")
            ops = [
                {"op": "replace", "path": f"/policy/params/{k}", "value": args.size}
                for k in ("width", "height")
            ]
            harness = apply_patch(base, {"responsibility": "policy", "ops": ops})
            with RegistryClient(reg_addr) as client:
                rid, _, _ = client.put(harness, Lineage(registered_by="runtime-bench"))
                client.promote("prod", rid, expected=None, actor="runtime-bench")

            import grpc

            ch = grpc.insecure_channel(rt_addr)
            gch = grpc.insecure_channel(gen_addr)
            render = runtime_pb2_grpc.RuntimeStub(ch).Render
            generate = generation_pb2_grpc.GenerationServiceStub(gch).Generate

            def do_render(prompt: str, seed: int) -> tuple[float, Any]:
                t = time.perf_counter()
                r = render(
                    runtime_pb2.RenderRequest(prompt=prompt, channel="prod", seed=seed), timeout=120
                )
                return time.perf_counter() - t, r

            def do_direct(program: Any) -> float:
                t = time.perf_counter()
                generate(generation_pb2.GenerateRequest(program=program), timeout=120)
                return time.perf_counter() - t

            pairs = [(PROMPTS[i % len(PROMPTS)], i % 20) for i in range(args.requests)]
            programs: dict[tuple[str, int], Any] = {}
            for p in sorted(set(pairs)):  # warm-up: every image exists afterwards
                _, r = do_render(*p)
                programs[p] = r.program
            render_t, direct_t, over = [], [], []
            for p in pairs:
                rt_s, _ = do_render(*p)
                d_s = do_direct(programs[p])
                render_t.append(rt_s)
                direct_t.append(d_s)
                over.append(rt_s - d_s)

            cold_r, cold_d = [], []
            for i in range(args.cold):
                prompt = PROMPTS[i % len(PROMPTS)]
                rt_s, r = do_render(prompt, 10_000 + i)
                cold_r.append(rt_s)
                prog = Program.model_validate(convert.program_dict_from_proto(r.program))
                prog = prog.model_copy(update={"seed": 20_000 + i})
                cold_d.append(do_direct(convert.program_to_proto(prog)))

            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                list(pool.map(lambda p: do_render(*p), pairs))
            wall = time.perf_counter() - t0
            ch.close()
            gch.close()

            print(
                f"Runtime.Render benchmark (sim backend, {args.size}x{args.size}, loopback gRPC, "
                "SeaweedFS S3, SQLite registry)"
            )
            print(row("render cached", render_t))
            print(row("direct cached", direct_t))
            print(row("overhead (paired)", over))
            print(row("render cold", cold_r))
            print(row("direct cold", cold_d))
            print(
                f"{'throughput':<22} {len(pairs) / wall:8.1f} renders/s "
                f"({args.concurrency} client threads, cached images)"
            )
            p50 = pct([x * 1000 for x in over], 0.5)
            verdict = "meets" if p50 <= 10.0 else "misses"
            print(f"runtime overhead p50 {p50:.2f} ms {verdict} the <= 10 ms target")
            return 0
        finally:
            for p in reversed(procs):
                p.stop()


if __name__ == "__main__":
    sys.exit(main())
