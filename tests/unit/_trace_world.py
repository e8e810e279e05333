"""A tiny deterministic stand-in world for unit tests of the pure TRACE core (no sim, no I/O):
count and position constraints pass only with a layout; colour constraints pass when the
policy's ``bind_attributes`` rewrite is enabled; otherwise a constraint passes on odd seeds.
The real embedded world is exercised by the workflow tests."""

from __future__ import annotations

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.program import LayoutItem, Program
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.trace.models import Execution


def task(tid: str, prompt: str, *cons: tuple[str, str, dict]) -> Task:
    return Task(
        task_id=tid,
        prompt=prompt,
        task_family="unit",
        constraints=[
            Constraint(constraint_id=cid, type=ConstraintType(t), **kw) for cid, t, kw in cons
        ],
    )


def compile_program(h: Harness, t: Task, seed: int) -> Program:
    layout_on = any(getattr(x, "kind", "") == "layout_planner" and x.enabled for x in h.tools.tools)
    bind = any(r.kind == "bind_attributes" and r.enabled for r in h.policy.rewrites)
    prompt = h.policy.template.format(prompt=t.prompt)
    if bind:
        prompt = prompt.replace(" and ", ". ")
    return Program(
        prompt=prompt,
        negative_prompt=", ".join(h.policy.negative_terms),
        params=h.policy.params,
        seed=seed,
        layout=[LayoutItem(label="x", box=(0.1, 0.1, 0.5, 0.5))] if layout_on else None,
    )


def execute(h: Harness, t: Task, seed: int) -> Execution:
    p = compile_program(h, t, seed)
    ev = []
    for c in t.constraints:
        if c.type in (ConstraintType.count, ConstraintType.position):
            ok = p.layout is not None
        elif c.type is ConstraintType.color:
            ok = ". " in p.prompt
        else:
            ok = seed % 2 == 1 or seed == 0
        ev.append(
            Evidence(
                constraint_id=c.constraint_id,
                status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
                confidence=0.9,
            )
        )
    return Execution(
        task_id=t.task_id,
        seed=seed,
        harness_id=harness_id(h),
        execution_key=f"{t.task_id}-{seed}",
        program=p,
        evidence=ev,
        generator_seconds=1.0,
        generator_calls=1,
        nominal_generator_seconds=1.0,
    )
