"""The post-promotion canary check (issue 34) on a real Temporal dev server, a real S3 server
and the real registry service: sampled Render records of a canary and its stable registration
are in the store, ``CanaryCheckWorkflow`` judges them. A worse canary is rolled back by a
compare-and-set; an equal or better one is kept; too few requests end inconclusive at the
deadline without a rollback; a channel moved between the check's read and its write (the
compare-and-set loses the race) is reported and left as the other writer set it."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from temporalio.worker import Worker

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.traffic.records import batch_key, dump_batch
from harness_registry import Lineage
from services.registry.registrar import RegistryResultRegistrar
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.traffic import sampled
from tests.workflows.conftest import ROOT, settings_for
from workflows.activities import TraceActivities
from workflows.postpromotion_canary import (
    CanaryCheckActivities,
    CanaryCheckInput,
    CanaryCheckResult,
    CanaryCheckWorkflow,
    check_id,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

SMALL = [{"op": "replace", "path": "/policy/params/width", "value": 256}]


@dataclass
class Bench:
    """A running worker for the check, the store it reads and the registry it writes."""

    client: Any
    queue: str
    acts: TraceActivities
    store: S3ArtifactStore
    registry: Any


@pytest_asyncio.fixture(loop_scope="session")
async def bench(temporal_env: Any, s3_server: Any, registry_client: Any) -> AsyncIterator[Bench]:
    bucket = f"canary-{uuid.uuid4().hex[:10]}"
    settings = settings_for(s3_server, bucket)
    acts = TraceActivities(settings, RegistryResultRegistrar(registry_client))
    acts.store.ensure_bucket()
    queue = f"canary-{uuid.uuid4().hex[:8]}"
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        async with Worker(
            temporal_env.client,
            task_queue=queue,
            workflows=[CanaryCheckWorkflow],
            activities=CanaryCheckActivities(acts).all(),
            activity_executor=ex,
        ):
            yield Bench(temporal_env.client, queue, acts, acts.store, registry_client)


def _channel(b: Bench, tag: str) -> tuple[str, str, str, int]:
    """A fresh channel serving the baseline with a variant as canary at weight 0.5:
    ``(channel, stable, canary, version)``."""
    base = load_dir(ROOT / "harnesses" / "baseline")
    variant = apply_patch(base, {"responsibility": "policy", "ops": SMALL})
    stable, _, _ = b.registry.put(base, Lineage(registered_by="canary-check-test"))
    canary, _, _ = b.registry.put(variant, Lineage(registered_by="canary-check-test"))
    channel = f"canary-{tag}-{uuid.uuid4().hex[:6]}"
    b.registry.promote(channel, stable, expected=None, actor="test")
    moved = b.registry.promote(
        channel,
        stable,
        expected=stable,
        canary_registration_id=canary,
        canary_weight=0.5,
        actor="test",
    )
    return channel, stable, canary, moved.version


def _serve(b: Bench, channel: str, recs: list[Any]) -> None:
    b.store.put(batch_key("traffic", channel, dt.datetime.now(dt.UTC)), dump_batch(recs))


async def _check(b: Bench, channel: str, canary: str, version: int, **kw: Any) -> Any:
    inp = CanaryCheckInput(
        channel=channel, canary_registration_id=canary, channel_version=version, **kw
    )
    return await b.client.execute_workflow(
        CanaryCheckWorkflow.run,
        inp,
        id=check_id(channel, version),
        task_queue=b.queue,
        result_type=CanaryCheckResult,
    )


async def test_a_worse_canary_is_rolled_back_by_compare_and_set(bench: Bench) -> None:
    channel, stable, canary, version = _channel(bench, "worse")
    _serve(bench, channel, sampled(canary, 20, 40, channel) + sampled(stable, 45, 15, channel))
    got = await _check(bench, channel, canary, version)
    assert got.outcome == "rolled_back" and got.looks == 1, got
    assert (got.n_canary, got.n_stable) == (60, 60) and got.p_value < 0.001
    res = bench.registry.resolve(channel, with_document=False)
    assert res.registration_id == stable and res.canary_registration_id is None
    last = max(bench.registry.history(channel), key=lambda e: e.version)
    assert last.version == version + 1 and last.actor == "post-promotion canary check"
    assert "Fisher one-sided" in last.reason and canary in last.reason


@pytest.mark.parametrize(("canary_pass", "tag"), [(45, "equal"), (55, "better")])
async def test_an_equal_or_better_canary_is_kept(bench: Bench, canary_pass: int, tag: str) -> None:
    channel, stable, canary, version = _channel(bench, tag)
    recs = sampled(canary, canary_pass, 60 - canary_pass, channel)
    _serve(bench, channel, recs + sampled(stable, 45, 15, channel))
    got = await _check(bench, channel, canary, version)
    assert got.outcome == "kept" and got.p_value > 0.05, got
    res = bench.registry.resolve(channel, with_document=False)
    assert res.version == version and res.canary_registration_id == canary


async def test_too_few_requests_wait_then_end_inconclusive(bench: Bench) -> None:
    """10 requests per arm, the canary failing them all: not enough to judge; the check looks
    again every 0.5 s until its 2 s deadline and leaves the canary in place. Records served
    before the promotion (a worse-looking past) are not counted."""
    channel, stable, canary, version = _channel(bench, "few")
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    recs = sampled(canary, 0, 10, channel) + sampled(stable, 10, 0, channel)
    _serve(bench, channel, recs + sampled(canary, 0, 100, channel, when=old))
    got = await _check(bench, channel, canary, version, poll_s=0.5, deadline_s=2)
    assert got.outcome == "inconclusive" and got.looks >= 3, got
    assert (got.n_canary, got.n_stable) == (10, 10) and "deadline" in got.detail
    res = bench.registry.resolve(channel, with_document=False)
    assert res.version == version and res.canary_registration_id == canary


class RacingStore:
    """The worker's store, except that the first listing of the channel's traffic first
    promotes ``registration`` on the channel: another writer moving it while the check
    reads, between its resolve and its compare-and-set."""

    def __init__(self, inner: Any, registry: Any, channel: str, registration: str) -> None:
        self.inner, self.registry, self.channel, self.registration = (
            inner,
            registry,
            channel,
            registration,
        )
        self.raced = False

    def list_keys(self, prefix: str = "") -> list[str]:
        if not self.raced and prefix.startswith(f"traffic/{self.channel}/"):
            self.raced = True
            cur = self.registry.resolve(self.channel, with_document=False)
            self.registry.promote(
                self.channel, self.registration, expected=cur.registration_id, actor="racer"
            )
        keys: list[str] = self.inner.list_keys(prefix)
        return keys

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_lost_compare_and_set_is_reported_not_overwritten(bench: Bench) -> None:
    channel, stable, canary, version = _channel(bench, "race")
    _serve(bench, channel, sampled(canary, 20, 40, channel) + sampled(stable, 45, 15, channel))
    other, _, _ = bench.registry.put(
        apply_patch(
            load_dir(ROOT / "harnesses" / "baseline"),
            {
                "responsibility": "policy",
                "ops": [{"op": "replace", "path": "/policy/params/height", "value": 256}],
            },
        ),
        Lineage(registered_by="racer"),
    )
    real = bench.acts.store
    bench.acts.store = RacingStore(real, bench.registry, channel, other)  # type: ignore[assignment]
    try:
        got = await _check(bench, channel, canary, version)
    finally:
        bench.acts.store = real
    assert got.outcome == "lost_race", got
    assert "moved since version" in got.detail
    res = bench.registry.resolve(channel, with_document=False)
    assert res.version == version + 1 and res.registration_id == other  # the racer's move
    assert res.canary_registration_id is None
    last = max(bench.registry.history(channel), key=lambda e: e.version)
    assert last.actor == "racer"
