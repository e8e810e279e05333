"""Tool templates: a layout planner (one box per object; GLIGEN, Li et al. 2023; LayoutGPT,
Feng et al. 2023) for the failing feature's prompts, or for the combined features; and the
agent lever (``_tools_agent``): an agent with ``search`` for prompts that only refer to what
they need (GenEvolve; docs/agent-tools.md); and the reference lever (``_tools_image_search``):
an agent with ``image_search`` that retrieves a reference image for each object named by a
material or pattern.
"""

from __future__ import annotations

from typing import Any, Final

from evoharness.agent.planner import find_lookups, find_textured
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    _LAYOUT,
    LAYOUT_COMBINED,
    Template,
    _add,
    _layout_tool,
    _patch,
    _replace,
    referring_prompts,
    textured_prompts,
)


def _tools_layout(feature: str, combined: bool = False) -> Template:
    """A layout planner for ``feature`` prompts only, or (``combined``) for ``feature`` and
    ``LAYOUT_COMBINED`` together; with a planner declared, it is enabled and widened."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        feats = sorted({*LAYOUT_COMBINED, feature}) if combined else [feature]
        why = (
            f"a spatial layout (one box per object) conditions where and how many objects are "
            f"drawn; planned for {', '.join(feats)} prompts"
        )
        effect = f"{', '.join(feats)} constraints met more often; other prompts unchanged"
        found = _layout_tool(h)
        if found is None:
            tool = {
                "kind": _LAYOUT,
                "name": "layout",
                "planner": "deterministic",
                "when": feats,
                "min_objects": 1,
            }
            return [_patch("tools", [_add("/tools/tools/-", tool)], why, effect)]
        i, t = found
        ops: list[dict[str, Any]] = []
        if not t.enabled:
            ops.append(_replace(f"/tools/tools/{i}/enabled", True))
        ops += [_add(f"/tools/tools/{i}/when/-", f) for f in feats if f not in t.when]
        if t.min_objects > 1:
            ops.append(_replace(f"/tools/tools/{i}/min_objects", 1))
        return [_patch("tools", ops, why, effect)] if ops else []

    return make


def _layout_levers(feature: str) -> list[Template]:
    """The per-feature layout lever and, as a separate candidate, the combination."""
    return [_tools_layout(feature), _tools_layout(feature, combined=True)]


#: The tools the agent lever declares when the harness has none of their kind (the embedded
#: knowledge base and the rule planner: offline and deterministic; GenEvolve's turn budget).
AGENT_SEARCH: Final = {"name": "facts", "kind": "search", "provider": "embedded", "top_k": 3}
AGENT_MAX_TURNS: Final = 11
AGENT: Final = {"name": "agent", "kind": "agent", "backend": "rule", "max_turns": AGENT_MAX_TURNS}
#: The ``image_search`` tool the reference lever declares when the harness has none.
AGENT_IMAGE_SEARCH: Final = {"name": "references", "kind": "image_search", "top_k": 4}
#: References per render the reference lever tunes an agent up to (MultiBanana and AutoRef
#: report success falling as references are added; GenEvolve allows 2).
AGENT_MAX_REFERENCES: Final = 2


def _free_name(h: Harness, name: str) -> str:
    taken = {t.name for t in h.tools.tools}
    if name not in taken:
        return name
    i = 2
    while f"{name}-{i}" in taken:
        i += 1
    return f"{name}-{i}"


def _find(h: Harness, kind: str) -> tuple[int, Any] | None:
    for i, t in enumerate(h.tools.tools):
        if t.kind == kind:
            return i, t
    return None


def _ensure(h: Harness, declared: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    """Ops that give ``h`` an enabled tool of ``declared``'s kind: add ``declared`` (under a
    free name) where the harness has none, enable the first where it is disabled. Returns
    ``(ops, (index, tool) or None when it is added)``."""
    found = _find(h, declared["kind"])
    if found is None:
        return [_add("/tools/tools/-", {**declared, "name": _free_name(h, declared["name"])})], None
    i, t = found
    return ([] if t.enabled else [_replace(f"/tools/tools/{i}/enabled", True)]), found


def _tools_agent(h: Harness, c: FailureCluster) -> list[Patch]:
    """The agent lever: when the cluster's failing prompts refer to an attribute of a
    well-known thing (``_common.referring_prompts``), enable an agent with ``search`` that
    looks it up and rewrites the prompt before the policy reads it (GenEvolve). Declares
    ``AGENT_SEARCH`` / ``AGENT`` where the harness has no tool of that kind, enables them
    where they are disabled, and tunes an agent whose turn budget cannot cover the most
    lookups one failing prompt needs (one search per lookup plus the answer). No patch when
    no failing prompt refers to anything, or when the lever is already pulled."""
    return _tools_agent_for(h, referring_prompts(c))


def _tools_agent_for(h: Harness, prompts: list[str]) -> list[Patch]:
    """``_tools_agent`` for the cluster's referring prompts ``prompts`` (already read by
    ``referring_prompts``): ``[]`` when there are none."""
    if not prompts:
        return []
    ops, _ = _ensure(h, AGENT_SEARCH)
    agent_ops, agent = _ensure(h, AGENT)
    ops += agent_ops
    if agent is not None:
        i, t = agent
        need = max(len(find_lookups(p)) for p in prompts) + 1
        if t.max_turns < need:
            ops.append(_replace(f"/tools/tools/{i}/max_turns", max(need, AGENT_MAX_TURNS)))
        if t.max_cost < need - 1:
            ops.append(_replace(f"/tools/tools/{i}/max_cost", float(need)))
    if not ops:
        return []
    shown = "; ".join(f'"{p}"' for p in prompts[:2])
    why = (
        f"the failing prompts refer to an attribute of a well-known thing ({shown}); a text "
        "encoder draws the thing named, not the colour, count or object it stands for, so an "
        "agent searches for it and rewrites the prompt before generation"
    )
    effect = (
        "prompts that refer to a well-known thing are drawn with what they mean; others unchanged"
    )
    return [_patch("tools", ops, why, effect)]


def _tools_image_search(h: Harness, c: FailureCluster) -> list[Patch]:
    """The reference lever: when the cluster's failing prompts name an object by a material
    or pattern (``_common.textured_prompts``), give the agent ``image_search`` so that it
    retrieves a reference image of each such object and binds it in the program
    (``evoharness.agent.planner``; GenEvolve). Declares ``AGENT_IMAGE_SEARCH`` / ``AGENT``
    where the harness has no tool of that kind, enables them where they are disabled, and
    tunes an agent whose ``max_references`` (up to ``AGENT_MAX_REFERENCES``) or turn budget
    cannot cover the textured objects of one failing prompt. No patch when no failing prompt
    names one, or when the lever is already pulled. The deployment must give the runtime a
    reference library (``runtime.library_index``, ``worker.library_index``); without one the
    agent is not offered ``image_search`` and the gate sees no change."""
    prompts = textured_prompts(c)
    if not prompts:
        return []
    most = max(len(find_textured(p)) for p in prompts)
    ops, _ = _ensure(h, AGENT_IMAGE_SEARCH)
    agent_ops, agent = _ensure(h, AGENT)
    ops += agent_ops
    refs = min(most, AGENT_MAX_REFERENCES)
    if agent is not None:
        i, t = agent
        if t.max_references < refs:
            ops.append(_replace(f"/tools/tools/{i}/max_references", refs))
        need = max(len(find_lookups(p)) + min(len(find_textured(p)), refs) for p in prompts) + 1
        if t.max_turns < need:
            ops.append(_replace(f"/tools/tools/{i}/max_turns", max(need, AGENT_MAX_TURNS)))
    if not ops:
        return []
    shown = "; ".join(f'"{p}"' for p in prompts[:2])
    why = (
        f"the failing prompts name objects by a material or pattern ({shown}); text encoders "
        "bind such words to their object poorly, and a reference image of the object in that "
        "material shows it: an agent retrieves one per such object (image_search) and binds it "
        "in the prompt"
    )
    effect = (
        "materials and patterns drawn on the right object more often; prompts without them "
        "unchanged"
    )
    return [_patch("tools", ops, why, effect)]
