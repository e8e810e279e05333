"""Proposal checks (TRACE step 5, ARCHITECTURE.md): every proposed patch must

1. **parse** as a ``Patch`` (``schema``),
2. stay inside its responsibility's **boundary contract** (``contract``,
   ``evoharness.harness.patch.check_contract``),
3. apply under RFC 6902 and leave a harness that passes the **harness schema**
   (``apply``/``harness_schema``, via ``apply_patch``),
4. **change the compiled program** of at least one task it targets (``no_op``): programs of
   parent and child are compiled with the harness runtime (no generator call) and compared as
   canonical JSON. A patch that changes nothing would only re-read the cache, so it is rejected
   before it costs a generation.
5. **survive the deployed generator's capabilities** (``unsupported_by_generator``): when the
   deployment's ``GeneratorCapabilities`` are given, parent and child programs are compared
   after removing what the generator cannot honour (``GeneratorCapabilities.honoured``); a
   patch whose every change is conditioning the generator drops (layout boxes on a generator
   without layout, say) would be served as its parent, so it is rejected.

A failing check returns the reason; nothing is raised, so a malformed proposal from an
untrusted LLM never reaches the harness, it is only recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, PatchError, apply_patch, check_contract
from evoharness.harness.schema import Harness
from evoharness.program import Program
from evoharness.tasks.models import Task

#: compile(harness, task, seed) -> the program the runtime would send (no generation).
CompileFn = Callable[[Harness, Task, int], Program]


@dataclass
class CheckResult:
    """Outcome of the proposal checks. ``reason`` is one of ``schema``, ``contract``,
    ``apply``, ``harness_schema``, ``no_op``, ``compile``, ``unsupported_by_generator`` (empty
    when ``ok``); ``detail`` is the
    human message; ``changed_tasks`` lists target task ids whose program changed."""

    ok: bool
    reason: str = ""
    detail: str = ""
    patch: Patch | None = None
    child: Harness | None = None
    child_id: str = ""
    changed_tasks: list[str] = field(default_factory=list)


def parse_patch(raw: Any) -> Patch:
    """Parse ``raw`` (a ``Patch``, a dict, or JSON text) into a ``Patch``; raises
    ``ValueError`` with the first schema error (field path and message)."""
    if isinstance(raw, Patch):
        return raw
    try:
        if isinstance(raw, str | bytes):
            return Patch.model_validate_json(raw)
        return Patch.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(map(str, err["loc"])) or "<root>"
        raise ValueError(f"patch schema: {err['msg']} at {loc}") from None


def check_proposal(
    raw: Any,
    parent: Harness,
    target_tasks: Sequence[Task],
    seeds: Sequence[int],
    compile_program: CompileFn,
    capabilities: GeneratorCapabilities | None = None,
) -> CheckResult:
    """Run the proposal checks on ``raw`` against ``parent``.

    ``capabilities``: the deployed generator's (None: everything honoured, check 5 skipped);
    ``compile_program`` compiles what the harness asks for, before any capability drop.

    ``target_tasks``: the tasks of the cluster the patch targets; ``seeds``: the matched seeds
    (the program is compiled for each; layout planners may depend on the seed). Returns a
    ``CheckResult``; never raises for a bad proposal. An exception from ``compile_program`` on
    the child is reported as ``compile`` (a patch that breaks compilation is rejected).
    """
    try:
        patch = parse_patch(raw)
    except ValueError as exc:
        return CheckResult(False, "schema", str(exc))
    try:
        check_contract(patch)
    except PatchError as exc:
        return CheckResult(False, "contract", str(exc), patch=patch)
    try:
        child = apply_patch(parent, patch)
    except PatchError as exc:
        reason = "harness_schema" if "harness schema" in str(exc) else "apply"
        return CheckResult(False, reason, str(exc), patch=patch)
    child_id = harness_id(child)
    if child_id == harness_id(parent):
        return CheckResult(False, "no_op", "the patch leaves the harness document unchanged", patch)
    changed: list[str] = []
    for task in target_tasks:
        for seed in seeds:
            try:
                after = compile_program(child, task, seed)
            except Exception as exc:  # noqa: BLE001 - a patch that breaks compilation
                return CheckResult(
                    False, "compile", f"task {task.task_id} seed {seed}: {exc}", patch=patch
                )
            before = compile_program(parent, task, seed)
            if before.canonical() != after.canonical():
                changed.append(task.task_id)
                break
    if not changed:
        return CheckResult(
            False,
            "no_op",
            f"the patch changes no compiled program of its {len(target_tasks)} target task(s)",
            patch=patch,
        )
    if capabilities is not None:
        unsupported = check_generator_support(
            parent, child, target_tasks, seeds, compile_program, capabilities
        )
        if unsupported is not None:
            return CheckResult(False, "unsupported_by_generator", unsupported, patch=patch)
    return CheckResult(True, patch=patch, child=child, child_id=child_id, changed_tasks=changed)


def check_generator_support(
    parent: Harness,
    child: Harness,
    target_tasks: Sequence[Task],
    seeds: Sequence[int],
    compile_program: CompileFn,
    capabilities: GeneratorCapabilities,
) -> str | None:
    """None when some target task's program still differs between ``parent`` and ``child``
    after both drop what ``capabilities`` cannot honour; else the reason (which capabilities
    the child's changes need). Compiles every (task, seed) until one difference survives."""
    needed: set[str] = set()
    for task in target_tasks:
        for seed in seeds:
            before, _ = capabilities.honoured(compile_program(parent, task, seed))
            after, missing = capabilities.honoured(compile_program(child, task, seed))
            if before.canonical() != after.canonical():
                return None
            needed.update(missing)
    what = ", ".join(sorted(needed)) or "conditioning it drops"
    return (
        f"every change of the patch on its {len(target_tasks)} target task(s) needs {what}, "
        "which the deployed generator does not honour (it would serve the parent's program)"
    )
