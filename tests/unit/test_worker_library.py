"""The worker's reference library (issue 32): ``worker.library_index: embedded`` builds the
embedded library into the worker's store on first use, the evolved harness's agent searches
it (``image_search``), and the worker's in-process ``sim`` generator reads the references it
picked from that store; without the setting the agent is not offered ``image_search``."""

from __future__ import annotations

from pathlib import Path

from evoharness.harness.io import load_dir
from evoharness.harness.schema import Harness
from evoharness.sim.reference_library import DEFAULT_PREFIX, index_key
from tests.unit._trace_world import task
from workflows.backends import TracePorts, WorkerSection, WorkerSettings

ROOT = Path(__file__).resolve().parents[2]


def with_image_search() -> Harness:
    doc = load_dir(ROOT / "harnesses" / "baseline").model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"name": "references", "kind": "image_search", "top_k": 4},
        {"name": "agent", "kind": "agent", "backend": "rule"},
    ]
    return Harness.model_validate(doc)


def _ports(tmp_path: Path, library_index: str) -> TracePorts:
    worker = WorkerSection(store="local", local_dir=str(tmp_path), library_index=library_index)
    return TracePorts(WorkerSettings(worker=worker), verifier="sim")


def test_worker_library_reaches_the_agent_and_the_generator(tmp_path: Path) -> None:
    ports = _ports(tmp_path / "store", "embedded")
    t = task(
        "t0",
        "a wooden chair and a striped cat",
        ("c0", "attribute", {"subject": "chair", "value": "wooden"}),
    )
    ex = ports.execute(with_image_search(), t, 0)
    assert (tmp_path / "store" / index_key(DEFAULT_PREFIX)).is_file()
    assert ex.program.prompt == "the wooden chair from image 1 and the striped cat from image 2"
    assert [r.bucket for r in ex.program.references or []] == ["local", "local"]
    [agent] = [r for r in ex.trace if r.get("step") == "agent"]
    assert [c["tool"] for c in agent["trajectory"] if c["type"] == "tool_call"] == [
        "image_search",
        "image_search",
    ]
    assert [e.constraint_id for e in ex.evidence] == ["c0"]  # drawn and inspected


def test_without_a_worker_library_image_search_is_not_offered(tmp_path: Path) -> None:
    ports = _ports(tmp_path / "store", "")
    t = task("t0", "a wooden chair", ("c0", "object", {"subject": "chair"}))
    ex = ports.execute(with_image_search(), t, 0)
    assert ex.program.prompt == "a wooden chair" and not ex.program.references
    [agent] = [r for r in ex.trace if r.get("step") == "agent"]
    assert "no reference library configured: image_search not offered" in agent["notes"]
