"""The activity of a non-TRACE search protocol (issue 31): one step of
``evoharness.search.protocols.search_step`` per activity, over the worker's execution port
(the same content-addressed cache as a TRACE round's ``execute_batch``), the search report
written to the store after each step (``store_keys.search_report_key``).

A step is deterministic given its input state (the proposer is seeded), so a step retried
after its worker died proposes the same candidates and finds the executions the dead worker
completed in the execution cache: no completed generator call is repeated. Those executions
count as cache hits in the retried step's cost, as an abandoned TRACE activity's do.

``SearchActivities`` shares a ``TraceActivities``' settings, store, ports and proposers;
``search_proposers`` are extra proposers by name (``SearchStepRequest.proposer``), e.g.
the tests' adversarial one. Any other name but ``rule`` is a TRACE proposer backend
(``workflows.backends.build_proposer``; ``TraceActivities.proposers`` first) with a search
role: ``grpc`` is the LLM search proposer through the proposer service
(``evoharness.search.llm.LlmSearchProposer`` over ``ProposerClient.propose_search``), its
client held for the worker's life as TRACE's is; the answers it refused, and a proposer
service that failed, are recorded in the search report as candidates that never ran.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from evoharness.harness.schema import Harness
from evoharness.search.feedback import SearchProposer
from evoharness.search.llm import LlmSearchProposer
from evoharness.search.protocols import SearchPorts, SearchState, search_step
from evoharness.tasks.models import Task
from workflows.backends import PROPOSER_SERVICE_ERRORS, Proposer, build_proposer
from workflows.errors import bad_input
from workflows.heartbeat import heartbeating
from workflows.params import Backends
from workflows.store_keys import search_report_key


class SearchStepRequest(BaseModel):
    """One search step: the run, the state before it, the starting harness, the feedback
    and selection tasks (the state's manifest's), the backends, ``proposer``: the name
    of a registered search proposer ("" or ``rule``: the protocol's default, the mutation
    proposer), and ``wall_s``: the seconds since the run started by the workflow's clock
    (for ``budget_wall_s``; 0 when the run has none)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    state: SearchState
    start: Harness
    feedback: list[Task]
    selection: list[Task]
    backends: Backends = Field(default_factory=Backends)
    proposer: str = ""
    wall_s: float = 0.0


class SearchStepResult(BaseModel):
    """The state after the step and what the whole search has cost so far: ``cost`` has
    ``generator_calls``, ``cache_hits``, ``executions``, ``generator_seconds`` and
    ``spend_usd`` (at the worker's prices, ``Prices.generator_usd``)."""

    model_config = ConfigDict(extra="forbid")

    state: SearchState
    cost: dict[str, float]


class SearchActivities:
    """The search step activity over ``acts`` (a ``TraceActivities``)."""

    def __init__(self, acts: Any, search_proposers: dict[str, SearchProposer] | None = None):
        self.acts = acts
        self.search_proposers = dict(search_proposers or {})
        self._backends: dict[str, Proposer] = {}
        self._lock = threading.Lock()

    @activity.defn(name="search_step")
    def search_step(self, req: SearchStepRequest) -> SearchStepResult:
        """The next step of ``req.state`` (``search.protocols.search_step``), through the
        worker's ports; heartbeats while it runs. Bad input (an unknown proposer, splits
        that differ from the state's manifest, a harness that does not compile) is not
        retried."""
        with heartbeating(lambda: f"search step {req.state.next_iteration}"):
            return self._step(req)

    def _step(self, req: SearchStepRequest) -> SearchStepResult:
        # the TRACE proposer of the ports is never called here: the search's is ``proposer``
        ports = self.acts.ports(req.backends.model_copy(update={"proposer": "rule"}))
        proposer = self.search_proposers.get(req.proposer)
        if proposer is None and req.proposer not in ("", "rule"):
            proposer = self._llm(req.proposer)
        try:
            state = search_step(
                req.state,
                SearchPorts(
                    ports.execute,
                    ports.compile_program,
                    ports.generator.capabilities,
                    self.acts.prices,
                ),
                req.start,
                req.feedback,
                req.selection,
                proposer,
                wall_s=req.wall_s,
            )
        except ValueError as exc:
            raise bad_input(f"search step {req.state.next_iteration}: {exc}") from None
        self.acts.store.put(
            search_report_key(req.run_id),
            state.run.model_dump_json(indent=2).encode(),
            "application/json",
        )
        cost = state.cost()
        cost["spend_usd"] = state.spend(self.acts.prices).usd  # what budget_usd reads
        return SearchStepResult(state=state, cost=cost)

    def _llm(self, name: str) -> SearchProposer:
        """The search proposer of TRACE proposer backend ``name`` (module docstring), a new
        ``LlmSearchProposer`` per step over the backend built once. Raises the
        non-retryable bad input for an unknown name or a backend with no search role."""
        with self._lock:
            backend = self._backends.get(name) or self.acts.proposers.get(name)
            if backend is None:
                try:
                    backend = build_proposer(name, self.acts.settings)
                except ValueError:
                    backend = None
                if backend is not None:
                    self._backends[name] = backend
        if backend is None or backend.search is None:
            known = ", ".join(["rule", "grpc", *sorted(self.search_proposers)])
            raise bad_input(
                f"search: no search proposer {name!r} (known: {known}; 'rule' is the "
                "protocol's mutation proposer, 'grpc' the LLM proposer of the proposer service)"
            )
        return LlmSearchProposer(backend.search, errors=PROPOSER_SERVICE_ERRORS)

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [self.search_step]
