"""The LLM search proposer of the ``autoref`` protocol (issue 31): a ``SearchProposer`` over a
language model reached through the proposer service (``ProposerService.ProposeSearch``;
``services.proposer.client.ProposerClient.propose_search``).

It sends the ``ProposerInput`` — the parent harness, its feedback-split results and the
history of earlier candidates' (the type has no field for a selection result) — and asks
for ``n`` whole-harness patches as RFC 6902 ops, each tagged with one responsibility. The
answer is untrusted: the service's validator (``evoharness.trace.answers.parse_patch_answer``)
keeps only the patches that pass every check; what it refused, and a proposer service that
failed (one of ``errors``), are recorded in ``failures`` (``FailedProposal``) and never
raise, so a bad answer costs an iteration's candidates, not the search. The search step
takes the recorded failures (``take_failures``) into its report as candidates that never ran.

``SearchBackend``: what a proposer backend needs to serve the search role
(``services.proposer.backends.openai_chat.OpenAIChatBackend.propose_search``).

Owns no I/O; imports nothing outside the core.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from evoharness.harness.patch import Patch
from evoharness.search.feedback import ProposerInput
from evoharness.trace.answer_models import FailedProposal
from evoharness.trace.roles import LlmUsage, RoleResult

#: The role name of the search proposer (metrics labels, ``FailedProposal.role``).
ROLE = "search_proposer"

#: The search role of a proposer backend or client: ``(view, n)`` → validated patches,
#: refused answers and usage.
AskFn = Callable[[ProposerInput, int], RoleResult[Patch]]


@runtime_checkable
class SearchBackend(Protocol):
    """A proposer backend that serves the search role: up to ``n`` validated patches of
    ``view.parent`` (any responsibility, one per patch) from the feedback in ``view``."""

    def propose_search(self, view: ProposerInput, n: int) -> RoleResult[Patch]: ...


@dataclass
class LlmSearchProposer:
    """``SearchProposer`` over ``ask`` (module docstring).

    ``ask``: the search role (``ProposerClient.propose_search`` or a backend's
    ``propose_search``); ``errors``: the exceptions that mean the proposer service failed
    (unreachable, deadline exceeded…: recorded as ``backend_error``, no patches); any other
    exception is a defect and is raised. ``failures`` and ``usage`` accumulate over calls
    (thread-safe)."""

    ask: AskFn
    errors: tuple[type[Exception], ...] = ()
    failures: list[FailedProposal] = field(default_factory=list)
    usage: LlmUsage = field(default_factory=LlmUsage)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, view: ProposerInput, n: int) -> list[Patch]:
        """Up to ``n`` validated patches of ``view.parent``; never raises for a bad answer
        or a failed service (one of ``errors``). Raises ``ValueError`` when ``n`` < 0."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n == 0:
            return []
        try:
            res = self.ask(view, n)
        except self.errors as exc:
            fail = FailedProposal(
                role=ROLE,
                reason="backend_error",
                detail=f"{type(exc).__name__}: {exc} (iteration {view.iteration})"[:2000],
            )
            with self._lock:
                self.failures.append(fail)
            return []
        with self._lock:
            self.failures.extend(res.failures)
            self.usage = self.usage.add(res.usage)
        return list(res.items)[:n]

    def take_failures(self) -> list[FailedProposal]:
        """The failures recorded since the last call, oldest first (then forgotten)."""
        with self._lock:
            out, self.failures = self.failures, []
        return out


__all__ = ["ROLE", "AskFn", "LlmSearchProposer", "SearchBackend"]
