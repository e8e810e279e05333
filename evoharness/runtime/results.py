"""What the runtime returns: ``Compiled`` (one compilation), ``RuntimeResult`` (one run), and
``RepairContext`` (what a repair attempt passes to ``compile``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evoharness.evidence import Evidence
from evoharness.ports import Cost, GeneratedImage
from evoharness.program import Program
from evoharness.tasks.models import Constraint


@dataclass
class RepairContext:
    """What a repair attempt knows: attempt number (1..budget) and the failing evidence of
    the previous candidate (``constraint_id``, ``type``, ``subject``, ``status``, ``note``)."""

    attempt: int
    failing: list[dict[str, Any]]


@dataclass
class Compiled:
    """One compilation: the ``program``, the constraints the policy read from the prompt,
    the prompt ``features``, the active skills and the ``trace`` records. ``constraints_open``:
    constraints on objects outside the extractor's vocabulary (``steps.policy.open_constraints``);
    they are verified (a verifier that cannot see them says ``uncertain``) but steer nothing
    else: no feature, skill, rewrite or layout box comes from them."""

    program: Program
    constraints_read: list[Constraint]
    features: set[str]
    trace: list[dict[str, Any]]
    active_skills: list[str] = field(default_factory=list)
    constraints_open: list[Constraint] = field(default_factory=list)


@dataclass
class RuntimeResult:
    """The outcome of ``HarnessRuntime.run``.

    ``program``/``image``: the selected candidate; ``programs``/``images``: every generated
    candidate in generation order; ``evidence``: the verifier's verdicts on the selected image
    against ``constraints`` (the extracted ones; empty without a verifier); ``score``: its
    verifier score (None without a verifier); ``trace``: every decision; ``cost``: totals.
    ``nothing_checked``: a verifier ran and decided (passed or failed) none of the constraints
    — nothing checkable was extracted, or the verifier could check none of it — so the
    request's "success" means nothing (counted in run reports and metrics, issue 19)."""

    program: Program
    programs: list[Program]
    image: GeneratedImage
    images: list[GeneratedImage]
    evidence: list[Evidence]
    trace: list[dict[str, Any]]
    cost: Cost
    constraints: list[Constraint] = field(default_factory=list)
    score: float | None = None
    selected: int = 0

    @property
    def nothing_checked(self) -> bool:
        """True when a verifier ran and no verdict on the selected image is pass or fail."""
        from evoharness.evidence import EvidenceStatus

        if self.score is None:
            return False
        return not any(
            e.status in (EvidenceStatus.passed, EvidenceStatus.failed) for e in self.evidence
        )


__all__ = ["Compiled", "RepairContext", "RuntimeResult"]
