"""Step 6 of one TRACE round, validation (moved from ``round.py``, issue 28): the matched verdict
maps, generator-seconds and calls per task, and first attempts of a harness's executions, the
gate of one candidate against its parent (``gate_candidate``, over
``evoharness.trace.gates.evaluate_gate``) and Holm's correction across the round's gated
candidates (``correct_gates``). Both drivers reach these through ``evoharness.trace.round``,
which re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evoharness.evidence import EvidenceStatus
from evoharness.tasks.models import Task
from evoharness.trace.counterfactual import (
    pair_outcome,
)
from evoharness.trace.gate_config import GateConfig
from evoharness.trace.gate_holm import apply_holm
from evoharness.trace.gate_stats import Verdicts
from evoharness.trace.gates import GateEvidence, evaluate_gate
from evoharness.trace.models import (
    Candidate,
    CandidateStatus,
    Execution,
    GateReport,
)


def verdicts(executions: Sequence[Execution]) -> dict[tuple[str, int, str], bool]:
    """Matched verdict map ``{(task_id, seed, constraint_id): passed}`` (uncertain = not
    passed). Raises ``ValueError`` on a duplicate key."""
    out: dict[tuple[str, int, str], bool] = {}
    for e in executions:
        for ev in e.evidence:
            k = (e.task_id, e.seed, ev.constraint_id)
            if k in out:
                raise ValueError(f"duplicate verdict for {k}")
            out[k] = ev.status is EvidenceStatus.passed
    return out


def cost_per_task(executions: Sequence[Execution]) -> dict[str, float]:
    """Generator-seconds per task (summed over seeds). A cached execution is charged what its
    generation cost when it was made, so Δcost compares harnesses, not cache luck."""
    out: dict[str, float] = {}
    for e in executions:
        secs = e.nominal_generator_seconds or e.generator_seconds
        out[e.task_id] = out.get(e.task_id, 0.0) + secs
    return out


def gate_candidate(
    parent: Mapping[str, Sequence[Execution]],
    candidate: Mapping[str, Sequence[Execution]],
    config: GateConfig,
    look: int = 1,
    objective: str = "quality",
    families: Mapping[str, str] | None = None,
    tasks: Mapping[str, Task] | None = None,
    restores_defaults: bool = False,
) -> GateReport:
    """Gate a candidate at validation look ``look``: ``parent``/``candidate`` map split name →
    executions on that split (same tasks and fresh validation seeds); ``families``: task_id →
    family of the preservation tasks (per-family regression); ``tasks``: task_id → task of
    the target split and, where given, of the held-out split, to compare first attempts
    too (``first_attempt_verdicts``; executions of other tasks are left out). Generator calls
    per task (``calls_per_task``) go with them: a cost candidate may not add calls.
    ``restores_defaults``: the candidate only puts settings back to their schema defaults
    (``schema_levers.restores_defaults``): its own cost is then the reference cost
    (``evaluate_gate``'s ``reference_cost``), so spending up to the default's is not charged.
    See ``evoharness.trace.gates.evaluate_gate``."""
    pv: dict[str, Verdicts] = {s: verdicts(v) for s, v in parent.items()}
    cv: dict[str, Verdicts] = {s: verdicts(v) for s, v in candidate.items()}
    pc: dict[str, float] = {}
    cc: dict[str, float] = {}
    for v in parent.values():
        pc.update(cost_per_task(v))
    for v in candidate.values():
        cc.update(cost_per_task(v))
    first = None
    if tasks is not None:

        def firsts(side: Mapping[str, Sequence[Execution]]) -> dict[tuple[str, int, str], bool]:
            execs = [*side.get("target", []), *side.get("heldout", [])]
            return first_attempt_verdicts([e for e in execs if e.task_id in tasks], tasks)

        first = (firsts(parent), firsts(candidate))
    calls = (
        calls_per_task([e for v in parent.values() for e in v]),
        calls_per_task([e for v in candidate.values() for e in v]),
    )
    return evaluate_gate(
        pv,
        cv,
        pc,
        cc,
        config,
        look,
        objective,
        GateEvidence(families, first, calls, cc if restores_defaults else None),
    )


def calls_per_task(executions: Sequence[Execution]) -> dict[str, float]:
    """Generator calls per task (summed over seeds), cache-independent: the programs each
    execution generated (``Execution.programs``; 1 for an execution that lists none)."""
    out: dict[str, float] = {}
    for e in executions:
        out[e.task_id] = out.get(e.task_id, 0.0) + max(1, len(e.programs))
    return out


def first_attempt_verdicts(
    executions: Sequence[Execution], tasks: Mapping[str, Task]
) -> dict[tuple[str, int, str], bool]:
    """``{(task_id, seed, constraint_id): passed}`` of each execution's *first* attempt
    (``counterfactual.pair_outcome``: the runtime's own verdicts on it, the final verdict for
    an execution of one attempt). Raises ``KeyError`` for a task not in ``tasks``."""
    out: dict[tuple[str, int, str], bool] = {}
    for e in executions:
        for cid, ok in pair_outcome(e, tasks[e.task_id]).first.items():
            out[(e.task_id, e.seed, cid)] = ok
    return out


def correct_gates(candidates: Sequence[Candidate], alpha: float) -> None:
    """Holm's correction across the round's gated candidates (``gates.apply_holm``), in
    place on each ``Candidate.gate``; a candidate that loses acceptance becomes
    ``validated``."""
    gated = {c.candidate_id: c.gate for c in candidates if c.gate is not None}
    fixed = apply_holm(gated, alpha)
    for c in candidates:
        if c.candidate_id in fixed:
            c.gate = fixed[c.candidate_id]
            if c.status is CandidateStatus.accepted and not c.gate.accepted:
                c.status = CandidateStatus.validated
