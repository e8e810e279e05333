"""Benchmark: the sim generator in-process vs through the generation service with S3.

Starts SeaweedFS (``weed mini``) and ``evoharness serve generation`` (sim backend) on
loopback, then prints:

- sim images/s in-process (``SimGenerator.generate``) and through the service
  (``GenerationService.Generate``, a fresh program per call so every call generates and
  stores), and their ratio;
- the platform's own per-image overhead = client wall time of one Generate minus the
  generator-seconds the service reports: gRPC round trip + program validation + execution
  key + S3 GET of the execution record + S3 PUTs of image and record, in ms (p50, p95).
  Target: p50 <= 10 ms;
- the latency of a cached Generate (the execution key already stored) and of the client
  adapter's extra S3 GET of the PNG, p50/p95 ms.

Run: ``.venv/bin/python bench/services_bench.py [--n 100] [--size 256]``. Figures are wall
clock on a shared machine: other processes disturb them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values`` (nearest-rank on the sorted list)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100, help="images per measurement")
    ap.add_argument("--size", type=int, default=256, help="image width = height (pixels)")
    ap.add_argument("--quick", action="store_true", help="n=30")
    args = ap.parse_args(argv)
    n = 30 if args.quick else args.n

    import yaml
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from evoharness.program import GenerationParams, Program
    from evoharness.sim import SimGenerator
    from services.common.channel import open_channel
    from services.common.process import ManagedProcess, free_port
    from services.generation.client import GenerationClient
    from services.protos import convert
    from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc
    from services.storage.s3 import S3ArtifactStore
    from services.storage.seaweed import start_seaweedfs

    params = GenerationParams(steps=30, guidance_scale=6.0, width=args.size, height=args.size)
    prompts = ["a photo of two red apples and a blue car", "a green bench left of a dog"]

    def program(i: int, tag: str) -> Program:
        return Program(prompt=f"{prompts[i % 2]} {tag}", params=params, seed=i)

    run_tag = str(time.time_ns())
    sim = SimGenerator()
    sim.generate(program(0, "warmup"))
    t = time.perf_counter()
    for i in range(n):
        sim.generate(program(i, "inproc" + run_tag))
    inproc = n / (time.perf_counter() - t)

    work = Path(tempfile.mkdtemp(prefix="evoharness-bench-"))
    weed, s3 = start_seaweedfs(work / "s3", work / "weed.log")
    svc = None
    try:
        cfg = work / "generation.yaml"
        cfg.write_text(
            yaml.safe_dump({"backend": "sim", "s3": {"endpoint": s3.endpoint, "bucket": "bench"}})
        )
        port = free_port()
        env = {
            "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
            "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
            "OMP_NUM_THREADS": "1",
        }
        svc = ManagedProcess(
            "generation",
            [
                sys.executable,
                "-m",
                "evoharness_app",
                "serve",
                "generation",
                "--config",
                str(cfg),
                "--port",
                str(port),
                "--metrics-port",
                "-1",
                "--log-level",
                "WARNING",
            ],
            work / "generation.log",
            env=env,
            cwd=str(ROOT),
        ).start()
        address = f"127.0.0.1:{port}"

        def healthy() -> bool:
            with open_channel(address) as ch:
                r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1)
                return bool(r.status == health_pb2.HealthCheckResponse.SERVING)

        svc.wait_healthy(healthy, timeout=120)
        store = S3ArtifactStore.from_settings(s3.model_copy(update={"bucket": "bench"}))
        channel = open_channel(address)
        stub = generation_pb2_grpc.GenerationServiceStub(channel)

        def call(p: Program) -> tuple[float, generation_pb2.GenerateResponse]:
            req = generation_pb2.GenerateRequest(program=convert.program_to_proto(p))
            t0 = time.perf_counter()
            resp = stub.Generate(req, timeout=60)
            return time.perf_counter() - t0, resp

        for i in range(5):  # warm up channel, S3 connections, the server's sim
            call(program(i, "warm" + run_tag))
        overhead_ms: list[float] = []
        t = time.perf_counter()
        for i in range(n):
            wall, resp = call(program(i, "svc" + run_tag))
            assert not resp.cached
            overhead_ms.append((wall - resp.generator_seconds) * 1000)
        service_rate = n / (time.perf_counter() - t)
        cached_ms = []
        for i in range(n):
            wall, resp = call(program(i, "svc" + run_tag))
            assert resp.cached
            cached_ms.append(wall * 1000)
        get_ms = []
        client = GenerationClient(address, store, channel=channel)
        for i in range(n):
            t0 = time.perf_counter()
            img = client.generate(program(i, "svc" + run_tag))
            assert img.cached
            get_ms.append((time.perf_counter() - t0) * 1000)
        channel.close()
        # the S3 part alone: one PUT of a PNG of this size (what every generated image costs)
        png = sim.generate(program(0, "put" + run_tag)).png
        put_ms = []
        for i in range(n):
            t0 = time.perf_counter()
            store.put(f"bench-put/{run_tag}/{i}.png", png, "image/png", skip_if_present=False)
            put_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        if svc is not None:
            svc.stop()
        weed.stop()

    print(
        f"sim backend, {args.size}x{args.size}, n={n} (shared machine; figures are disturbed by other load)"
    )
    print(f"  in-process            {inproc:8.1f} images/s")
    print(
        f"  through gRPC + S3     {service_rate:8.1f} images/s   ratio service/in-process = {service_rate / inproc:.2f}"
    )
    print(
        f"  platform overhead per image (gRPC + validation + key + S3 record GET + S3 image and record PUTs): "
        f"p50 {statistics.median(overhead_ms):.2f} ms, p95 {pct(overhead_ms, 0.95):.2f} ms "
        f"(target p50 <= 10 ms: {'met' if statistics.median(overhead_ms) <= 10 else 'NOT met'})"
    )
    print(
        f"    of which one S3 PUT of the {len(png) // 1024} KB PNG alone: "
        f"p50 {statistics.median(put_ms):.2f} ms, p95 {pct(put_ms, 0.95):.2f} ms"
    )
    print(
        f"  cached Generate (gRPC + S3 GET of the record): p50 {statistics.median(cached_ms):.2f} ms, p95 {pct(cached_ms, 0.95):.2f} ms"
    )
    print(
        f"  client adapter, cached, incl. S3 GET of the PNG: p50 {statistics.median(get_ms):.2f} ms, p95 {pct(get_ms, 0.95):.2f} ms"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
