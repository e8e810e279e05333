"""The three proposer roles behind one interface, and the embedded rule-based backend.

Roles (docs/architecture.md, proposer):

- **policy extractor**: prompt → constraints (for prompts without metadata);
- **harness localizer**: failure clusters → scores over the five responsibilities + ``no_patch``;
- **patch proposer**: harness + a localized cluster → candidate patches.

A ``ProposerBackend`` implements all three. Backends: ``RuleBackend`` here (pure, no I/O:
``evoharness.runtime.extract.RuleExtractor`` and ``evoharness.trace.rule_proposer``), and the
OpenAI-compatible chat backend in ``services/proposer/backends/openai_chat.py`` (network I/O
lives in ``services/``). Whatever a backend returns has passed the untrusted-answer checks of
``evoharness.trace.answers``; what failed is in ``RoleResult.failures`` with its reason code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Constraint
from evoharness.trace import rule_proposer
from evoharness.trace.answers import FailedProposal
from evoharness.trace.models import Attribution, FailureCluster

T = TypeVar("T")

ROLES = ("extractor", "localizer", "proposer")


@dataclass
class LlmUsage:
    """What one role call cost: LLM ``calls`` (attempts, retries included), tokens as the
    server reported them, ``cost_usd`` estimated from the price table (``configs/prices.yaml``),
    and the ``model`` name. All zero for the rule backend."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""

    def add(self, other: LlmUsage) -> LlmUsage:
        """Sum of two usages (a new object; ``model`` kept from whichever is set)."""
        return LlmUsage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            model=self.model or other.model,
        )


@dataclass
class RoleResult(Sequence[T], Generic[T]):
    """A role's validated output: ``items`` passed every check, ``failures`` did not (never
    applied), ``usage`` is what producing them cost.

    A ``RoleResult`` is also the read-only sequence of its ``items`` (``len``, iteration,
    indexing and slicing go to ``items``), so a backend's ``localize``/``propose`` can be
    passed directly where the TRACE round expects ``list[Attribution]`` / a list of patches
    (``evoharness.trace.round``)."""

    items: list[T] = field(default_factory=list)
    failures: list[FailedProposal] = field(default_factory=list)
    usage: LlmUsage = field(default_factory=LlmUsage)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.items[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)


@runtime_checkable
class ProposerBackend(Protocol):
    """One backend for the three roles. ``name`` is the backend label in metrics
    (``rule``, ``openai``)."""

    name: str

    def extract(self, prompt: str) -> RoleResult[Constraint]:
        """Constraints stated by ``prompt``."""
        ...

    def localize(
        self,
        clusters: Sequence[FailureCluster],
        harness: Harness,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Attribution]:
        """One attribution per cluster it could attribute (scores sum to 1)."""
        ...

    def propose(
        self,
        cluster: FailureCluster,
        attribution: Attribution,
        harness: Harness,
        n: int,
        responsibility: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Patch]:
        """Up to ``n`` distinct, valid, non-no-op patches for ``cluster``; only for
        ``responsibility`` when given."""
        ...


class RuleBackend:
    """The embedded rule-based backend: deterministic, pure, free.

    ``extract`` wraps ``evoharness.runtime.extract.RuleExtractor`` (owned by the runtime);
    ``localize``/``propose`` are ``evoharness.trace.rule_proposer``. Its patches are built to
    be valid; they are still applied once more here and any that fails or is a no-op is
    reported as a failure, so callers can treat every backend alike.
    """

    name = "rule"

    def __init__(self) -> None:
        from evoharness.runtime.extract import RuleExtractor

        self._extractor = RuleExtractor()

    def extract(self, prompt: str) -> RoleResult[Constraint]:
        """``RuleExtractor().extract(prompt)``."""
        return RoleResult(items=self._extractor.extract(prompt))

    def localize(
        self,
        clusters: Sequence[FailureCluster],
        harness: Harness,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Attribution]:
        """``rule_proposer.localize(clusters, harness)`` (``context`` is ignored)."""
        return RoleResult(items=rule_proposer.localize(list(clusters), harness))

    def propose(
        self,
        cluster: FailureCluster,
        attribution: Attribution,
        harness: Harness,
        n: int,
        responsibility: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Patch]:
        """``rule_proposer.propose(...)``, each patch re-checked with ``apply_patch``."""
        out: RoleResult[Patch] = RoleResult()
        base = harness_id(harness)
        for i, p in enumerate(
            rule_proposer.propose(cluster, attribution, harness, n, responsibility)
        ):
            try:
                same = harness_id(apply_patch(harness, p)) == base
            except ValueError as exc:  # PatchError is a ValueError
                out.failures.append(
                    FailedProposal(role="proposer", reason="rfc6902", detail=str(exc), index=i)
                )
                continue
            if same:
                out.failures.append(
                    FailedProposal(role="proposer", reason="no_op", detail="no change", index=i)
                )
                continue
            out.items.append(p)
        return out


class ExtractorPort:
    """Adapts a ``ProposerBackend`` to ``evoharness.ports.PolicyExtractor``: ``extract``
    returns only the validated constraints and keeps the last call's failures and usage in
    ``last``."""

    def __init__(self, backend: ProposerBackend) -> None:
        self.backend = backend
        self.last: RoleResult[Constraint] = RoleResult()

    def extract(self, prompt: str) -> list[Constraint]:
        """Validated constraints of ``prompt`` (failed items dropped, see ``last``)."""
        self.last = self.backend.extract(prompt)
        return list(self.last.items)


__all__ = ["ExtractorPort", "LlmUsage", "ProposerBackend", "ROLES", "RoleResult", "RuleBackend"]
