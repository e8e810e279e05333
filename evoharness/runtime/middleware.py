"""The Middleware responsibility: what ``HarnessRuntime.run`` does around compilation.

``best_of_n`` generates up to n candidates (seeds ``seed + i * seed_offset``) and keeps the
highest verifier score; then ``verify_and_repair`` re-compiles with the failing evidence (repair
actions per failing constraint type, ``REPAIR_ACTIONS``, added to the compile requests by
``repair_requests``; a colour or texture of a prompt that needs no layout is repaired in the
prompt, without one) and seed ``seed + seed_offset * attempt``, at most ``repair_budget`` times.
Both stop as soon as no checked constraint fails (``uncertain`` verdicts do not trigger
repairs). Score = (passes + 0.5 · uncertain) / constraints; the best candidate wins, the
earliest on ties. Without a verifier, middleware stages are skipped (traced) and one image is
made. Reaches the generator and verifier only through their ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import (
    BestOfNStage,
    Harness,
    LayoutPlannerTool,
    SkillRoutingStage,
    VerifyAndRepairStage,
)
from evoharness.ports import Cost, GeneratedImage, Generator, Verifier
from evoharness.program import ImageRef, Program, execution_key
from evoharness.runtime.results import Compiled, RepairContext, RuntimeResult
from evoharness.runtime.steps import Rec, Requests
from evoharness.tasks.models import Constraint

#: Repair actions per failing constraint type: rewrites to add, whether to force the declared
#: layout planners, and whether the failing subject goes to the negative prompt.
REPAIR_ACTIONS: dict[str, dict[str, Any]] = {
    "negative": {"rewrites": ["move_negations"], "layout": False, "negative": True},
    "count": {"rewrites": ["spell_counts"], "layout": True, "negative": False},
    "position": {"rewrites": [], "layout": True, "negative": False},
    "color": {"rewrites": ["bind_attributes"], "layout": True, "negative": False},
    "attribute": {"rewrites": ["bind_attributes"], "layout": True, "negative": False},
    "text": {"rewrites": ["quote_text"], "layout": True, "negative": False},
    "object": {"rewrites": ["compress"], "layout": True, "negative": False},
}


#: Failing constraint types a repair may bind in the prompt instead of the layout.
BINDING_TYPES = frozenset({"color", "attribute"})
#: Prompt features that need a layout whatever the binding (counts, positions, text panels).
LAYOUT_FEATURES = frozenset({"count", "position", "text"})


def repair_requests(
    harness: Harness, repair: RepairContext, features: set[str], req: Requests, rec: Rec
) -> None:
    """Add the repair actions for ``repair.failing`` to ``req`` (``REPAIR_ACTIONS`` per
    constraint type; ``compress`` only for a long prompt; layout forces every enabled layout
    planner); traces ``middleware/repair.compile``.

    A colour or texture is repaired in the prompt: when only colours or textures failed
    (``BINDING_TYPES``) and nothing in the prompt needs a layout (no count, position or text
    feature: ``LAYOUT_FEATURES``), the repair binds them with ``bind_attributes`` and asks for
    no layout (``req.no_layout``), even when a planner's ``when`` would run. Layout-to-image
    adapters bind an attribute through a box's grounding phrase, which holds less often than a
    well-bound prompt on some models; a harness that forced its layout to repair a colour bound
    colours worse than the plain prompt (issue 30: 0.32 against 0.47 on held-back prompts).
    """
    types = {str(f.get("type")) for f in repair.failing}
    plain = types <= BINDING_TYPES and not features & LAYOUT_FEATURES
    if plain:
        req.no_layout.append(f"repair:{repair.attempt}:binding")
    for f in repair.failing:
        act = REPAIR_ACTIONS.get(str(f.get("type")))
        if act is None:
            continue
        src = f"repair:{repair.attempt}:{f.get('constraint_id')}"
        for k in act["rewrites"]:
            if k == "compress" and "long_prompt" not in features:
                continue
            req.rewrites.append((k, src))
        if act["negative"] and f.get("subject"):
            req.negative.append((str(f["subject"]), src))
        if act["layout"] and not plain:
            for tool_decl in harness.tools.tools:
                if isinstance(tool_decl, LayoutPlannerTool) and tool_decl.enabled:
                    req.tools.append((tool_decl.name, src))
    rec(
        "middleware",
        "repair.compile",
        attempt=repair.attempt,
        failing=repair.failing,
        rewrites=[k for k, s in req.rewrites if s.startswith("repair:")],
        tools=sorted({n for n, s in req.tools if s.startswith("repair:")}),
    )


def score_evidence(evidence: Sequence[Evidence]) -> float:
    """Verifier score of one image: (passes + 0.5·uncertain) / n, 1.0 when nothing is checked."""
    if not evidence:
        return 1.0
    s = sum(
        1.0
        if e.status is EvidenceStatus.passed
        else 0.5
        if e.status is EvidenceStatus.uncertain
        else 0.0
        for e in evidence
    )
    return s / len(evidence)


def best_index(scores: list[float]) -> int:
    """Index of the highest score, the earliest on ties; 0 when there is none."""
    if not scores:
        return 0
    top = max(scores)
    return scores.index(top)


class Compile(Protocol):
    """``HarnessRuntime.compile``: the program for (prompt, seed, references, repair)."""

    def __call__(
        self,
        prompt: str,
        seed: int,
        references: Sequence[ImageRef] | None = None,
        *,
        repair: RepairContext | None = None,
    ) -> Compiled: ...


def run(
    harness: Harness,
    compile: Compile,
    generator: Generator,
    verifier: Verifier | None,
    prompt: str,
    seed: int,
    references: Sequence[ImageRef] | None = None,
) -> RuntimeResult:
    """Compile (through ``compile``), generate, verify, repair and select (see the module
    docstring). Raises ``HarnessCompileError``/``ValueError`` from ``compile`` and whatever the
    generator or verifier ports raise."""
    stages = harness.middleware.stages
    bo = next((s for s in stages if isinstance(s, BestOfNStage)), None)
    vr = next((s for s in stages if isinstance(s, VerifyAndRepairStage)), None)
    trace: list[dict[str, Any]] = []
    cost = Cost()
    programs: list[Program] = []
    images: list[GeneratedImage] = []
    evidences: list[list[Evidence]] = []
    scores: list[float] = []
    constraints: list[Constraint] = []
    if verifier is None and (bo or vr):
        trace.append(
            {
                "responsibility": "middleware",
                "step": "skip",
                "stages": [s.kind for s in stages if not isinstance(s, SkillRoutingStage)],
                "reason": "no verifier configured",
            }
        )

    def attempt(s: int, reason: str, repair: RepairContext | None) -> list[Evidence]:
        nonlocal constraints, cost
        idx = len(programs)
        trace.append(
            {
                "responsibility": "middleware",
                "step": "candidate",
                "index": idx,
                "seed": s,
                "reason": reason,
            }
        )
        comp = compile(prompt, s, references, repair=repair)
        trace.extend(comp.trace)
        constraints = comp.constraints_read + comp.constraints_open
        img = generator.generate(comp.program)
        cost = cost.add(
            Cost(
                generator_seconds=0.0 if img.cached else img.seconds,
                generator_calls=0 if img.cached else 1,
            )
        )
        programs.append(comp.program)
        images.append(img)
        trace.append(
            {
                "responsibility": "middleware",
                "step": "generate",
                "index": idx,
                "generator_id": img.generator_id,
                # carried from the cache that computed it; a bare generator has none
                "execution_key": img.execution_key or execution_key(comp.program, img.generator_id),
            }
        )
        ev: list[Evidence] = []
        if verifier is not None:
            ev = list(verifier.verify(img.png, constraints, prompt))
            cost = cost.add(Cost(verifier_calls=1))
            scores.append(score_evidence(ev))
            trace.append(
                {
                    "responsibility": "middleware",
                    "step": "verify",
                    "index": idx,
                    "statuses": {e.constraint_id: e.status.value for e in ev},
                    "score": scores[-1],
                }
            )
        evidences.append(ev)
        return ev

    def done(ev: list[Evidence]) -> bool:
        return all(e.status is not EvidenceStatus.failed for e in ev)

    n = bo.n if (bo is not None and verifier is not None) else 1
    ev = attempt(seed, "initial", None)
    for i in range(1, n):
        if done(ev):
            trace.append(
                {
                    "responsibility": "middleware",
                    "step": "best_of_n.stop",
                    "after": i,
                    "reason": "every checked constraint passes",
                }
            )
            break
        assert bo is not None
        ev = attempt(seed + i * bo.seed_offset, f"best_of_n {i + 1}/{n}", None)
    best = best_index(scores)
    if vr is not None and verifier is not None:
        ev = evidences[best]
        for k in range(1, vr.repair_budget + 1):
            if done(ev):
                break
            by_id = {c.constraint_id: c for c in constraints}
            failing = [
                {
                    "constraint_id": e.constraint_id,
                    "type": by_id[e.constraint_id].type.value if e.constraint_id in by_id else None,
                    "subject": by_id[e.constraint_id].subject if e.constraint_id in by_id else None,
                    "status": e.status.value,
                    "note": e.note,
                }
                for e in ev
                if e.status is EvidenceStatus.failed
            ]
            ev = attempt(
                seed + vr.seed_offset * k,
                f"repair {k}/{vr.repair_budget}",
                RepairContext(attempt=k, failing=failing),
            )
        best = best_index(scores)
    if verifier is not None:
        trace.append(
            {"responsibility": "middleware", "step": "select", "chosen": best, "scores": scores}
        )
    return RuntimeResult(
        program=programs[best],
        programs=programs,
        image=images[best],
        images=images,
        evidence=evidences[best],
        trace=trace,
        cost=cost,
        constraints=constraints,
        score=scores[best] if scores else None,
        selected=best,
    )


__all__ = [
    "REPAIR_ACTIONS",
    "Compile",
    "best_index",
    "repair_requests",
    "run",
    "score_evidence",
]
