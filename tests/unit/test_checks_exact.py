"""Exact behaviour of the proposal checks (``evoharness.trace.checks``): the plan a harness
makes for a request, which plan parts differ, the schema error text, every rejection's reason
and detail, which target tasks count as changed, and when the generator-capability check runs
and what it names. Pure and fast (stand-in compile functions, no runtime, no generator)."""

from __future__ import annotations

import pytest

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.program import LayoutItem, Program
from evoharness.runtime.runtime import Compiled
from evoharness.tasks.models import Task
from evoharness.trace.checks import (
    CompileFault,
    check_generator_support,
    check_proposal,
    compiled_plan,
    parse_patch,
    plan_difference,
)
from tests.unit._trace_world import LAYOUT_PATCH, compile_program, layout_on, task

T_A = task("t-a", "a cat", ("a0", "object", {"subject": "cat"}))
T_B = task("t-b", "a dog", ("b0", "object", {"subject": "dog"}))
T_C = task("t-c", "a cow", ("c0", "object", {"subject": "cow"}))
T_D = task("t-d", "a hen", ("d0", "object", {"subject": "hen"}))
BOX = (0.1, 0.2, 0.5, 0.6)
TEMPLATE = {
    "responsibility": "policy",
    "ops": [{"op": "replace", "path": "/policy/template", "value": "{prompt}, photo"}],
}
REPAIR = {
    "responsibility": "middleware",
    "ops": [{"op": "add", "path": "/middleware/stages/-", "value": {"kind": "verify_and_repair"}}],
}


def compile_with_trace(h: Harness, t: Task, seed: int) -> Compiled:
    """``_trace_world.compile_program`` plus a tools trace record when the layout planner ran."""
    trace = (
        [{"responsibility": "tools", "step": "layout", "tool": "layout", "boxes": 1}]
        if layout_on(h)
        else []
    )
    return Compiled(compile_program(h, t, seed), [], set(), trace)


def switched(h: Harness, t: Task, seed: int) -> Program:
    """A template other than the default switches on, per task: a layout box (t-a), a negative
    prompt (t-b) or a longer prompt (t-c); the prompt text otherwise ignores the template."""
    on = h.policy.template != Harness().policy.template
    return Program(
        prompt=t.prompt + (", photo" if on and t.task_id == "t-c" else ""),
        negative_prompt="blurry" if on and t.task_id == "t-b" else "",
        seed=seed,
        layout=[LayoutItem(label="cat", box=BOX)] if on and t.task_id == "t-a" else None,
    )


NO_LAYOUT_NO_NEGATIVE = GeneratorCapabilities(layout="none", negative_prompt=False)


# ----------------------------------------------------------------------------- compiled_plan


def test_plan_of_a_program_has_the_runtime_stages_with_their_settings() -> None:
    h = Harness.model_validate(
        {
            "middleware": {
                "stages": [
                    {"kind": "skill_routing", "max_active": 2},
                    {"kind": "verify_and_repair", "repair_budget": 2},
                    {"kind": "best_of_n", "n": 3},
                ]
            }
        }
    )
    prog = Program(prompt="a cat", seed=4, layout=[LayoutItem(label="cat", box=BOX)])
    plan = compiled_plan(h, prog)
    assert plan == {
        "program": prog.model_dump(mode="json"),
        "middleware": {
            "verify_and_repair": {
                "kind": "verify_and_repair",
                "repair_budget": 2,
                "seed_offset": 1000,
            },
            "best_of_n": {"kind": "best_of_n", "n": 3, "seed_offset": 7919},
        },
    }
    # JSON-ready: the box tuple is a list, as it would be after a round trip through JSON
    assert plan["program"]["layout"][0]["box"] == [0.1, 0.2, 0.5, 0.6]
    assert compiled_plan(Harness(), prog) == {
        "program": prog.model_dump(mode="json"),
        "middleware": {},
    }


def test_plan_of_a_compilation_carries_its_skill_memory_and_tool_records_in_order() -> None:
    prog = Program(prompt="a cat")
    trace = [
        {"responsibility": "policy", "step": "rewrite", "kind": "bind_attributes"},
        {"responsibility": "skills", "step": "fire", "skill": "a"},
        {"responsibility": "tools", "step": "layout", "tool": "layout", "out": [1, 2]},
        {"responsibility": "memory", "step": "apply", "n": 1},
        {"responsibility": "middleware", "step": "candidate", "index": 0},
        {"responsibility": "skills", "step": "fire", "skill": "b"},
        {"step": "orphan"},
    ]
    plan = compiled_plan(Harness(), Compiled(prog, [], set(), trace))
    assert plan == {
        "program": prog.model_dump(mode="json"),
        "middleware": {},
        "skills": [{"step": "fire", "skill": "a"}, {"step": "fire", "skill": "b"}],
        "memory": [{"step": "apply", "n": 1}],
        "tools": [{"step": "layout", "tool": "layout", "out": [1, 2]}],
    }
    empty = compiled_plan(Harness(), Compiled(prog, [], set(), []))
    assert empty["skills"] == empty["memory"] == empty["tools"] == []


def test_plan_difference_names_every_differing_part_sorted() -> None:
    before = {"program": {"a": 1, "b": 2}, "middleware": {}, "tools": []}
    after = {"program": {"b": 2, "a": 1}, "middleware": {"best_of_n": {}}, "skills": []}
    # key order is not a difference (canonical JSON); a part present on one side only is
    assert plan_difference(before, after) == ["middleware", "skills", "tools"]
    assert plan_difference(before, dict(before)) == []


# ------------------------------------------------------------------------------- parse_patch


def test_parse_patch_accepts_a_patch_a_dict_text_and_bytes() -> None:
    p = Patch(responsibility=Responsibility.memory, ops=[{"op": "remove", "path": "/memory/x"}])
    assert parse_patch(p) is p
    text = p.model_dump_json()
    assert parse_patch(text) == p
    assert parse_patch(text.encode()) == p
    assert parse_patch(p.model_dump()) == p


def test_parse_patch_names_the_first_error_and_where() -> None:
    with pytest.raises(ValueError) as exc:
        parse_patch({"responsibility": "tools", "ops": []})
    assert str(exc.value) == (
        "patch schema: List should have at least 1 item after validation, not 0 at ops"
    )
    with pytest.raises(ValueError, match=r"^patch schema: Input should be .* at responsibility$"):
        parse_patch({"responsibility": "generator", "ops": [{"op": "add"}]})
    with pytest.raises(ValueError, match=r"^patch schema: .* at ops\.0$"):
        parse_patch({"responsibility": "tools", "ops": [5]})
    # an error of the whole document has no field path
    with pytest.raises(
        ValueError, match=r"^patch schema: Input should be a valid dictionary.* at <root>$"
    ):
        parse_patch(5)
    with pytest.raises(ValueError, match=r"^patch schema: Invalid JSON: .* at <root>$"):
        parse_patch("{not json")


# ---------------------------------------------------------------------------- check_proposal


def test_each_rejection_keeps_its_detail_and_the_parsed_patch() -> None:
    h = Harness()
    schema = check_proposal({"responsibility": "x", "ops": []}, h, [T_A], [0], compile_program)
    assert (schema.ok, schema.reason, schema.patch) == (False, "schema", None)
    assert schema.detail.startswith("patch schema: ")
    outside = {
        "responsibility": "tools",
        "ops": [{"op": "replace", "path": "/policy/template", "value": "x {prompt}"}],
    }
    contract = check_proposal(outside, h, [T_A], [0], compile_program)
    assert (contract.ok, contract.reason) == (False, "contract") and contract.patch == parse_patch(
        outside
    )
    assert contract.detail.startswith("op 0 (replace /policy/template) is outside the boundary")
    missing = {"responsibility": "tools", "ops": [{"op": "remove", "path": "/tools/tools/5"}]}
    apply = check_proposal(missing, h, [T_A], [0], compile_program)
    assert (apply.ok, apply.reason) == (False, "apply") and apply.patch == parse_patch(missing)
    assert apply.detail.startswith("op 0 (remove /tools/tools/5) rejected by RFC 6902")
    bad = {"responsibility": "policy", "ops": [{"op": "add", "path": "/policy/x", "value": 1}]}
    schema2 = check_proposal(bad, h, [T_A], [0], compile_program)
    assert (schema2.ok, schema2.reason) == (
        False,
        "harness_schema",
    ) and "breaks the harness schema" in schema2.detail
    assert schema2.patch == parse_patch(bad) and schema2.child is None


def test_a_patch_that_leaves_the_document_unchanged_is_a_no_op_before_compiling() -> None:
    h = Harness()
    calls: list[int] = []

    def counting(hh: Harness, t: Task, seed: int) -> Program:
        calls.append(seed)
        return compile_program(hh, t, seed)

    same = {
        "responsibility": "policy",
        "ops": [{"op": "replace", "path": "/policy/template", "value": h.policy.template}],
    }
    res = check_proposal(same, h, [T_A], [0, 1], counting)
    assert (res.ok, res.reason) == (False, "no_op")
    assert res.detail == "the patch leaves the harness document unchanged"
    assert res.patch == parse_patch(same) and res.child is None and res.child_id == ""
    assert calls == []


def test_an_unchanged_plan_is_a_no_op_that_counts_the_target_tasks() -> None:
    raw = {
        "responsibility": "memory",
        "ops": [{"op": "replace", "path": "/memory/top_k", "value": 7}],
    }
    res = check_proposal(raw, Harness(), [T_A, T_B], [0, 1], compile_program)
    assert (res.ok, res.reason) == (False, "no_op")
    assert res.detail == (
        "the patch changes no compiled plan (program, middleware, skills, memory, tools) "
        "of its 2 target task(s)"
    )
    assert res.patch == parse_patch(raw) and res.child is None
    assert res.changed_tasks == [] and res.changed_parts == []


def test_a_compile_failure_on_the_child_names_the_task_and_seed() -> None:
    def fails_on_seed_1(h: Harness, t: Task, seed: int) -> Program:
        if h.memory.top_k == 7 and seed == 1:
            raise RuntimeError("boom")
        return compile_program(h, t, seed)

    # seed 0 compiles to an unchanged plan, so seed 1 is compiled too, and fails
    raw = {
        "responsibility": "memory",
        "ops": [{"op": "replace", "path": "/memory/top_k", "value": 7}],
    }
    res = check_proposal(raw, Harness(), [T_A], [0, 1], fails_on_seed_1)
    assert (res.ok, res.reason, res.detail) == (False, "compile", "task t-a seed 1: boom")
    assert res.patch == parse_patch(raw) and res.child is None


MEMORY_7 = {
    "responsibility": "memory",
    "ops": [{"op": "replace", "path": "/memory/top_k", "value": 7}],
}


def test_an_environment_error_on_the_child_is_not_blamed_on_the_patch() -> None:
    """A compile that fails for a reason the patch did not cause (here the tool's service is
    unreachable) raises, naming the task and seed; it is no ``compile`` rejection."""

    def unreachable_for_child(h: Harness, t: Task, seed: int) -> Program:
        if h.memory.top_k == 7:
            raise ConnectionError("layout service unreachable")
        return compile_program(h, t, seed)

    with pytest.raises(CompileFault, match="task t-a seed 0.*ConnectionError: layout service"):
        check_proposal(MEMORY_7, Harness(), [T_A], [0, 1], unreachable_for_child)


def test_a_parent_that_does_not_compile_raises_instead_of_rejecting_the_patch() -> None:
    def parent_broken(h: Harness, t: Task, seed: int) -> Program:
        if h.memory.top_k != 7:
            raise ValueError("template references {missing}")
        return compile_program(h, t, seed)

    with pytest.raises(CompileFault, match="parent harness .* task t-a seed 0.*missing"):
        check_proposal(MEMORY_7, Harness(), [T_A], [0], parent_broken)


def test_changed_tasks_in_target_order_once_each_and_sorted_parts() -> None:
    calls: list[tuple[str, int]] = []

    def counting(h: Harness, t: Task, seed: int) -> Compiled:
        calls.append((t.task_id, seed))
        return compile_with_trace(h, t, seed)

    h = Harness()
    res = check_proposal(LAYOUT_PATCH, h, [T_B, T_A], [0, 1, 2], counting)
    assert res.ok and (res.reason, res.detail) == ("", "")
    assert res.changed_tasks == ["t-b", "t-a"]  # once each, in target order
    assert res.changed_parts == ["program", "tools"]
    assert res.child is not None and layout_on(res.child) and not layout_on(h)
    assert res.patch == parse_patch(LAYOUT_PATCH)
    # the first changed seed settles a task: child and parent compiled once per task
    assert calls == [("t-b", 0), ("t-b", 0), ("t-a", 0), ("t-a", 0)]


def test_only_tasks_whose_plan_changes_are_listed() -> None:
    res = check_proposal(TEMPLATE, Harness(), [T_A, T_B, T_C], [0, 1], switched)
    assert res.ok and res.changed_tasks == ["t-a", "t-b", "t-c"]
    # the template switches nothing on for t-d: it is not listed
    res = check_proposal(TEMPLATE, Harness(), [T_D, T_C], [0], switched)
    assert res.changed_tasks == ["t-c"] and res.changed_parts == ["program"]


def test_a_middleware_patch_is_not_checked_against_the_generator() -> None:
    caps = GeneratorCapabilities(layout="none")
    res = check_proposal(REPAIR, Harness(), [T_A], [0], compile_program, caps)
    assert res.ok and res.changed_parts == ["middleware"]


def test_program_and_tool_changes_together_are_checked_against_the_generator() -> None:
    caps = GeneratorCapabilities(layout="none")
    res = check_proposal(LAYOUT_PATCH, Harness(), [T_A], [0, 1], compile_with_trace, caps)
    assert (res.ok, res.reason) == (False, "unsupported_by_generator")
    assert res.patch == parse_patch(LAYOUT_PATCH) and res.child is None
    assert res.detail == (
        "every change of the patch on its 1 target task(s) needs layout, which the deployed "
        "generator does not honour (it would serve the parent's program)"
    )


# ------------------------------------------------------------------- check_generator_support


def test_generator_support_names_every_capability_the_changes_need() -> None:
    child = Harness.model_validate({"policy": {"template": "{prompt}, photo"}})
    why = check_generator_support(
        Harness(), child, [T_A, T_B], [0, 1], switched, NO_LAYOUT_NO_NEGATIVE
    )
    assert why == (
        "every change of the patch on its 2 target task(s) needs layout, negative_prompt, "
        "which the deployed generator does not honour (it would serve the parent's program)"
    )
    # through check_proposal, with Compiled results
    res = check_proposal(
        TEMPLATE,
        Harness(),
        [T_A, T_B],
        [0, 1],
        lambda h, t, s: Compiled(switched(h, t, s), [], set(), []),
        NO_LAYOUT_NO_NEGATIVE,
    )
    assert (res.reason, res.detail) == ("unsupported_by_generator", why)


def test_one_surviving_difference_on_a_later_task_is_enough() -> None:
    child = Harness.model_validate({"policy": {"template": "{prompt}, photo"}})
    assert (
        check_generator_support(
            Harness(), child, [T_A, T_B, T_C], [0], switched, NO_LAYOUT_NO_NEGATIVE
        )
        is None
    )
    res = check_proposal(TEMPLATE, Harness(), [T_A, T_C], [0, 1], switched, NO_LAYOUT_NO_NEGATIVE)
    assert res.ok and res.changed_tasks == ["t-a", "t-c"]


def test_a_change_with_nothing_missing_is_described_as_dropped_conditioning() -> None:
    # parent and child compile the same program: no difference survives and none was dropped
    why = check_generator_support(
        Harness(), Harness(), [T_A], [0], compile_program, NO_LAYOUT_NO_NEGATIVE
    )
    assert why == (
        "every change of the patch on its 1 target task(s) needs conditioning it drops, "
        "which the deployed generator does not honour (it would serve the parent's program)"
    )
