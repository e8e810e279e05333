"""Proposal checks (TRACE step 5, docs/architecture.md): every proposed patch must

1. **parse** as a ``Patch`` (``schema``),
2. stay inside its responsibility's **boundary contract** (``contract``,
   ``evoharness.harness.patch.check_contract``),
3. apply under RFC 6902 and leave a harness that passes the **harness schema**
   (``apply``/``harness_schema``, via ``apply_patch``),
4. **change the compiled plan** of at least one task it targets (``no_op``): parent and child
   are compiled with the harness runtime (no generator call) and their *plans* compared as
   canonical JSON. The plan (``compiled_plan``) is everything a harness decides for a request
   before the first image: the program, the run-time middleware stages that will act on it
   (best-of-N, verify-and-repair, with their settings), the skills that fired, the memory
   applied and the tools that ran. A patch that changes none of these would only re-read the
   cache, so it is rejected before it costs a generation; a middleware or memory patch that
   acts at run time is *not* a no-op (issue 16, finding 2).
5. **survive the deployed generator's capabilities** (``unsupported_by_generator``): when the
   deployment's ``GeneratorCapabilities`` are given, parent and child programs are compared
   after removing what the generator cannot honour (``GeneratorCapabilities.honoured``); a
   patch whose every change is conditioning the generator drops (layout boxes on a generator
   without layout, say) would be served as its parent, so it is rejected. Only patches whose
   plan changes are confined to the program and the tools that feed it are checked this way:
   a middleware, skill or memory change acts whatever the generator honours.

A candidate for a *cost* cluster is also refused when it raises ``max_generator_calls``
(``adds_generator_calls``, in ``round.propose_candidates``): a stage that generates more
images per request is not a saving, whatever it spares elsewhere; likewise when it raises
the sampling work of each call (``adds_generator_work``: more steps or pixels;
``cost_increase``). A candidate that moves the same number the same way as an earlier one of
the round (``lever_key``) is one lever at another value and is not gated again.

A failing check returns the reason; nothing is raised for a bad proposal, so a malformed
proposal from an untrusted LLM never reaches the harness, it is only recorded. A failure the
patch did not cause (the parent does not compile, the environment fails) raises
``CompileFault``: it is not a verdict on the patch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import ValidationError

from evoharness.canonical import canonical_json
from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, PatchError, apply_patch, check_contract
from evoharness.harness.schema import BestOfNStage, Harness, VerifyAndRepairStage
from evoharness.program import Program
from evoharness.runtime.runtime import Compiled
from evoharness.tasks.models import Task

#: compile(harness, task, seed) -> what the runtime would send (no generation): the program,
#: or the whole ``Compiled`` (program + trace: skills fired, memory applied, tools run).
CompileFn = Callable[[Harness, Task, int], Program | Compiled]

#: Middleware stage kinds that act at run time (after compilation, on every request).
RUNTIME_STAGES = ("best_of_n", "verify_and_repair")
#: Responsibilities whose compile-trace records belong to the plan.
PLAN_TRACE = ("skills", "memory", "tools")


def compiled_plan(harness: Harness, compiled: Program | Compiled) -> dict[str, Any]:
    """The plan ``harness`` makes for one request (JSON-ready): ``program`` (the compiled
    program), ``middleware`` (``{kind: settings}`` of the first stage of each
    ``RUNTIME_STAGES`` kind, the one the runtime runs), and, when ``compiled`` is a
    ``Compiled``, ``skills`` / ``memory`` / ``tools`` (their compile-trace records, in order).
    Two harnesses with equal plans behave identically on that request's first attempt and
    every later one the middleware makes."""
    program = compiled.program if isinstance(compiled, Compiled) else compiled
    stages: dict[str, Any] = {}
    for st in harness.middleware.stages:
        if st.kind in RUNTIME_STAGES and st.kind not in stages:
            stages[st.kind] = st.model_dump(mode="json")
    plan: dict[str, Any] = {"program": program.model_dump(mode="json"), "middleware": stages}
    if isinstance(compiled, Compiled):
        for resp in PLAN_TRACE:
            plan[resp] = [
                {k: v for k, v in r.items() if k != "responsibility"}
                for r in compiled.trace
                if r.get("responsibility") == resp
            ]
    return plan


def plan_difference(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The top-level plan parts (``program``, ``middleware``, ``skills``, ...) that differ."""
    keys = sorted(set(before) | set(after))
    return [k for k in keys if canonical_json(before.get(k)) != canonical_json(after.get(k))]


@dataclass
class CheckResult:
    """Outcome of the proposal checks. ``reason`` is one of ``schema``, ``contract``,
    ``apply``, ``harness_schema``, ``no_op``, ``compile``, ``unsupported_by_generator`` (empty
    when ``ok``); ``detail`` is the human message; ``changed_tasks`` lists target task ids whose
    plan changed and ``changed_parts`` the plan parts that changed (``program``, ``middleware``,
    ``skills``, ``memory``, ``tools``; see ``compiled_plan``)."""

    ok: bool
    reason: str = ""
    detail: str = ""
    patch: Patch | None = None
    child: Harness | None = None
    child_id: str = ""
    changed_tasks: list[str] = field(default_factory=list)
    changed_parts: list[str] = field(default_factory=list)


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


class Resampling(NamedTuple):
    """How much a harness's middleware resamples one request at run time: ``best_of_n``
    candidates (1 without a ``best_of_n`` stage) and ``repair_budget`` re-generations after a
    failed verification (0 without a ``verify_and_repair`` stage)."""

    best_of_n: int
    repair_budget: int


def resampling(harness: Harness) -> Resampling:
    """The run-time resampling of ``harness`` (``Resampling``), read from its middleware
    stages (each kind appears at most once, ``schema.Middleware``)."""
    n = 1
    budget = 0
    for s in harness.middleware.stages:
        if isinstance(s, BestOfNStage):
            n = s.n
        elif isinstance(s, VerifyAndRepairStage):
            budget = s.repair_budget
    return Resampling(best_of_n=n, repair_budget=budget)


def widens_resampling(parent: Harness, child: Harness) -> bool:
    """Whether ``child`` resamples more than ``parent``: a best-of-N stage added or its N
    raised, or a verify-and-repair stage added with a budget above 0 or its budget raised
    (either counts, even when the other is lowered)."""
    before, after = resampling(parent), resampling(child)
    return after.best_of_n > before.best_of_n or after.repair_budget > before.repair_budget


def max_generator_calls(harness: Harness) -> int:
    """The most generator calls ``harness``'s middleware makes for one request: N best-of-N
    candidates (1 without the stage) plus the verify-and-repair budget (0 without it), as the
    runtime's middleware runs them (``evoharness.runtime.middleware``: the candidates, then
    up to ``repair_budget`` repairs of the best)."""
    r = resampling(harness)
    return r.best_of_n + r.repair_budget


def work_per_call(harness: Harness) -> int:
    """Sampling work of one generator call under ``harness``'s policy: steps × width × height
    (a latent-diffusion sampler runs the denoiser once per step over a latent whose size
    grows with the pixels; skills that set parameters on some prompts are not counted)."""
    p = harness.policy.params
    return p.steps * p.width * p.height


def cost_increase(parent: Harness, child: Harness) -> str | None:
    """Why a cost cluster's candidate ``child`` cannot be a saving over ``parent`` (None when
    it can): it may make more generator calls per request (``max_generator_calls``) or do more
    sampling work per call (``work_per_call``: more steps or pixels). Either buys quality with
    more generation, which a cost cluster's candidate must not do (a quality cluster's may,
    at the gate's price of cost)."""
    before, after = max_generator_calls(parent), max_generator_calls(child)
    if after > before:
        return (
            f"adds_generator_calls: a cost cluster's candidate may make up to {after} generator "
            f"calls per request against the parent's {before}; more generations are not a saving"
        )
    if work_per_call(child) > work_per_call(parent):
        p, c = parent.policy.params, child.policy.params
        return (
            f"adds_generator_work: a cost cluster's candidate samples {c.steps} steps at "
            f"{c.width}x{c.height} per call against the parent's {p.steps} at "
            f"{p.width}x{p.height}; more sampling work is not a saving"
        )
    return None


def lever_key(parent: Harness, patch: Patch) -> tuple[str, int] | None:
    """(path, direction) of a patch that moves one number of ``parent`` (a single ``replace``
    of a numeric field; direction +1 up, −1 down), None for any other patch. Two candidates
    with the same key are one lever tried at two values (guidance 1.5 → 5.0 and → 7.5): the
    round gates the first only (``round.propose_candidates``), so Holm's correction is not
    spent on values of one hypothesis that this round's evidence chose together."""
    if len(patch.ops) != 1 or patch.ops[0].get("op") != "replace":
        return None
    path = patch.ops[0].get("path")
    new = patch.ops[0].get("value")
    node: Any = parent.to_document()
    for part in str(path).strip("/").split("/"):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    numbers = [v for v in (node, new) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != 2 or new == node:
        return None
    return str(path), 1 if new > node else -1


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
    ``CheckResult``; never raises for a bad proposal. Only a failure the patch causes is
    blamed on it: the parent is compiled first on the same task and seed, and an exception
    from ``compile_program`` on the child is reported as ``compile`` (a patch that breaks
    compilation is rejected) unless it is an environment error (``ENVIRONMENT_ERRORS``).

    Raises ``CompileFault`` (naming the harness, task and seed) when compilation fails for a
    reason the patch did not cause: the parent does not compile, or the child's compilation
    fails with an environment error (a tool's service unreachable, a timeout, memory).
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
    parts: set[str] = set()
    for task in target_tasks:
        for seed in seeds:
            before = _compile_unpatched(compile_program, parent, task, seed)
            try:
                after = compile_program(child, task, seed)
            except ENVIRONMENT_ERRORS as exc:
                raise CompileFault(
                    f"compiling the child {child_id} of {harness_id(parent)} for task "
                    f"{task.task_id} seed {seed} failed in its environment, not by the patch: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            except Exception as exc:  # noqa: BLE001 - the parent compiled: the patch broke it
                return CheckResult(
                    False, "compile", f"task {task.task_id} seed {seed}: {exc}", patch=patch
                )
            diff = plan_difference(compiled_plan(parent, before), compiled_plan(child, after))
            if diff:
                changed.append(task.task_id)
                parts.update(diff)
                break
    if not changed:
        return CheckResult(
            False,
            "no_op",
            f"the patch changes no compiled plan (program, middleware, skills, memory, tools) "
            f"of its {len(target_tasks)} target task(s)",
            patch=patch,
        )
    if capabilities is not None and set(parts) <= {"program", "tools"}:
        unsupported = check_generator_support(
            parent, child, target_tasks, seeds, compile_program, capabilities
        )
        if unsupported is not None:
            return CheckResult(False, "unsupported_by_generator", unsupported, patch=patch)
    return CheckResult(
        True,
        patch=patch,
        child=child,
        child_id=child_id,
        changed_tasks=changed,
        changed_parts=sorted(parts),
    )


#: Exceptions that say the compiler's environment failed (OS and network errors, timeouts,
#: memory), whatever harness it compiled: never blamed on a patch.
ENVIRONMENT_ERRORS: tuple[type[BaseException], ...] = (OSError, MemoryError)


class CompileFault(RuntimeError):
    """Compilation failed for a reason no patch caused (the unpatched parent does not compile,
    or the environment failed); the message names the harness, task and seed."""


def _compile_unpatched(
    compile_program: CompileFn, parent: Harness, task: Task, seed: int
) -> Program | Compiled:
    """``compile_program(parent, task, seed)``; any exception becomes a ``CompileFault``
    naming the parent, task and seed (the patch is not involved)."""
    try:
        return compile_program(parent, task, seed)
    except Exception as exc:
        raise CompileFault(
            f"the parent harness {harness_id(parent)} does not compile for task "
            f"{task.task_id} seed {seed}, so no patch can be checked there: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _program_of(compiled: Program | Compiled) -> Program:
    return compiled if isinstance(compiled, Program) else compiled.program


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
            before, _ = capabilities.honoured(_program_of(compile_program(parent, task, seed)))
            after, missing = capabilities.honoured(_program_of(compile_program(child, task, seed)))
            if before.canonical() != after.canonical():
                return None
            needed.update(missing)
    what = ", ".join(sorted(needed)) or "conditioning it drops"
    return (
        f"every change of the patch on its {len(target_tasks)} target task(s) needs {what}, "
        "which the deployed generator does not honour (it would serve the parent's program)"
    )
