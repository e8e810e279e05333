"""Experience bundles: summarise a task's best-vs-worst executions; keep them in capacity-
bounded slots; rank them by source-prompt similarity.

Bundle shape (``evoharness.harness.schema.ExperienceBundle``; GenEvolve's visual
experience, as the seeds' design describes it)::

    retrieval_key:     {trigger, source_prompt_summary}
    decision_guidance: {decision_focus,
                        recommended_tool_plan[], search_query_guidance[],
                        skill_routing_guidance[], reference_selection_guidance[],
                        prompt_program_guidance[], failure_guards[],
                        # actions, only when observed in the best execution's program:
                        append_text[], negative_terms[], params{}, use_tools[]}

Every guidance bullet not backed by a difference observed between the best and the worst
execution starts with ``Standard:``. The action keys are the observed program differences
in machine form, the keys ``evoharness.runtime.HarnessRuntime`` applies to its compilation
when it retrieves a bundle (``append_text``, ``negative_terms``, ``params``; ``use_tools``
names tools the best execution ran); an LLM compiler reads the text bullets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evoharness.canonical import content_hash
from evoharness.evidence import EvidenceStatus
from evoharness.harness.patch import Patch
from evoharness.harness.schema import ExperienceBundle, Memory, Responsibility
from evoharness.program import Program
from evoharness.tasks.models import Constraint, Task, normalize_prompt
from evoharness.trace.models import Execution

STANDARD_PREFIX = "Standard: "
#: Machine-readable action keys of ``decision_guidance`` (see the module docstring).
ACTION_KEYS = ("append_text", "negative_terms", "params", "use_tools")
GUIDANCE_LISTS = (
    "recommended_tool_plan",
    "search_query_guidance",
    "skill_routing_guidance",
    "reference_selection_guidance",
    "prompt_program_guidance",
    "failure_guards",
)
#: Characters kept of the normalised prompt in ``source_prompt_summary``.
SUMMARY_CHARS = 240
#: Trace entry kinds that mark a protocol failure (the request broke, not the image).
PROTOCOL_ERROR_KINDS = frozenset({"error", "protocol_error", "generation_error", "verify_error"})

# Standard advice per constraint type, used when no observed difference backs a bullet.
_STANDARD_TOOLS = {
    "count": "plan one layout box per instance when the prompt states a count",
    "position": "plan a layout that places the objects in the stated relation",
    "color": "give each coloured object its own layout box with its colour",
    "text": "quote the text to render and keep it short",
    "negative": "move negated objects into the negative prompt",
}
_STANDARD_GUARDS = {
    "count": "check the instance count after generation and repair when it is off",
    "position": "check the relative position of the two objects after generation",
    "color": "check each object's colour; colours leak between objects in one clause",
    "text": "check the rendered text character by character",
    "negative": "check that the negated object is absent",
    "object": "check that every named object is present",
    "attribute": "check the stated attribute on its object",
}


def source_prompt_summary(prompt: str) -> str:
    """The retrieval key's prompt summary: the normalised prompt
    (``evoharness.tasks.models.normalize_prompt``), at most ``SUMMARY_CHARS`` characters."""
    return normalize_prompt(prompt)[:SUMMARY_CHARS]


def is_protocol_failure(execution: Execution) -> bool:
    """True when the execution failed for protocol reasons rather than image content: no
    image, no evidence, every verdict uncertain, or an error entry in its trace (kind in
    ``PROTOCOL_ERROR_KINDS``). Such executions carry no visual experience."""
    if execution.image is None or not execution.evidence:
        return True
    if all(ev.status is EvidenceStatus.uncertain for ev in execution.evidence):
        return True
    return any(str(entry.get("kind", "")) in PROTOCOL_ERROR_KINDS for entry in execution.trace)


def _describe(c: Constraint) -> str:
    parts = [c.type.value, repr(c.subject)]
    if c.type.value == "count":
        parts.append(f"= {c.min_count}")
    elif c.type.value == "position":
        parts.append(f"{c.relation} {c.value!r}")
    elif c.value not in (None, ""):
        parts.append(f"= {c.value!r}")
    return " ".join(parts)


def _trace_labels(execution: Execution, kind: str) -> set[str]:
    """Names of trace entries of ``kind`` (``skill`` or ``tool``) that fired."""
    out = set()
    for e in execution.trace:
        if e.get("kind") == kind or e.get("stage") == kind:
            name = e.get("name") or e.get(kind) or ""
            if name and e.get("fired", e.get("active", True)):
                out.add(str(name))
    return out


def _split_terms(negative: str) -> list[str]:
    return [t.strip() for t in negative.split(",") if t.strip()]


def _program_differences(
    best: Program, worst: Program
) -> tuple[list[str], list[str], list[str], list[dict[str, Any]]]:
    """(tool bullets, reference bullets, prompt-program bullets, effects) observed between the
    best and the worst program."""
    tools: list[str] = []
    refs: list[str] = []
    prog: list[str] = []
    effects: list[dict[str, Any]] = []
    if best.layout and not worst.layout:
        labels = ", ".join(sorted({item.label for item in best.layout}))
        tools.append(
            f"Plan a layout before generating ({len(best.layout)} boxes: {labels}); the best "
            "execution had one and the worst did not."
        )
        effects.append({"kind": "use_tool", "value": "layout_planner"})
    elif worst.layout and not best.layout:
        tools.append(
            "Generate without a layout here; the worst execution used one and the best did not."
        )
    elif best.layout and worst.layout and len(best.layout) != len(worst.layout):
        tools.append(
            f"Plan {len(best.layout)} layout boxes, not {len(worst.layout)} (best vs worst)."
        )
        effects.append({"kind": "use_tool", "value": "layout_planner"})
    nb, nw = len(best.references or []), len(worst.references or [])
    if nb != nw:
        refs.append(f"Use {nb} reference image(s), not {nw}: the best execution used {nb}.")
    added = [
        t
        for t in _split_terms(best.negative_prompt)
        if t not in _split_terms(worst.negative_prompt)
    ]
    if added:
        prog.append(
            f"Add to the negative prompt: {', '.join(added)} (present in the best execution's "
            "program, absent from the worst's)."
        )
        effects.append({"kind": "negative_terms", "value": ", ".join(added)})
    if best.prompt != worst.prompt:
        prog.append(
            f"Compile the prompt as the best execution did: {best.prompt!r} "
            f"(worst: {worst.prompt!r})."
        )
        extra = (
            best.prompt[len(worst.prompt) :].strip() if best.prompt.startswith(worst.prompt) else ""
        )
        if extra:
            effects.append({"kind": "append_text", "value": extra})
    changed: dict[str, float | int] = {}
    for name in ("steps", "guidance_scale"):
        bv, wv = getattr(best.params, name), getattr(worst.params, name)
        if bv != wv:
            changed[name] = bv
            prog.append(f"Set {name} = {bv} (best) rather than {wv} (worst).")
    if changed:
        effects.append({"kind": "set_params", "params": changed})
    return tools, refs, prog, effects


def summarise(
    task: Task,
    executions: Sequence[Execution],
    rewards: Sequence[float],
    margin: float = 0.0,
    *,
    created_round: int = 0,
) -> ExperienceBundle | None:
    """One experience bundle from the best-vs-worst comparison of ``task``'s executions.

    ``rewards[i]`` is execution ``i``'s reward (e.g. its pass rate over the task's
    constraints, 0..1). Protocol failures (``is_protocol_failure``) are left out first; if
    fewer than two executions remain, or the best and worst reward differ by no more than
    ``margin``, returns None (nothing was learned). Ties pick the earliest execution.

    Raises ``ValueError`` when ``executions`` and ``rewards`` differ in length or an
    execution belongs to another task.
    """
    if len(executions) != len(rewards):
        raise ValueError(
            f"task {task.task_id}: {len(executions)} executions but {len(rewards)} rewards"
        )
    for e in executions:
        if e.task_id != task.task_id:
            raise ValueError(f"execution of task {e.task_id!r} passed for task {task.task_id!r}")
    valid = [
        (e, float(r))
        for e, r in zip(executions, rewards, strict=True)
        if not is_protocol_failure(e)
    ]
    if len(valid) < 2:
        return None
    best_i = max(range(len(valid)), key=lambda i: (valid[i][1], -i))
    worst_i = min(range(len(valid)), key=lambda i: (valid[i][1], i))
    (best, rb), (worst, rw) = valid[best_i], valid[worst_i]
    gap = rb - rw
    if gap <= margin:
        return None

    by_id = {c.constraint_id: c for c in task.constraints}
    best_ev = {ev.constraint_id: ev for ev in best.evidence}
    worst_ev = {ev.constraint_id: ev for ev in worst.evidence}
    flipped = [
        by_id[cid]
        for cid in by_id
        if cid in best_ev
        and cid in worst_ev
        and best_ev[cid].status is EvidenceStatus.passed
        and worst_ev[cid].status is EvidenceStatus.failed
    ]
    both_failed = [
        by_id[cid]
        for cid in by_id
        if best_ev.get(cid) is not None
        and worst_ev.get(cid) is not None
        and best_ev[cid].status is EvidenceStatus.failed
        and worst_ev[cid].status is EvidenceStatus.failed
    ]
    tools, refs, prog, effects = _program_differences(best.program, worst.program)

    skills_best, skills_worst = _trace_labels(best, "skill"), _trace_labels(worst, "skill")
    routing = [
        f"Activate skill {s!r}: it fired in the best execution, not in the worst."
        for s in sorted(skills_best - skills_worst)
    ]
    routing += [
        f"Do not activate skill {s!r}: it fired only in the worst execution."
        for s in sorted(skills_worst - skills_best)
    ]
    tools_best, tools_worst = _trace_labels(best, "tool"), _trace_labels(worst, "tool")
    for t in sorted(tools_best - tools_worst):
        tools.append(f"Run tool {t!r}: it ran in the best execution, not in the worst.")
        if t != "layout_planner" or not any(e.get("value") == t for e in effects):
            effects.append({"kind": "use_tool", "value": t})
    search: list[str] = []

    guards = []
    for c in flipped:
        observed = worst_ev[c.constraint_id].observed
        seen = f" (observed {observed!r})" if observed not in (None, "") else ""
        guards.append(
            f"Guard {_describe(c)}: failed in the worst execution{seen}, passed in the best."
        )
    for c in both_failed:
        guards.append(
            f"{STANDARD_PREFIX}{_STANDARD_GUARDS.get(c.type.value, 'verify it')}: {_describe(c)} failed in both."
        )

    types = sorted({c.type.value for c in (flipped or task.constraints)})
    if not tools:
        tools = [f"{STANDARD_PREFIX}{_STANDARD_TOOLS[t]}." for t in types if t in _STANDARD_TOOLS]
    if not search:
        search = [
            f"{STANDARD_PREFIX}search only for subjects the generator may not know; none was observed to matter here."
        ]
    if not routing:
        routing = [
            f"{STANDARD_PREFIX}route skills by the prompt's features ({', '.join(types) or 'none'})."
        ]
    if not refs:
        refs = [f"{STANDARD_PREFIX}use reference images only when the request carries them."]
    if not prog:
        prog = [
            f"{STANDARD_PREFIX}keep the compiled program; the executions differed only by seed."
        ]
    if not guards:
        guards = [f"{STANDARD_PREFIX}{_STANDARD_GUARDS.get(t, 'verify it')}." for t in types]

    if flipped:
        focus = (
            "Get right: "
            + "; ".join(_describe(c) for c in flipped)
            + f" (reward {rb:.2f} vs {rw:.2f})."
        )
    else:
        focus = f"{STANDARD_PREFIX}reward {rb:.2f} vs {rw:.2f} with no single constraint flipping; keep what the best execution did."

    key = {
        "trigger": "+".join(types) if types else task.task_family,
        "source_prompt_summary": source_prompt_summary(task.prompt),
    }
    guidance: dict[str, Any] = {
        "decision_focus": focus,
        "recommended_tool_plan": tools,
        "search_query_guidance": search,
        "skill_routing_guidance": routing,
        "reference_selection_guidance": refs,
        "prompt_program_guidance": prog,
        "failure_guards": guards,
    }
    for eff in effects:
        if eff["kind"] == "append_text":
            guidance.setdefault("append_text", []).append(eff["value"])
        elif eff["kind"] == "negative_terms":
            guidance.setdefault("negative_terms", []).extend(_split_terms(eff["value"]))
        elif eff["kind"] == "set_params":
            guidance.setdefault("params", {}).update(eff["params"])
        elif eff["kind"] == "use_tool" and eff["value"] not in guidance.get("use_tools", []):
            guidance.setdefault("use_tools", []).append(eff["value"])
    bundle_id = "mem-" + content_hash({"key": key, "guidance": guidance})[:16]
    return ExperienceBundle(
        bundle_id=bundle_id,
        retrieval_key=key,
        decision_guidance=guidance,
        reward_gap=round(gap, 6),
        created_round=created_round,
    )


def reward(task: Task, execution: Execution) -> float:
    """An execution's reward for mining: the fraction of ``task``'s constraints its evidence
    passes (0..1; a constraint without evidence counts as not passed)."""
    if not task.constraints:
        return 1.0
    passed = {ev.constraint_id for ev in execution.evidence if ev.status is EvidenceStatus.passed}
    return sum(c.constraint_id in passed for c in task.constraints) / len(task.constraints)


def mine(
    tasks: Sequence[Task],
    executions: Sequence[Execution],
    *,
    created_round: int = 0,
    margin: float = 0.0,
    actionable: bool = True,
) -> list[ExperienceBundle]:
    """Bundles mined from best-vs-worst executions (``summarise``) of each task, over every
    execution given (any harness, any seed: what differs between a good and a bad execution
    of the same request is the lesson). ``actionable`` keeps only bundles with machine actions
    (``bundle_actions``), the ones a rule-compiled harness applies. Tasks in ``tasks`` order,
    executions of other tasks ignored, duplicates by ``bundle_id`` dropped. Deterministic."""
    by_task: dict[str, list[Execution]] = {}
    for e in executions:
        by_task.setdefault(e.task_id, []).append(e)
    out: list[ExperienceBundle] = []
    seen: set[str] = set()
    for t in tasks:
        execs = sorted(by_task.get(t.task_id, []), key=lambda e: (e.harness_id, e.seed))
        if len(execs) < 2:
            continue
        b = summarise(t, execs, [reward(t, e) for e in execs], margin, created_round=created_round)
        if b is None or b.bundle_id in seen or (actionable and not bundle_actions(b)):
            continue
        seen.add(b.bundle_id)
        out.append(b)
    return out


def memory_patch(
    memory: Memory, bundles: Sequence[ExperienceBundle], why: str = ""
) -> Patch | None:
    """A Memory-responsibility ``Patch`` that admits ``bundles`` into ``memory`` (a harness's
    ``Memory``; ``admit`` with its capacity) and enables retrieval; None when nothing would
    change. ``why`` is prepended to the rationale."""
    kept = list(memory.bundles)
    for b in bundles:
        kept = admit(kept, b, memory.capacity)
    if [b.bundle_id for b in kept] == [b.bundle_id for b in memory.bundles]:
        return None
    ops: list[dict[str, Any]] = [
        {
            "op": "replace",
            "path": "/memory/bundles",
            "value": [b.model_dump(mode="json") for b in kept],
        }
    ]
    if not memory.enabled:
        ops.append({"op": "replace", "path": "/memory/enabled", "value": True})
    actions = sorted({k for b in bundles for k in bundle_actions(b)})
    return Patch(
        responsibility=Responsibility.memory,
        ops=ops,
        rationale=(
            f"{why}the best and the worst execution of {len(bundles)} failing request(s) "
            f"differ in {', '.join(actions)}; stored as experience, retrieved for similar prompts"
        ),
        expected_effect="similar prompts compiled as the best executions were",
    )


def admit(
    bundles: Sequence[ExperienceBundle], new: ExperienceBundle, capacity: int
) -> list[ExperienceBundle]:
    """Add ``new`` to the slots and return the kept bundles (at most ``capacity``).

    One slot per source prompt: a bundle with the same ``source_prompt_summary`` is replaced
    when ``new`` has a larger reward gap, or an equal gap and is at least as recent. Over
    capacity, the bundles with the smallest reward gap go first, then the oldest
    (``created_round``, then insertion order). Raises ``ValueError`` for ``capacity < 1``.
    """
    if capacity < 1:
        raise ValueError(f"memory capacity must be >= 1 (got {capacity})")
    key = new.retrieval_key.get("source_prompt_summary", "")
    kept: list[ExperienceBundle] = []
    replaced = False
    for b in bundles:
        if b.retrieval_key.get("source_prompt_summary", "") == key and not replaced:
            if (new.reward_gap, new.created_round) >= (b.reward_gap, b.created_round):
                kept.append(new)
            else:
                kept.append(b)
            replaced = True
        else:
            kept.append(b)
    if not replaced:
        kept.append(new)
    if len(kept) <= capacity:
        return kept
    order = sorted(
        range(len(kept)),
        key=lambda i: (kept[i].reward_gap, kept[i].created_round, i),
        reverse=True,
    )
    keep = set(order[:capacity])
    return [b for i, b in enumerate(kept) if i in keep]


def rank(
    query: np.ndarray, keys: np.ndarray, top_k: int, min_similarity: float
) -> list[tuple[int, float]]:
    """Indices and cosine similarities of the ``top_k`` rows of ``keys`` (shape ``(n, d)``)
    most similar to ``query`` (shape ``(d,)``), best first, keeping only similarity >=
    ``min_similarity``. Zero vectors have similarity 0."""
    if keys.size == 0 or top_k < 1:
        return []
    q = np.asarray(query, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    qn = np.linalg.norm(q)
    kn = np.linalg.norm(k, axis=1)
    denom = np.where((kn * qn) > 0, kn * qn, 1.0)
    sims = (k @ q) / denom
    sims = np.where((kn * qn) > 0, sims, 0.0)
    order = np.argsort(-sims, kind="stable")[:top_k]
    return [(int(i), float(sims[i])) for i in order if sims[i] >= min_similarity]


def guidance_text(bundle: ExperienceBundle | dict[str, Any]) -> str:
    """The bundle's guidance as Markdown (for an LLM compiler or a report)."""
    b = bundle if isinstance(bundle, dict) else bundle.model_dump()
    g = b.get("decision_guidance", {})
    lines = [f"Focus: {g.get('decision_focus', '')}"]
    for name in GUIDANCE_LISTS:
        for bullet in g.get(name, []):
            lines.append(f"- [{name}] {bullet}")
    return "\n".join(lines)


def bundle_actions(bundle: ExperienceBundle | dict[str, Any]) -> dict[str, Any]:
    """The bundle's machine-readable actions (``ACTION_KEYS`` present), possibly empty."""
    b = bundle if isinstance(bundle, dict) else bundle.model_dump()
    g = b.get("decision_guidance", {})
    return {k: g[k] for k in ACTION_KEYS if k in g}
