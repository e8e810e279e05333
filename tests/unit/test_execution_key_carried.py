"""The execution key is computed once per execution, by the cache in front of the generator,
and carried from there (``GeneratedImage.execution_key``) to the runtime's trace and the
``Execution`` record; a cache hit carries the stored nominal generator-seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import evoharness.runtime.middleware as middleware_mod
import workflows.backends as backends_mod
from evoharness.harness.io import load_dir
from evoharness.program import execution_key
from tests.unit._trace_world import task
from workflows.backends import TracePorts, WorkerSection, WorkerSettings

ROOT = Path(__file__).resolve().parents[2]


def test_the_execution_key_is_computed_once_and_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = WorkerSettings(
        worker=WorkerSection(store="local", local_dir=str(tmp_path), sim_profile="sd15-like")
    )
    ports = TracePorts(settings, verifier="sim")
    computed: list[Any] = []

    def counting(*args: Any, **kw: Any) -> str:
        computed.append(args[0])
        return execution_key(*args, **kw)

    monkeypatch.setattr(backends_mod, "execution_key", counting)
    monkeypatch.setattr(middleware_mod, "execution_key", counting)
    harness = load_dir(ROOT / "harnesses" / "reference")  # verify-and-repair: several attempts
    t = task("t0", "three red apples", ("c0", "count", {"subject": "apple", "min_count": 3}))
    first = ports.execute(harness, t, 0)
    # one key per generated image, no more: the trace and the record reuse it
    assert len(computed) == len(first.programs) >= 1
    gid = ports.generator.generator_id
    assert first.execution_key == execution_key(first.program, gid)
    keys = [r["execution_key"] for r in first.trace if r.get("step") == "generate"]
    assert keys == [execution_key(p, gid) for p in first.programs]
    assert not first.cached and first.nominal_generator_seconds == first.generator_seconds > 0

    computed.clear()
    again = ports.execute(harness, t, 0)  # every image from the cache
    assert len(computed) == len(again.programs)
    assert again.cached and again.generator_seconds == 0.0 and again.generator_calls == 0
    assert again.execution_key == first.execution_key
    assert again.nominal_generator_seconds == first.nominal_generator_seconds


def test_the_in_process_cache_keeps_one_record_per_execution(tmp_path: Path) -> None:
    """``evolve local``'s path: the worker keeps the one execution cache in its local store,
    one image and one record per execution, in the layout the generation service uses."""
    from evoharness.execution_cache import ExecutionRecord, execution_object_key

    settings = WorkerSettings(
        worker=WorkerSection(store="local", local_dir=str(tmp_path), sim_profile="sd15-like")
    )
    ports = TracePorts(settings, verifier="sim")
    harness = load_dir(ROOT / "harnesses" / "baseline")
    t = task("t0", "two blue cups", ("c0", "count", {"subject": "cup", "min_count": 2}))
    first = ports.execute(harness, t, 3)
    again = ports.execute(harness, t, 3)
    assert again.cached and again.nominal_generator_seconds == first.generator_seconds > 0
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    executions = [f for f in files if f.startswith("executions/")]
    keys = {execution_key(p, ports.generator.generator_id) for p in first.programs}
    expected = {execution_object_key(k, s) for k in keys for s in (".png", ".json")}
    assert sorted(executions) == sorted(expected)
    for k in keys:
        rec = ExecutionRecord.model_validate_json(
            (tmp_path / execution_object_key(k, ".json")).read_text()
        )
        assert rec.execution_key == k and rec.seconds > 0
    assert (ports.generator.counters.misses, ports.generator.counters.hits) == (
        len(keys),
        len(keys),
    )
