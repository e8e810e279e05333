"""TRACE's proposal half on the real embedded world (issue 16): a run-time middleware patch
is not a no-op and is accepted where it helps; scope probes reject a negative term that
erases a requested object; the rule proposer's knowledge is generic; memory mined from
bundles is a candidate like any other."""

from __future__ import annotations

import pytest

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.trace.checks import check_proposal
from evoharness.trace.models import CandidateStatus, DecisionKind
from evoharness.trace.round import RoundConfig
from evoharness.trace.round_driver import run_round
from tests.unit._sim_round import SimWorld

#: long words: the generator garbles them on many samples
WORDS = [
    "RESTAURANT",
    "CHOCOLATE",
    "WONDERFUL",
    "PHARMACY",
    "BOOKSTORE",
    "ELEVATOR",
    "HOSPITAL",
    "UMBRELLA",
    "SUNFLOWER",
    "KEYBOARD",
]


def text_task(i: int, word: str) -> Task:
    return Task(
        task_id=f"text/{i}",
        prompt=f'a photo of a sign with the text "{word}"',
        task_family="synthetic_text",
        constraints=[
            Constraint(constraint_id="c0", type=ConstraintType.text, subject="sign", value=word)
        ],
    )


def object_task(tid: str, prompt: str, family: str, *objects: str) -> Task:
    return Task(
        task_id=tid,
        prompt=prompt,
        task_family=family,
        constraints=[
            Constraint(constraint_id=f"c{i}", type=ConstraintType.object, subject=o)
            for i, o in enumerate(objects)
        ],
    )


REPAIR = {
    "responsibility": "middleware",
    "ops": [
        {
            "op": "add",
            "path": "/middleware/stages/-",
            "value": {"kind": "verify_and_repair", "repair_budget": 2},
        }
    ],
    "rationale": "garbled text differs between samples; verify the text and re-sample",
    "expected_effect": "fewer garbled words",
}


def test_middleware_patch_changes_the_plan_not_the_program() -> None:
    world = SimWorld()
    tasks = [text_task(0, "HELLO")]
    res = check_proposal(REPAIR, Harness(), tasks, [0, 1], world.compile_program)
    assert res.ok, res.detail
    assert res.changed_parts == ["middleware"]
    # a routing limit with no skills to route changes nothing the harness does: a no-op
    routing = {
        **REPAIR,
        "ops": [{"op": "add", "path": "/middleware/stages/-", "value": {"kind": "skill_routing"}}],
    }
    same = check_proposal(routing, Harness(), tasks, [0], world.compile_program)
    assert not same.ok and same.reason == "no_op", same


#: Text corruption where re-sampling pays off: ~7% per character, so a ten-letter word comes
#: out whole on about half the samples. The default sdxl-like profile (15% per character)
#: garbles it on ~80%, and with its common random numbers (each character's draw keyed by the
#: seed and position, not the word) all words fail on the same seeds, so three samples rarely
#: beat one there; the patch is then validated but not significant.
MODERATE_TEXT = {"char_base": 0.02, "char_per_char": 0.005}


@pytest.mark.slow  # whole rounds in the embedded world; `make test-all` runs it
def test_middleware_patch_is_accepted_where_it_helps() -> None:
    world = SimWorld(propose=lambda c, a, h, n: [Patch.model_validate(REPAIR)], **MODERATE_TEXT)
    target = [text_task(i, w) for i, w in enumerate(WORDS)]
    held = [text_task(100 + i, w) for i, w in enumerate(["LIBRARY", "MOUNTAIN", "BIRTHDAY"])]
    pres = [
        object_task("obj/0", "a photo of a dog", "single_object", "dog"),
        object_task("obj/1", "a photo of a cup", "single_object", "cup"),
    ]
    cfg = RoundConfig(seeds=[0, 1, 2, 3], max_clusters=1, candidates_per_cluster=1, concurrency=1)
    res = run_round(
        world.ports(), Harness(), {"target": target, "heldout": held, "preservation": pres}, cfg
    )
    cand = res.report.candidates[0]
    assert cand.status is CandidateStatus.accepted, (cand.reject_reason, cand.gate)
    assert res.report.decision.kind is DecisionKind.accepted
    assert res.child is not None and res.child.middleware.stages[-1].kind == "verify_and_repair"
    g = cand.gate
    assert g is not None and g.delta_target > 0 and g.delta_cost > 0  # better, and dearer
    assert g.regression == 0.0


BICYCLE = {
    "responsibility": "policy",
    "ops": [{"op": "add", "path": "/policy/negative_terms/0", "value": "bicycle"}],
    "rationale": "the prompt excludes bicycles",
    "expected_effect": "no bicycle drawn",
}


def negation_tasks() -> list[Task]:
    out = []
    for i, (obj, neg) in enumerate([("dog", "bicycle"), ("cat", "bicycle"), ("car", "bicycle")]):
        out.append(
            Task(
                task_id=f"neg/{i}",
                prompt=f"a photo of a {obj} with no bicycles",
                task_family="synthetic_negation",
                constraints=[
                    Constraint(constraint_id="c0", type=ConstraintType.object, subject=obj),
                    Constraint(constraint_id="c1", type=ConstraintType.negative, subject=neg),
                ],
            )
        )
    return out


def test_scope_of_a_negative_term_is_the_class_it_names() -> None:
    from evoharness.harness.patch import apply_patch
    from evoharness.trace.scope import derive_scope, probe_tasks

    patch = Patch.model_validate(BICYCLE)
    scope = derive_scope(Harness(), apply_patch(Harness(), patch), patch)
    assert scope.classes == ["bicycle"] and not scope.global_ and not scope.features
    prompts = [t.prompt for t in probe_tasks(scope)]
    assert prompts[0] == "a photo of a bicycle" and "a photo of two bicycles" in prompts
    assert all("bicycle" in p for p in prompts)


def test_bicycle_negative_term_is_rejected_as_scope_regression() -> None:
    """Finding 1: a global negative term copied from one "... with no bicycles" task erases
    every requested bicycle; no gated prompt names a bicycle, the probes do."""
    world = SimWorld(propose=lambda c, a, h, n: [Patch.model_validate(BICYCLE)])
    target = negation_tasks()
    pres = [object_task("obj/0", "a photo of a dog", "single_object", "dog")]
    cfg = RoundConfig(seeds=[0, 1, 2, 3], max_clusters=1, candidates_per_cluster=1, concurrency=1)
    res = run_round(
        world.ports(), Harness(), {"target": target, "heldout": [], "preservation": pres}, cfg
    )
    cand = res.report.candidates[0]
    assert cand.status is CandidateStatus.rejected
    assert cand.reject_reason.startswith("scope_regression: bicycle"), cand.reject_reason
    assert "a photo of a bicycle" in cand.reject_reason
    assert res.report.decision.kind is DecisionKind.no_patch
    assert "scope_regression" in res.report.decision.reason


# ---------------------------------------------------------- finding 5: generic T2I knowledge


def _cluster(symptom: str, ctype: str, prompt: str, subject: str):
    from evoharness.trace.models import FailureCluster

    return FailureCluster(
        cluster_id=f"x/{ctype}/{symptom}",
        responsibility_hint="policy",
        constraint_type=ctype,
        symptom=symptom,
        members=[("t1", "c1")],
        n_failures=4,
        failure_rate=0.75,
        flip_rate=0.5,
        examples=[{"task_id": "t1", "constraint_id": "c1", "subject": subject, "prompt": prompt}],
    )


def _all_patches(cluster, h: Harness) -> list[Patch]:
    from evoharness.trace.rule_proposer import localize, propose

    att = localize([cluster], h)[0]
    out: list[Patch] = []
    for r in ("policy", "tools", "skills", "middleware", "memory"):
        out += propose(cluster, att, h, 16, responsibility=r)
    return out


def test_rationales_are_generic_t2i_knowledge() -> None:
    from evoharness.trace.rule_proposer import PRIORS

    for symptom in (*PRIORS, "vqa_wrong"):
        for p in _all_patches(_cluster(symptom, "object", "a photo of two dogs", "dog"), Harness()):
            text = f"{p.rationale} {p.expected_effect}".lower()
            assert "sim_contract" not in text and "exactly" not in text, (symptom, text)
            assert "by construction" not in text, (symptom, text)


def test_negation_levers_are_scoped_to_prompts_that_negate() -> None:
    from evoharness.harness.patch import apply_patch
    from evoharness.runtime.runtime import HarnessRuntime
    from evoharness.sim import SimGenerator

    c = _cluster("negation_drawn", "negative", "a photo of a dog with no bicycles", "bicycle")
    patches = _all_patches(c, Harness())
    assert len({p.responsibility.value for p in patches}) >= 3  # several levers for the gate
    for p in patches:  # never a global negative term copied from the label
        assert not [o for o in p.ops if o["path"].startswith("/policy/negative_terms")]
    scoped = [p for p in patches if p.ops[0].get("value", {}).get("name") == "exclude-bicycle"]
    assert scoped, [p.ops for p in patches]
    rt = HarnessRuntime(apply_patch(Harness(), scoped[0]), SimGenerator())
    assert "bicycle" in rt.compile("a photo of a cat without a bicycle", 0).program.negative_prompt
    assert rt.compile("a photo of a bicycle", 0).program.negative_prompt == ""


def test_proposals_remove_what_hurts() -> None:
    h = Harness.model_validate(
        {
            "policy": {"negative_terms": ["bicycle", "blurry"]},
            "memory": {
                "enabled": True,
                "guidelines": [{"trigger": "count", "text": "Never use more than one object."}],
            },
        }
    )
    miss = _cluster("missing_object", "object", "a photo of a bicycle and a cup", "bicycle")
    ops = [o for p in _all_patches(miss, h) for o in p.ops]
    assert {"op": "remove", "path": "/policy/negative_terms/0"} in ops
    assert {"op": "remove", "path": "/policy/negative_terms/1"} not in ops
    count = _cluster("count_wrong", "count", "a photo of four cats", "cat")
    ops = [o for p in _all_patches(count, h) for o in p.ops]
    assert {"op": "remove", "path": "/memory/guidelines/0"} in ops


# ------------------------------------------------------------- finding 6: memory evolves


def count_task(tid: str, n: str, obj: str, value: int) -> Task:
    return Task(
        task_id=tid,
        prompt=f"a photo of {n} {obj}",
        task_family="counting",
        constraints=[
            Constraint(
                constraint_id="c0",
                type=ConstraintType.count,
                subject=obj[:-1],
                min_count=value,
                max_count=value,
            )
        ],
    )


@pytest.mark.slow  # whole rounds in the embedded world; `make test-all` runs it
def test_memory_mined_from_bundles_is_accepted_where_it_helps() -> None:
    """The parent plans layouts only for positions; an earlier harness that also planned them
    for counts ran on the same requests. The round mines best-vs-worst bundles from those
    executions into a Memory candidate (retrieved for similar prompts: plan a layout), which
    passes the checks, the scope probes and the gate."""
    layout = {"kind": "layout_planner", "name": "layout", "when": ["position"], "min_objects": 1}
    parent = Harness.model_validate({"tools": {"tools": [layout]}})
    earlier = Harness.model_validate(
        {"tools": {"tools": [{**layout, "when": ["position", "count"]}]}}
    )
    objs = ["cats", "dogs", "cups", "birds", "apples", "chairs"]
    target = [count_task(f"count/{i}", "four", o, 4) for i, o in enumerate(objs)]
    target += [count_task(f"count/{i + 6}", "five", o, 5) for i, o in enumerate(objs[:3])]
    held = [count_task(f"held/{i}", "four", o, 4) for i, o in enumerate(["cows", "books"])]
    pres = [object_task("obj/0", "a photo of a dog", "single_object", "dog")]
    # a strong layout adapter (boxes followed 0.95, hardly less with more boxes), so planning
    # layouts for counts helps: on sdxl-like's training-free guidance four or five boxes are
    # rarely all followed and the earlier harness passed 14/36 against the parent's 12/36
    world = SimWorld(propose=lambda c, a, h, n: [], layout_in_box=0.95, layout_in_box_per_box=0.01)
    # memory mining alone: no counterfactual cause or schema lever (a `when` widened to counts
    # would fix the same failures at the tools, and win)
    cfg = RoundConfig(
        seeds=[0, 1, 2, 3],
        max_clusters=1,
        candidates_per_cluster=1,
        concurrency=1,
        counterfactual={"enabled": False, "schema_levers": False},
    )
    experience = [world.execute(earlier, t, s) for t in target for s in cfg.seeds]
    res = run_round(
        world.ports(),
        parent,
        {"target": target, "heldout": held, "preservation": pres},
        cfg,
        experience=experience,
    )
    mem = [c for c in res.report.candidates if c.source == "memory"]
    assert len(mem) == 1, [(c.source, c.reject_reason) for c in res.report.candidates]
    assert mem[0].status is CandidateStatus.accepted, (mem[0].reject_reason, mem[0].gate)
    assert res.child is not None and res.child.memory.enabled and res.child.memory.bundles
    assert all(
        b.decision_guidance.get("use_tools") == ["layout_planner"] for b in res.child.memory.bundles
    )
    # the parent's own executions differ only by seed: nothing actionable to learn from them
    from evoharness.harness.io import harness_id
    from evoharness.memory.bundles import mine

    assert mine(target, res.executions[(harness_id(parent), "target")]) == []
