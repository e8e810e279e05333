"""The proposal checks reject a patch whose whole effect is conditioning the deployed generator
cannot honour (``unsupported_by_generator``), compiling with the real harness runtime."""

from __future__ import annotations

from evoharness.capabilities import FULL, GeneratorCapabilities
from evoharness.harness.schema import Harness
from evoharness.program import Program
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.trace.checks import check_proposal
from tests.unit._trace_world import LAYOUT_PATCH

SEEDS = [0, 1]
TASK = Task(
    task_id="t-left",
    prompt="a photo of a cat to the left of a dog",
    task_family="position",
    constraints=[
        Constraint(
            constraint_id="p0",
            type=ConstraintType.position,
            subject="cat",
            value="dog",
            relation="left of",
        )
    ],
)
NO_LAYOUT = GeneratorCapabilities(layout="none")


class _Text2Image:
    """Compilation never calls the generator; the runtime only needs an id."""

    generator_id = "unit/no-call"

    def generate(self, program: Program) -> None:  # pragma: no cover - never called
        raise AssertionError("compile must not generate")


def compile_program(h: Harness, t: Task, seed: int) -> Program:
    return HarnessRuntime(h, _Text2Image()).compile_task(t, seed).program  # type: ignore[arg-type]


def test_layout_patch_on_a_generator_without_layout_is_rejected() -> None:
    parent = Harness()
    assert compile_program(parent, TASK, 0).layout is None
    res = check_proposal(LAYOUT_PATCH, parent, [TASK], SEEDS, compile_program, NO_LAYOUT)
    assert not res.ok and res.reason == "unsupported_by_generator"
    assert "layout" in res.detail


def test_same_patch_passes_where_layout_is_honoured_or_capabilities_are_unknown() -> None:
    parent = Harness()
    for caps in (FULL, GeneratorCapabilities(layout="adapter"), None):
        res = check_proposal(LAYOUT_PATCH, parent, [TASK], SEEDS, compile_program, caps)
        assert res.ok and res.changed_tasks == ["t-left"], (caps, res)


def test_patch_with_an_effect_that_survives_the_drop_passes() -> None:
    raw = {
        "responsibility": "policy",
        "ops": [{"op": "replace", "path": "/policy/template", "value": "{prompt}, photo"}],
    }
    res = check_proposal(raw, Harness(), [TASK], SEEDS, compile_program, NO_LAYOUT)
    assert res.ok, res
