"""The Skills responsibility at compile time (step 3): every skill whose triggers match (any
trigger; a skill without triggers is always on) is a candidate; the ``skill_routing`` stage's
``max_active`` (default 3 when the stage is absent) keeps the highest ``priority`` ones (ties
by name). Effects: ``rewrite``, ``negative_terms``, ``append_text``, ``set_params``,
``use_tool``, added to the compile requests."""

from __future__ import annotations

import re
from typing import Any

from evoharness.harness.schema import Harness, Skill, SkillRoutingStage
from evoharness.runtime.steps import Rec, Requests, as_list, word_in


def route(harness: Harness, prompt: str, features: set[str], rec: Rec) -> list[Skill]:
    """The active skills, highest priority first; traces ``skills/route`` per candidate (fired,
    or dropped by ``max_active``)."""
    stage = next(
        (s for s in harness.middleware.stages if isinstance(s, SkillRoutingStage)),
        SkillRoutingStage(),
    )
    candidates: list[tuple[Skill, list[str]]] = []
    for skill in harness.skills.skills:
        reasons: list[str] = []
        for t in skill.triggers:
            if t.kind == "feature" and t.value in features:
                reasons.append(f"feature:{t.value}")
            elif t.kind == "keyword" and word_in(t.value, prompt):
                reasons.append(f"keyword:{t.value}")
            elif t.kind == "regex" and re.search(t.value, prompt):
                reasons.append(f"regex:{t.value}")
        if not skill.triggers:
            reasons.append("always on (no triggers)")
        if reasons:
            candidates.append((skill, reasons))
    candidates.sort(key=lambda c: (-c[0].priority, c[0].name))
    active = candidates[: stage.max_active]
    for i, (skill, reasons) in enumerate(candidates):
        rec(
            "skills",
            "route",
            skill=skill.name,
            fired=i < stage.max_active,
            reasons=reasons,
            priority=skill.priority,
            **({} if i < stage.max_active else {"dropped": f"max_active={stage.max_active}"}),
        )
    return [s for s, _ in active]


def apply_effects(active: list[Skill], req: Requests, rec: Rec) -> None:
    """Add the active skills' effects to ``req`` in order; traces ``skills/effect`` each."""
    for skill in active:
        for ei, eff in enumerate(skill.effects):
            src = f"skill:{skill.name}"
            out: dict[str, Any] = {}
            if eff.kind == "rewrite" and eff.value:
                req.rewrites.append((eff.value, src))
                out = {"rewrite": eff.value}
            elif eff.kind == "negative_terms":
                terms = as_list(eff.value)
                req.negative.extend((t, src) for t in terms)
                out = {"negative_terms": terms}
            elif eff.kind == "append_text" and eff.value:
                req.append.append((eff.value, src))
                out = {"append_text": eff.value}
            elif eff.kind == "set_params":
                for k, v in sorted(eff.params.items()):
                    req.params.append((k, src, v))
                out = {"params": dict(sorted(eff.params.items()))}
            elif eff.kind == "use_tool" and eff.value:
                req.tools.append((eff.value, src))
                out = {"use_tool": eff.value}
            rec("skills", "effect", skill=skill.name, index=ei, kind=eff.kind, output=out)


__all__ = ["apply_effects", "route"]
