"""One execution cache, one record per execution: the worker's generator in front of a real
generation service (a subprocess on a free port, ``evoharness serve generation``, writing to
a real SeaweedFS S3 server) asks the service, which owns the cache. A second identical
execution is a hit that carries the cost recorded when it was generated; the store holds
exactly one image and one metadata record per execution; hits and misses are counted once,
by the service; two identical requests at once make one generator call."""

from __future__ import annotations

import base64
import json
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

import services.common.metrics  # noqa: F401 - registers the counters read here
from evoharness.execution_cache import ExecutionRecord, execution_object_key
from evoharness.program import GenerationParams, Program, execution_key
from services.generation.client import GenerationClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.oip import metric_value
from tests.fixtures.services import PatternGenerator, ServiceHandle, s3_config
from workflows.backends import CachingGenerator

BACKEND = "tests.fixtures.services:pattern_generator"
GENERATOR_ID = "pattern@cache-1"
SMALL = GenerationParams(steps=4, guidance_scale=5.0, width=64, height=64)


@pytest.fixture(scope="module")
def store(s3_server: Any) -> S3ArtifactStore:
    bucket = f"xc-{uuid.uuid4().hex[:16]}"
    s = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    s.ensure_bucket()
    return s


@pytest.fixture(scope="module")
def gen_service(service_factory: Any, s3_server: Any, store: S3ArtifactStore) -> ServiceHandle:
    s3, env = s3_config(s3_server, store.bucket)
    return service_factory(
        "generation",
        {
            "backend": BACKEND,
            "generator_id": GENERATOR_ID,
            "sim": {"delay": 1.0},
            "max_concurrent_generations": 4,
            "s3": s3,
        },
        env=env,
    )


def _service_counts(h: ServiceHandle) -> tuple[float, float, float]:
    text = h.metrics_text()
    return (
        metric_value(text, "evoharness_cache_hits_total", {}),
        metric_value(text, "evoharness_cache_misses_total", {}),
        metric_value(text, "evoharness_images_generated_total", {}),
    )


def _worker_counts() -> tuple[float | None, float | None]:
    """This (the worker's) process's cache counters."""
    return (
        REGISTRY.get_sample_value("evoharness_cache_hits_total"),
        REGISTRY.get_sample_value("evoharness_cache_misses_total"),
    )


def _objects_of(store: S3ArtifactStore, key: str) -> list[str]:
    return sorted(k for k in store.list_keys("") if key in k)


def test_second_identical_execution_is_a_hit_with_its_cost_and_one_record(
    gen_service: ServiceHandle, store: S3ArtifactStore, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.log"
    client = GenerationClient(gen_service.address, store)
    gen = CachingGenerator(client, store, str(calls))
    program = Program(prompt=f"slow two blue cubes {uuid.uuid4().hex}", params=SMALL, seed=5)
    worker_before = _worker_counts()
    before = _service_counts(gen_service)
    try:
        first = gen.generate(program)
        second = gen.generate(program)
    finally:
        client.close()

    key = execution_key(program, GENERATOR_ID)
    # computed once, by the service, and carried
    assert first.execution_key == second.execution_key == key
    assert not first.cached and first.seconds >= 1.0  # the backend slept its 1 s delay
    assert second.cached and second.seconds == 0.0
    assert second.nominal_seconds == pytest.approx(first.seconds)
    assert first.nominal_seconds == pytest.approx(first.seconds)
    assert second.png == first.png and second.ref == first.ref
    # the worker counted one call and one hit, and logged the one call actually made
    assert (gen.counters.misses, gen.counters.hits) == (1, 1)
    assert [line.split("\t")[0] for line in calls.read_text().splitlines()] == [key]
    # exactly one image and one metadata record for this execution, where the cache puts them
    png_key, rec_key = execution_object_key(key), execution_object_key(key, ".json")
    assert _objects_of(store, key) == sorted([png_key, rec_key])
    rec = ExecutionRecord.model_validate(json.loads(store.get(rec_key)))
    assert (rec.key, rec.sha256, rec.generator_id) == (png_key, first.ref.sha256, GENERATOR_ID)
    assert rec.seconds == pytest.approx(first.seconds)
    # hits and misses are counted once, by the service (the dashboard sums every process)
    after = _service_counts(gen_service)
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (1, 1, 1)
    assert _worker_counts() == worker_before


def test_identical_requests_at_once_make_one_generator_call(
    gen_service: ServiceHandle, store: S3ArtifactStore
) -> None:
    """Two attempts of one activity running at once (tests/chaos) reach the service together;
    the service holds the execution key's lock, so one generates and the other is served the
    record (the backend sleeps 1 s, so the two requests overlap)."""
    program = Program(prompt=f"slow a green ball {uuid.uuid4().hex}", params=SMALL, seed=1)
    before = _service_counts(gen_service)
    with GenerationClient(gen_service.address, store) as client:
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(lambda _: client.generate(program), range(2))
    after = _service_counts(gen_service)
    assert sorted([a.cached, b.cached]) == [False, True]
    assert a.nominal_seconds == pytest.approx(b.nominal_seconds) and a.nominal_seconds >= 1.0
    assert after[2] - before[2] == 1  # one image generated
    key = execution_key(program, GENERATOR_ID)
    assert len(_objects_of(store, key)) == 2  # its image and its record


@pytest.mark.parametrize("large_manifest", [False, True])
def test_an_execution_stored_before_records_is_a_hit_and_gets_its_record(
    gen_service: ServiceHandle, store: S3ArtifactStore, large_manifest: bool
) -> None:
    """Before execution records the service kept the record in the PNG's S3 metadata (the
    manifest packed in it, or at ``<key>.json`` when large). After an upgrade such an
    execution is served as a hit with its recorded cost, never generated again, and gets its
    one record."""
    program = Program(prompt=f"stored before {uuid.uuid4().hex}", params=SMALL)
    key = execution_key(program, GENERATOR_ID)
    png = PatternGenerator().generate(program).png
    manifest = {"prompt": program.prompt, "objects": ["a"] * (200 if large_manifest else 1)}
    raw = json.dumps(manifest).encode()
    meta = {"execution-key": key, "width": "64", "height": "64", "generator-seconds": "2.5"}
    if large_manifest:
        store.put(execution_object_key(key, ".json"), raw, "application/json")
        meta["manifest"] = "1"
    else:
        meta["manifest-z"] = base64.b64encode(zlib.compress(raw, 9)).decode()
    store.put(execution_object_key(key), png, "image/png", metadata=meta)
    before = _service_counts(gen_service)
    with GenerationClient(gen_service.address, store, include_manifest=True) as client:
        img = client.generate(program)
        again = client.generate(program)
    after = _service_counts(gen_service)
    assert img.cached and again.cached and img.png == png
    assert img.nominal_seconds == again.nominal_seconds == 2.5
    assert img.manifest == again.manifest == manifest
    assert after[2] == before[2]  # nothing generated
    rec = ExecutionRecord.model_validate(json.loads(store.get(execution_object_key(key, ".json"))))
    assert (rec.execution_key, rec.seconds, rec.manifest) == (key, 2.5, manifest)
