"""Load benchmark: ``Runtime.Render`` under 1, 8 and 32 concurrent clients, and a burst past
capacity.

Starts SeaweedFS and the stack (generation + verification on the sim backend, the registry on
SQLite, the runtime) as ``evoharness serve`` subprocesses on loopback, registers the baseline
harness (128x128, 8 steps) on channel ``prod``, then for each client count renders for a fixed
time (each call a fresh seed, so every call generates and stores) and prints p50/p95/p99
latency (ms), throughput (renders/s), errors by status, and the runtime server's RSS before
and after (MiB). Then a burst: a runtime started with ``server.limits.max_concurrent_rpcs``
= 4 gets 64 simultaneous renders; it prints how many were shed with RESOURCE_EXHAUSTED and
how fast the refusals came (p95 ms) against the served ones.

Run: ``.venv/bin/python bench/load_bench.py [--seconds 10] [--quick]``. Wall-clock figures
on a shared machine: other processes disturb them. ``tests/services/test_load.py`` asserts
the behaviour (no errors under 8 clients, bounded memory growth, shedding) with the same
functions, never a time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness_registry import Lineage  # noqa: E402
from services.protos.evoharness.v1 import runtime_pb2, runtime_pb2_grpc  # noqa: E402

PROMPTS = [
    "a photo of two red apples and a blue car",
    "a green bench left of a dog",
    "three cats on a sofa",
    "a sign that says open",
]
#: The harness the bench serves: the baseline at 128x128, 8 steps (cheap sim renders).
SMALL = [
    {"op": "replace", "path": "/policy/params/width", "value": 128},
    {"op": "replace", "path": "/policy/params/height", "value": 128},
    {"op": "replace", "path": "/policy/params/steps", "value": 8},
]


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values`` (nearest rank on the sorted list); nan if empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


@dataclass
class LoadResult:
    """One load level: ``latencies`` (s) of successful calls, ``errors`` by status name."""

    clients: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_latencies: list[float] = field(default_factory=list)
    rss_before: int = 0
    rss_after: int = 0

    def line(self) -> str:
        ms = [x * 1000 for x in self.latencies]
        return (
            f"clients={self.clients:3d} ok={len(ms):5d} thr={len(ms) / self.seconds:7.1f}/s "
            f"p50={pct(ms, 0.5):7.1f} p95={pct(ms, 0.95):7.1f} p99={pct(ms, 0.99):7.1f} ms "
            f"errors={dict(self.errors) or 0} rss={self.rss_before / 2**20:.0f}->"
            f"{self.rss_after / 2**20:.0f} MiB"
        )


def rss(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes."""
    import psutil

    return int(psutil.Process(pid).memory_info().rss)


def render_request(i: int, tag: str) -> runtime_pb2.RenderRequest:
    """A render of one of ``PROMPTS`` on ``prod`` with a fresh seed (no cache hit)."""
    return runtime_pb2.RenderRequest(
        prompt=f"{PROMPTS[i % len(PROMPTS)]} {tag}", channel="prod", seed=i
    )


def run_load(channel: grpc.Channel, clients: int, seconds: float, pid: int) -> LoadResult:
    """``clients`` threads render back to back on ``channel`` for ``seconds``."""
    stub = runtime_pb2_grpc.RuntimeStub(channel)
    res = LoadResult(clients, seconds, rss_before=rss(pid))
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    tag = uuid.uuid4().hex[:8]

    def client(k: int) -> None:
        i = k
        while time.monotonic() < stop:
            t = time.perf_counter()
            try:
                stub.Render(render_request(i, tag), timeout=60)
                with lock:
                    res.latencies.append(time.perf_counter() - t)
            except grpc.RpcError as err:
                with lock:
                    res.errors[err.code().name] += 1
                    res.error_latencies.append(time.perf_counter() - t)
            i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    res.rss_after = rss(pid)
    return res


def burst(channel: grpc.Channel, n: int, pid: int) -> LoadResult:
    """``n`` renders started at once (futures); errors counted by status."""
    stub = runtime_pb2_grpc.RuntimeStub(channel)
    res = LoadResult(n, 1.0, rss_before=rss(pid))
    tag = uuid.uuid4().hex[:8]
    t0 = time.perf_counter()
    futs = [stub.Render.future(render_request(i, tag), timeout=120) for i in range(n)]
    done: list[tuple[Any, float]] = []
    lock = threading.Lock()
    all_done = threading.Event()

    def on_done(f: Any) -> None:
        with lock:
            done.append((f, time.perf_counter() - t0))
            if len(done) == n:
                all_done.set()

    for f in futs:
        f.add_done_callback(on_done)
    all_done.wait(180)
    for f, dt in done:
        if f.code() == grpc.StatusCode.OK:
            res.latencies.append(dt)
        else:
            res.errors[f.code().name] += 1
            res.error_latencies.append(dt)
    res.seconds = max((dt for _, dt in done), default=1.0)
    res.rss_after = rss(pid)
    return res


def start_stack(
    s3: Any, work: Path, runtime_server: dict[str, Any] | None = None
) -> tuple[dict[str, Any], Callable[[], None]]:
    """Start generation, verification, registry and runtime against S3 settings ``s3``
    (``S3Settings``), register the small baseline on ``prod``; (handles, stop)."""
    from evoharness.harness.io import load_dir
    from evoharness.harness.patch import apply_patch
    from services.registry.client import RegistryClient
    from tests.fixtures.services import start_service

    s3cfg = {"endpoint": s3.endpoint, "secure": False, "bucket": s3.bucket}
    env = {
        "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
        "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
    }
    handles: dict[str, Any] = {}

    def stop() -> None:
        for h in reversed(list(handles.values())):
            h.stop()

    try:
        handles["generation"] = start_service(
            "generation", {"backend": "sim", "s3": s3cfg}, env=env, workdir=work
        )
        handles["verification"] = start_service(
            "verification", {"backend": "sim", "s3": s3cfg}, env=env, workdir=work
        )
        db = work / f"registry-{uuid.uuid4().hex[:6]}.db"
        handles["registry"] = start_service(
            "registry",
            {"registry": {"database_url": f"sqlite:///{db}", "blob_store": "s3"}, "s3": s3cfg},
            env=env,
            workdir=work,
        )
        runtime_cfg = {
            "registry_address": handles["registry"].address,
            "generation_address": handles["generation"].address,
            "verification_address": handles["verification"].address,
        }
        cfg: dict[str, Any] = {"runtime": runtime_cfg, "s3": s3cfg}
        if runtime_server:
            cfg["server"] = runtime_server
        handles["runtime"] = start_service("runtime", cfg, env=env, workdir=work)
        base = apply_patch(
            load_dir(ROOT / "harnesses" / "baseline"), {"responsibility": "policy", "ops": SMALL}
        )
        with RegistryClient(handles["registry"].address) as client:
            reg_id, _, _ = client.put(base, Lineage(registered_by="load_bench"))
            client.promote("prod", reg_id, expected=None, actor="load_bench")
    except BaseException:
        stop()
        raise
    return handles, stop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="per load level")
    ap.add_argument("--quick", action="store_true", help="3 s per level")
    args = ap.parse_args(argv)
    seconds = 3.0 if args.quick else args.seconds

    from services.storage.seaweed import start_seaweedfs

    work = Path(tempfile.mkdtemp(prefix="evoharness-load-"))
    weed, s3 = start_seaweedfs(work / "s3", work / "weed.log")
    s3 = s3.model_copy(update={"bucket": "load"})
    try:
        from services.storage.s3 import S3ArtifactStore

        S3ArtifactStore.from_settings(s3).ensure_bucket()
        handles, stop = start_stack(s3, work)
        try:
            rt = handles["runtime"]
            pid = rt.process.pid
            ch = rt.channel()
            run_load(ch, 2, 1.0, pid)  # warm-up
            print(f"Runtime.Render, {seconds:.0f} s per level, sim backend 128x128, fresh seeds")
            for clients in (1, 8, 32):
                print(run_load(ch, clients, seconds, pid).line(), flush=True)
        finally:
            stop()
        handles, stop = start_stack(
            s3, work, {"max_workers": 2, "limits": {"max_concurrent_rpcs": 4}}
        )
        try:
            rt = handles["runtime"]
            b = burst(rt.channel(), 64, rt.process.pid)
            err_ms = [x * 1000 for x in b.error_latencies]
            ok_ms = [x * 1000 for x in b.latencies]
            print(
                f"burst of 64 at max_concurrent_rpcs=4: served={len(ok_ms)} "
                f"shed={dict(b.errors)} refusal p95={pct(err_ms, 0.95):.1f} ms, "
                f"served p95={pct(ok_ms, 0.95):.1f} ms"
            )
        finally:
            stop()
    finally:
        weed.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
