"""A tiny deterministic stand-in world for unit tests of the pure TRACE core (no sim, no I/O):
count and position constraints pass only with a layout; colour constraints pass when the
policy's ``bind_attributes`` rewrite is enabled; otherwise a constraint passes on odd seeds.
The real embedded world is exercised by the workflow tests."""

from __future__ import annotations

import copy
from typing import Any

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.program import LayoutItem, Program
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.trace.models import Attribution, ConstraintStats, Execution, FailureCluster
from evoharness.trace.round import RoundPorts

#: The JSON Patch op that adds the layout planner tool (the lever of count/position here).
LAYOUT_OP = {
    "op": "add",
    "path": "/tools/tools/-",
    "value": {"kind": "layout_planner", "name": "layout"},
}
#: A proposal (``{"responsibility", "ops"}``) of that op alone.
LAYOUT_PATCH = {"responsibility": "tools", "ops": [LAYOUT_OP]}


def task(tid: str, prompt: str, *cons: tuple[str, str, dict]) -> Task:
    return Task(
        task_id=tid,
        prompt=prompt,
        task_family="unit",
        constraints=[
            Constraint(constraint_id=cid, type=ConstraintType(t), **kw) for cid, t, kw in cons
        ],
    )


def count_tasks(n: int) -> list[Task]:
    """``n`` counting tasks ``cnt0``.. (``"2 cats"``, ``"3 cats"``, …): each passes here only
    with the layout planner on."""
    return [
        task(f"cnt{i}", f"{i + 2} cats", ("c0", "count", {"subject": "cat", "min_count": i + 2}))
        for i in range(n)
    ]


def layout_on(h: Harness) -> bool:
    """Whether ``h`` has an enabled layout planner tool."""
    return any(getattr(x, "kind", "") == "layout_planner" and x.enabled for x in h.tools.tools)


def localize_to_tools(clusters: list[FailureCluster], h: Harness) -> list[Attribution]:
    """A localize port that attributes every cluster to ``tools``."""
    return [
        Attribution(cluster_id=c.cluster_id, scores={"tools": 1.0}, chosen="tools")
        for c in clusters
    ]


def propose_layout(cluster: Any, attr: Any, h: Harness, n: int) -> list[dict[str, Any]]:
    """A propose port whose one proposal is ``LAYOUT_PATCH`` (a copy)."""
    return [copy.deepcopy(LAYOUT_PATCH)]


def layout_ports(execute_port: Any, propose: Any = propose_layout) -> RoundPorts:
    """Round ports of this world: ``execute_port``, ``compile_program``, every cluster to
    ``tools`` (``localize_to_tools``) and ``propose`` (default: the layout planner alone)."""
    return RoundPorts(
        execute=execute_port,
        compile_program=compile_program,
        localize=localize_to_tools,
        propose=propose,
    )


def constraint_stats(**kw: Any) -> ConstraintStats:
    """``ConstraintStats`` of object constraint ``c0`` of task ``t``: 4 seeds, 3 passed, 1
    failed (rate 0.25), a program that does not vary; ``kw`` overrides any field."""
    base: dict[str, Any] = {
        "task_id": "t",
        "constraint_id": "c0",
        "constraint_type": "object",
        "n_seeds": 4,
        "n_pass": 3,
        "n_fail": 1,
        "n_uncertain": 0,
        "failure_rate": 0.25,
    }
    return ConstraintStats(**{**base, **kw})


def compile_program(h: Harness, t: Task, seed: int) -> Program:
    on = layout_on(h)
    bind = any(r.kind == "bind_attributes" and r.enabled for r in h.policy.rewrites)
    prompt = h.policy.template.format(prompt=t.prompt)
    if bind:
        prompt = prompt.replace(" and ", ". ")
    return Program(
        prompt=prompt,
        negative_prompt=", ".join(h.policy.negative_terms),
        params=h.policy.params,
        seed=seed,
        layout=[LayoutItem(label="x", box=(0.1, 0.1, 0.5, 0.5))] if on else None,
    )


def execute(h: Harness, t: Task, seed: int) -> Execution:
    p = compile_program(h, t, seed)
    verdicts = {}
    for c in t.constraints:
        if c.type in (ConstraintType.count, ConstraintType.position):
            ok = p.layout is not None
        elif c.type is ConstraintType.color:
            ok = ". " in p.prompt
        else:
            ok = seed % 2 == 1 or seed == 0
        verdicts[c.constraint_id] = ok
    return judged_execution(h, t, seed, p, verdicts)


def judged_execution(
    h: Harness, t: Task, seed: int, program: Program, verdicts: dict[str, bool], key: str = ""
) -> Execution:
    """One generator call's execution of ``h`` on ``(t, seed)`` that compiled ``program``,
    with a passed/failed verdict (confidence 0.9) per constraint id of ``verdicts``; its
    execution key is ``key`` or ``"<task_id>-<seed>"``."""
    return Execution(
        task_id=t.task_id,
        seed=seed,
        harness_id=harness_id(h),
        execution_key=key or f"{t.task_id}-{seed}",
        program=program,
        evidence=[
            Evidence(
                constraint_id=cid,
                status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
                confidence=0.9,
            )
            for cid, ok in verdicts.items()
        ],
        generator_seconds=1.0,
        generator_calls=1,
        nominal_generator_seconds=1.0,
    )
