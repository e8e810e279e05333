"""The Tools responsibility at compile time (step 5): a ``layout_planner`` runs when a feature
in its ``when`` is present and the prompt names at least ``min_objects`` objects (or shows
text), or when a skill, memory or repair asks for it (deterministic planner,
``evoharness.runtime.layout``; ``planner: llm`` uses the ``LayoutPlanner`` backend, falling back
to deterministic, traced). ``reference_retrieval`` and ``knowledge_lookup`` call their backends
when given and are skipped (traced) otherwise. Disabled tools never run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evoharness.harness.schema import (
    Harness,
    KnowledgeLookupTool,
    LayoutPlannerTool,
    ReferenceRetrievalTool,
)
from evoharness.program import ImageRef
from evoharness.runtime.layout import plan_layout
from evoharness.runtime.steps import Rec, Requests
from evoharness.runtime.tool_backends import LayoutPlanner, ToolBackends
from evoharness.tasks.models import Constraint, ConstraintType


def plan(
    tool: LayoutPlannerTool,
    prompt: str,
    constraints: list[Constraint],
    layout_planner: LayoutPlanner | None,
) -> tuple[list[Any], dict[str, Any], str]:
    """(layout items, planner details, which planner ran) for one layout tool."""
    if tool.planner == "llm":
        if layout_planner is not None:
            items = list(layout_planner.plan(prompt, constraints, tool.margin))
            return items, {}, "llm"
        items, details = plan_layout(constraints, tool.margin)
        return items, details, "deterministic (fallback: no llm planner)"
    items, details = plan_layout(constraints, tool.margin)
    return items, details, "deterministic"


@dataclass(frozen=True)
class ToolInput:
    """What the tools read of the request being compiled: the user's ``prompt``, the
    compiled ``text`` so far, the policy's ``constraints`` and prompt ``features``, and the
    request's own ``references`` (None: none)."""

    prompt: str
    text: str
    constraints: list[Constraint]
    features: set[str]
    references: Sequence[ImageRef] | None = None


def run_tools(
    harness: Harness,
    inp: ToolInput,
    req: Requests,
    rec: Rec,
    backends: ToolBackends | None = None,
) -> tuple[str, list[Any] | None, list[ImageRef]]:
    """Run the declared tools in order on the compiled ``inp.text``, calling ``backends``
    (None: none given). Returns ``(text, layout, references)``: the text with any knowledge
    note appended, the layout items (None when no planner ran or planned nothing) and the
    request's references plus retrieved ones. Traces one record per tool that ran or was
    skipped, and ``tools/references`` when any reference goes to the program."""
    prompt, text, constraints, features = inp.prompt, inp.text, inp.constraints, inp.features
    references = inp.references
    tb = backends or ToolBackends()
    layout_planner, reference_retriever, knowledge = (
        tb.layout_planner,
        tb.reference_retriever,
        tb.knowledge,
    )
    layout: list[Any] | None = None
    refs: list[ImageRef] = list(references or [])
    forced: dict[str, str] = {}
    for name, src in req.tools:
        forced.setdefault(name, src)
    n_objects = sum(
        1 for c in constraints if c.type in (ConstraintType.object, ConstraintType.count)
    )
    for tool in harness.tools.tools:
        if not tool.enabled:
            if tool.name in forced:
                rec("tools", tool.kind, tool=tool.name, ran=False, reason="tool is disabled")
            continue
        if isinstance(tool, LayoutPlannerTool):
            if req.no_layout:
                rec(
                    "tools",
                    "layout_planner",
                    tool=tool.name,
                    ran=False,
                    reason=f"no layout requested by {req.no_layout[0]}",
                )
                continue
            matched = sorted(set(tool.when) & features)
            has_text = "text" in features
            auto = bool(matched) and (n_objects >= tool.min_objects or has_text)
            if not auto and tool.name not in forced:
                continue
            reason = f"features {matched}" if auto else f"requested by {forced[tool.name]}"
            items, details, planner = plan(tool, prompt, constraints, layout_planner)
            if items:
                layout = (layout or []) + items
            rec(
                "tools",
                "layout_planner",
                tool=tool.name,
                planner=planner,
                reason=reason,
                input=[c.constraint_id for c in constraints],
                output=[i.model_dump(mode="json", exclude_none=True) for i in items],
                details=details,
            )
        elif isinstance(tool, ReferenceRetrievalTool):
            if reference_retriever is None:
                rec(
                    "tools",
                    "reference_retrieval",
                    tool=tool.name,
                    ran=False,
                    reason="no reference retriever configured",
                )
                continue
            got = reference_retriever.retrieve(prompt, constraints, tool.source, tool.top_k)
            got = list(got)[: tool.top_k]
            refs.extend(got)
            rec(
                "tools",
                "reference_retrieval",
                tool=tool.name,
                ran=True,
                source=tool.source,
                output=[r.model_dump(mode="json") for r in got],
            )
        elif isinstance(tool, KnowledgeLookupTool):
            if knowledge is None:
                rec(
                    "tools",
                    "knowledge_lookup",
                    tool=tool.name,
                    ran=False,
                    reason="no knowledge lookup configured",
                )
                continue
            note = knowledge.lookup(prompt, tool.source)
            if note and note.strip():
                new = f"{text.rstrip().rstrip('.')}. {note.strip()}"
                rec(
                    "tools",
                    "knowledge_lookup",
                    tool=tool.name,
                    ran=True,
                    input=text,
                    output=new,
                )
                text = new
            else:
                rec("tools", "knowledge_lookup", tool=tool.name, ran=True, output=None)

    if refs:
        rec(
            "tools",
            "references",
            request=[r.model_dump(mode="json") for r in references or []],
            output=[r.model_dump(mode="json") for r in refs],
        )
    return text, layout, refs


__all__ = ["ToolInput", "plan", "run_tools"]
