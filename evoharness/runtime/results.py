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
    the prompt ``features``, the active skills and the ``trace`` records."""

    program: Program
    constraints_read: list[Constraint]
    features: set[str]
    trace: list[dict[str, Any]]
    active_skills: list[str] = field(default_factory=list)


@dataclass
class RuntimeResult:
    """The outcome of ``HarnessRuntime.run``.

    ``program``/``image``: the selected candidate; ``programs``/``images``: every generated
    candidate in generation order; ``evidence``: the verifier's verdicts on the selected image
    against ``constraints`` (the extracted ones; empty without a verifier); ``score``: its
    verifier score (None without a verifier); ``trace``: every decision; ``cost``: totals."""

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


__all__ = ["Compiled", "RepairContext", "RuntimeResult"]
