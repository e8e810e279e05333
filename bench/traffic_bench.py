"""Render latency with traffic sampling on vs off (issue 34; target: within 5%).

Starts SeaweedFS (S3), the services of ``bench/load_bench.py``'s ``start_stack`` (generation
and verification on the sim backend, the registry, a runtime without sampling, the small
baseline on ``prod``) and two more runtimes, on free ports, awaited on their gRPC health checks
and stopped by PID at the end:

- ``off``: no sampling;
- ``on``: every Render on ``prod`` sampled (rate 1.0) and written in batches to S3;
- ``full``: sampling on with a one-record queue and a writer that flushes every 60 s, so
  nearly every sampled record finds the queue full and is dropped (and counted).

Requests are cached Renders (their images exist; the generator does no work), so what is
measured is the runtime's own path, where sampling would show. The three runtimes are called in
turn for the same (prompt, seed) pair, in rotating order, so drift in machine load hits each
alike; the figure is the ratio of p50 and of mean latency, on / off and full / off.

Usage: ``python bench/traffic_bench.py [--requests 300]``. The numbers depend on the machine
and on whatever else runs on it (say so when quoting them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_bench import start_stack  # noqa: E402
from bench.runtime_bench import PROMPTS, pct, row  # noqa: E402
from services.protos.evoharness.v1 import runtime_pb2, runtime_pb2_grpc  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=300, help="requests per runtime")
    args = ap.parse_args()

    import grpc

    from services.storage.s3 import S3ArtifactStore
    from services.storage.seaweed import start_seaweedfs
    from tests.fixtures.services import start_service

    with tempfile.TemporaryDirectory(prefix="evoharness-traffic-bench-") as tmp:
        work = Path(tmp)
        weed, s3 = start_seaweedfs(work / "s3", work / "weed.log")
        s3 = s3.model_copy(update={"bucket": "bench"})
        stop_stack = None
        extra: list[Any] = []
        try:
            S3ArtifactStore.from_settings(s3).ensure_bucket()
            # generation, verification, registry and the sampling-off runtime, the small
            # baseline on prod (bench/load_bench.py)
            handles, stop_stack = start_stack(s3, work)
            s3cfg = {"endpoint": s3.endpoint, "secure": False, "bucket": s3.bucket}
            env = {
                "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
                "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
            }
            traffic = {
                "on": {"channels": ["prod"], "rate": 1.0},
                "full": {"channels": ["prod"], "rate": 1.0, "queue_size": 1, "flush_seconds": 60},
            }
            addrs = {"off": handles["runtime"].address}
            for name, tcfg in traffic.items():
                rcfg = {
                    "registry_address": handles["registry"].address,
                    "generation_address": handles["generation"].address,
                    "verification_address": handles["verification"].address,
                    "traffic": tcfg,
                }
                (work / name).mkdir()
                h = start_service(
                    "runtime", {"runtime": rcfg, "s3": s3cfg}, env=env, workdir=work / name
                )
                extra.append(h)
                addrs[name] = h.address
            stubs = {
                n: runtime_pb2_grpc.RuntimeStub(grpc.insecure_channel(a)).Render
                for n, a in addrs.items()
            }

            def call(name: str, prompt: str, seed: int) -> float:
                t = time.perf_counter()
                stubs[name](
                    runtime_pb2.RenderRequest(prompt=prompt, channel="prod", seed=seed),
                    timeout=120,
                )
                return time.perf_counter() - t

            pairs = [(PROMPTS[i % len(PROMPTS)], i % 20) for i in range(args.requests)]
            names = ["off", "on", "full"]
            for p in sorted(set(pairs)):  # warm-up: every image exists, every runtime warm
                for n in names:
                    call(n, *p)
            times: dict[str, list[float]] = {n: [] for n in names}
            for i, p in enumerate(pairs):
                order = names[i % 3 :] + names[: i % 3]
                for n in order:
                    times[n].append(call(n, *p))

            print(
                "Runtime.Render latency, traffic sampling off / on / queue full (sim backend, "
                "128x128, cached images, loopback gRPC, SeaweedFS S3)"
            )
            for n in names:
                print(row(f"sampling {n}", times[n]))
            off50, offm = pct(times["off"], 0.5), statistics.fmean(times["off"])
            for n in ("on", "full"):
                r50 = pct(times[n], 0.5) / off50
                rm = statistics.fmean(times[n]) / offm
                print(f"{n} / off: p50 {r50:.3f}  mean {rm:.3f}  (target <= 1.05)")
        finally:
            for h in extra:
                h.stop()
            if stop_stack is not None:
                stop_stack()
            weed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
