"""Issue 32: a harness is evolved against the search it is served with. The evolution
worker's ``worker.search`` and the runtime service's ``runtime.search`` are one section
(``services.runtime.search.SearchSection``) with one default, and both build their providers
with ``build_providers``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from services.common.settings import load_settings
from services.runtime.search import LazyEmbeddedKnowledgeBase, SearchSection
from services.runtime.server import RuntimeServicer
from services.runtime.settings import RuntimeSection, RuntimeSettings
from tests.unit._trace_world import task
from workflows.backends import TracePorts, WorkerSection, WorkerSettings, load_worker_settings

ROOT = Path(__file__).resolve().parents[2]

AGENT_TOOLS = [
    {"name": "facts", "kind": "search", "provider": "embedded"},
    {"name": "agent", "kind": "agent", "backend": "rule"},
]


def test_worker_and_runtime_read_one_search_setting() -> None:
    worker, runtime = WorkerSection().search, RuntimeSection().search
    assert type(worker) is type(runtime) is SearchSection and worker == runtime
    # and the shipped configuration files agree
    w = load_worker_settings(ROOT / "configs" / "evolution-worker.yaml").worker.search
    r = load_settings(RuntimeSettings, ROOT / "configs" / "runtime.yaml").runtime.search
    assert w == r


def test_evolution_and_serving_build_the_same_embedded_base(tmp_path: Path) -> None:
    section = SearchSection(embeddings="tfidf", cost_per_call=2.5)
    ports = TracePorts(
        WorkerSettings(worker=WorkerSection(store="local", local_dir=str(tmp_path), search=section))
    )
    # the servicer as the service builds it, without the services it would call
    no_registry: Any = None
    no_generation: Any = None
    servicer = RuntimeServicer(
        RuntimeSettings(runtime=RuntimeSection(search=section)), no_registry, no_generation, None
    )
    evolved = ports.runtime(load_dir(ROOT / "harnesses" / "baseline")).tools.search_providers
    served = servicer.search_providers
    assert evolved.keys() == served.keys() == {"embedded"}
    for kb in (evolved["embedded"], served["embedded"]):
        assert isinstance(kb, LazyEmbeddedKnowledgeBase)
        assert (kb.embeddings, kb.cost_per_call) == ("tfidf", 2.5)


def test_an_evolved_agent_searches_with_the_configured_provider(tmp_path: Path) -> None:
    """An execution during evolution runs the agent on ``worker.search``'s embedded base:
    its scorer and its price per call reach the trace."""
    section = SearchSection(embeddings="tfidf", cost_per_call=2.5)
    ports = TracePorts(
        WorkerSettings(
            worker=WorkerSection(store="local", local_dir=str(tmp_path), search=section)
        ),
        verifier="sim",
    )
    ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in AGENT_TOOLS]
    harness = apply_patch(
        load_dir(ROOT / "harnesses" / "baseline"), {"responsibility": "tools", "ops": ops}
    )
    t = task(
        "t0",
        "a car in the colour of a London bus",
        ("c0", "color", {"subject": "car", "value": "red"}),
    )
    for record in (ports.execute(harness, t, 0).trace, ports.compile_program(harness, t, 0).trace):
        agent = [r for r in record if r.get("step") == "agent"]
        assert len(agent) == 1 and agent[0]["output"] == "a red car"
        searches = [c for c in agent[0]["trajectory"] if c.get("tool") == "search"]
        assert agent[0]["search"] == "embedded:tfidf" and searches
        assert agent[0]["cost"] == 2.5 * len(searches)
