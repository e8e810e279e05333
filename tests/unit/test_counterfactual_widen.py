"""The counterfactual widening pass (issue 29 (c)): when no removal recovers the failing
verdicts — a skill whose triggers miss the failing feature — a widening (a feature trigger
added) is probed and found as the cause; ``toward_of`` reads the parameters passing
executions used. A hand-built world over the real runtime's compilation: a verdict passes
exactly when the compiled prompt carries the skill's text."""

from __future__ import annotations

from evoharness.evidence import EvidenceStatus
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Effect, Harness, Skill, Skills, Trigger
from evoharness.program import GenerationParams, Program
from evoharness.runtime.runtime import Compiled, HarnessRuntime
from evoharness.sim import SimGenerator, SimInspector
from evoharness.tasks.models import Task
from evoharness.trace.counterfactual import (
    CounterfactualConfig,
    PairOutcome,
    ProbePorts,
    run,
    toward_of,
    widenings,
)
from evoharness.trace.models import Attribution, Execution, FailureCluster
from tests.unit._trace_world import judged_execution, task

TEXT = "exactly as many as named"
SEEDS = [0, 1]
TASKS = [
    task(f"n{i}", f"{w} dogs", ("c", "count", {"subject": "dog", "min_count": n, "max_count": n}))
    for i, (w, n) in enumerate([("two", 2), ("three", 3), ("four", 4), ("five", 5)])
]


def _parent() -> Harness:
    # two keyword triggers that never match: removing either leaves the other (no removal
    # makes the skill fire), only a count trigger does
    skill = Skill(
        name="counting",
        triggers=[Trigger(kind="keyword", value="tally"), Trigger(kind="keyword", value="census")],
        effects=[Effect(kind="append_text", value=TEXT)],
    )
    return Harness(skills=Skills(skills=[skill]))


_RT: dict[str, HarnessRuntime] = {}


def _compile(h: Harness, t: Task, seed: int) -> Compiled:
    rt = _RT.setdefault(harness_id(h), HarnessRuntime(h, SimGenerator(), SimInspector()))
    return rt.compile_task(t, seed)


def _execute(h: Harness, t: Task, seed: int) -> Execution:
    prog = _compile(h, t, seed).program
    key = f"{harness_id(h)}-{t.task_id}-{seed}"
    return judged_execution(h, t, seed, prog, {"c": TEXT in prog.prompt}, key)


def test_a_trigger_missing_the_failing_feature_is_found_by_widening_it() -> None:
    parent = _parent()
    execs = [_execute(parent, t, s) for t in TASKS for s in SEEDS]
    assert all(e.evidence[0].status is EvidenceStatus.failed for e in execs)
    cluster = FailureCluster(
        cluster_id="k0",
        responsibility_hint="skills",
        constraint_type="count",
        symptom="count_wrong",
        members=[(t.task_id, "c") for t in TASKS],
        n_failures=len(execs),
        failure_rate=1.0,
    )
    scores = {"policy": 0.3, "tools": 0.3, "skills": 0.2, "middleware": 0.0, "memory": 0.0}
    attr = Attribution(cluster_id="k0", scores={**scores, "no_patch": 0.2}, chosen="policy")
    args = ([cluster], [attr], parent, TASKS, execs, ProbePorts(_execute, _compile))
    off = run(*args, CounterfactualConfig(widenings=0), budget_calls=400)
    assert off.record.causes == [] and off.attributions[0].chosen == "policy"
    res = run(*args, CounterfactualConfig(), budget_calls=400)
    cause = next(p for p in res.record.probes if p.cause)
    assert cause.kind == "widen" and cause.path == "/skills/skills/0/triggers"
    assert cause.patch.ops[0]["value"] == {"kind": "feature", "value": "count"}
    assert res.attributions[0].chosen == "skills"
    assert res.candidates["k0"][0] == cause.patch
    # no removal was a cause (taking out a skill that never fires changes no plan)
    assert not any(p.cause for p in res.record.probes if p.kind != "widen")
    assert any(s.startswith("remove skills/skills[0]") for s in off.record.skipped)


def test_widenings_put_the_failing_features_first_by_responsibility_weight() -> None:
    parent = _parent()
    got = widenings(parent, {"skills": 1.0}, ["count"], {})
    assert [(lv.kind, lv.feature) for lv in got] == [("widen", "count")]
    assert widenings(parent, {"skills": 1.0}, [], {}) == []


def _ex(tid: str, seed: int, steps: int) -> Execution:
    return Execution(
        task_id=tid,
        seed=seed,
        harness_id="h",
        execution_key=f"{tid}-{seed}",
        program=Program(prompt="p", seed=seed, params=GenerationParams(steps=steps)),
    )


def test_toward_of_reads_what_passing_executions_used() -> None:
    parent = Harness()  # policy steps 30
    execs = [_ex("a", 0, 40), _ex("a", 1, 40), _ex("b", 0, 30), _ex("b", 1, 30)]
    out = {
        ("a", 0): PairOutcome({"c": True}, {"c": True}, 1),
        ("a", 1): PairOutcome({"c": True}, {"c": True}, 1),
        ("b", 0): PairOutcome({"c": False}, {"c": False}, 1),
        ("b", 1): PairOutcome({"c": False}, {"c": False}, 1),
    }
    assert toward_of(parent, execs, out) == {"/policy/params/steps": 40}
    # passing and failing used the same value: nothing to step toward
    same = [_ex("a", 0, 30), _ex("a", 1, 30), _ex("b", 0, 30), _ex("b", 1, 30)]
    assert toward_of(parent, same, out) == {}
