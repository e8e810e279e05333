"""The backends a harness's tools call: layout planner, reference retriever, knowledge lookup.

Adapters (an LLM layout planner, a reference-image index, a knowledge base) live outside the
core; the runtime calls them through these protocols and never does I/O itself. When a tool
is configured but its backend is not given, the runtime falls back (deterministic planner) or
skips the tool, and says so in the trace. The embedded memory backend is
``evoharness.runtime.bundle_memory.BundleMemory``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from evoharness.agent.library import ReferenceLibrary
from evoharness.agent.loop import AgentBackend
from evoharness.agent.search import SearchProvider
from evoharness.program import ImageRef, LayoutItem
from evoharness.tasks.models import Constraint


@runtime_checkable
class LayoutPlanner(Protocol):
    """Plans layout boxes for a prompt (e.g. an LLM planner, LayoutGPT-style)."""

    def plan(
        self, prompt: str, constraints: Sequence[Constraint], margin: float
    ) -> list[LayoutItem]: ...


@runtime_checkable
class ReferenceRetriever(Protocol):
    """Finds up to ``top_k`` reference images for a prompt in ``source``."""

    def retrieve(
        self, prompt: str, constraints: Sequence[Constraint], source: str, top_k: int
    ) -> list[ImageRef]: ...


@runtime_checkable
class KnowledgeLookup(Protocol):
    """Returns a short description of what the prompt depicts, or None."""

    def lookup(self, prompt: str, source: str) -> str | None: ...


__all__ = ["KnowledgeLookup", "LayoutPlanner", "ReferenceRetriever"]


@dataclass(frozen=True)
class ToolBackends:
    """The backends a harness's tools call, each None when not given (the runtime then
    falls back or skips the tool, traced: module docstring)."""

    layout_planner: LayoutPlanner | None = None
    reference_retriever: ReferenceRetriever | None = None
    knowledge: KnowledgeLookup | None = None
    #: the agent's ``search`` providers by name (the shipped knowledge base serves
    #: ``embedded`` when absent), its LLM backend (the rule planner when None) and its
    #: ``image_search`` library (not offered when None)
    search_providers: Mapping[str, SearchProvider] | None = None
    agent_backend: AgentBackend | None = None
    reference_library: ReferenceLibrary | None = None
