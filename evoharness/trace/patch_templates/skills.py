"""Skill templates: a skill that fires on the failing feature's prompts with the effects that
help it, a skill per negated object scoped to the prompts that negate it, the removal of
skills (not this proposer's own) that fire on the failing prompts, and the routing lever
(``_skills_route_agent``): a skill that routes prompts which only refer to what they need to
an agent with ``route: skills`` (docs/agent-tools.md, "Evolution").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from evoharness.agent.planner import find_lookups
from evoharness.harness.patch import Patch
from evoharness.harness.schema import AgentTool, Harness
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.steps.agent import agent_route
from evoharness.tasks.models import ConstraintType
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    Template,
    _add,
    _drop_each,
    _in_prompts,
    _norm_effect,
    _patch,
    _replace,
    referring_prompts,
)
from evoharness.vocab import plural

#: Names of the skills this proposer's templates add (never removed by ``_skills_drop``).
_OWN_SKILLS: Final = frozenset(
    {
        "counting",
        "count-instances",
        "negation",
        "color-binding",
        "text-rendering",
        "long-prompt",
        "spatial-layout",
        "adherence",
        "lookup-routing",
    }
)

#: Name of the skill the routing lever adds (``_skills_route_agent``).
ROUTE_SKILL: Final = "lookup-routing"
#: (lookup kind, phrasing, regex) the routing lever's triggers are built from: the
#: phrasings the agent's rule planner recognises (``evoharness.agent.planner.find_lookups``),
#: each matched inside the lookup's span of a failing prompt; case-insensitive.
LOOKUP_PHRASINGS: Final = (
    ("colour", "in the colour of", r"\b(?:in|with|of)\s+the\s+colou?r\s+of\b"),
    ("colour", "the same colour as", r"\bthe\s+same\s+colou?r\s+(?:as|of)\b"),
    ("colour", "coloured like", r"\bcolou?red\s+like\b"),
    ("count", "as many X as", r"\bas\s+many\s+[a-z][a-z -]*?\s+as\b"),
    (
        "used_with",
        "the object used with",
        r"\b(?:object|thing|tool|item)\s+(?:that\s+is\s+|you\s+)?used\s+with\b",
    ),
)
_ROUTE_EXTRACTOR: Final = RuleExtractor()


def _skill(
    name: str, feature: str, effects: Callable[[Harness], list[dict[str, Any]]], body: str
) -> Callable[[Harness, FailureCluster], list[Patch]]:
    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        eff = effects(h)
        if not eff:
            return []
        for i, s in enumerate(h.skills.skills):
            if s.name == name:
                have = [e.model_dump(mode="json") for e in s.effects]
                extra = [e for e in eff if _norm_effect(e) not in [_norm_effect(x) for x in have]]
                if not extra:
                    return []
                return [
                    _patch(
                        "skills",
                        [_add(f"/skills/skills/{i}/effects/-", e) for e in extra],
                        f"skill {name} lacks {[e['kind'] for e in extra]} for {feature} prompts",
                        f"{feature} prompts compile with the added effects",
                    )
                ]
        skill = {
            "name": name,
            "description": f"Fires on prompts with {feature}; {body.split('.')[0].lower()}.",
            "triggers": [{"kind": "feature", "value": feature}],
            "effects": eff,
            "priority": 5,
            "body": body,
        }
        return [
            _patch(
                "skills",
                [_add("/skills/skills/-", skill)],
                f"no skill handles {feature} prompts; {name} applies {[e['kind'] for e in eff]}",
                f"{feature} prompts compile with the skill's effects",
            )
        ]

    return make


def _skill_scoped_negation(h: Harness, c: FailureCluster) -> list[Patch]:
    """A skill per negated object: fires only on prompts that negate it ("no X", "without X",
    "not X"), adds X to that request's negative prompt."""
    out: list[Patch] = []
    names = {s.name for s in h.skills.skills}
    for obj in _in_prompts(c, ConstraintType.negative)[:4]:
        name = f"exclude-{obj.replace(' ', '-')}"
        if name in names:
            continue
        forms = "|".join(re.escape(f) for f in dict.fromkeys((obj, plural(obj))))
        skill = {
            "name": name,
            "description": f"Fires on prompts that exclude {obj}; puts it in the negative prompt.",
            "triggers": [
                {"kind": "regex", "value": rf"(?i)\b(no|without|not)\b[^.,;]*?\b({forms})\b"}
            ],
            "effects": [{"kind": "negative_terms", "value": obj}],
            "priority": 6,
            "body": f"When the prompt says there is no {obj}, do not draw one.",
        }
        out.append(
            _patch(
                "skills",
                [_add("/skills/skills/-", skill)],
                f"prompts that exclude {obj} still show one: a negated word in the prompt "
                "conditions the generator towards it; a negative prompt, scoped to the prompts "
                "that negate it, pushes it away",
                f"{obj} no longer drawn where the prompt excludes it; other prompts unchanged",
            )
        )
    return out


def _skills_drop(feature: str) -> Template:
    """Remove skills that fire on ``feature`` prompts (always-on skills included) other than
    this proposer's own templates (narrowing by removal; the gate decides)."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        picked = [
            (i, f"skill {sk.name!r}", f"skill {sk.name!r}")
            for i, sk in enumerate(h.skills.skills)
            if (
                not sk.triggers
                or any(t.kind == "feature" and t.value == feature for t in sk.triggers)
            )
            and sk.name not in _OWN_SKILLS
            and not sk.name.startswith("exclude-")
        ]
        return _drop_each(
            "skills", "/skills/skills", picked, feature, "its effects may be what breaks them"
        )

    return make


def _phrasings(prompts: list[str]) -> list[tuple[str, str, str]]:
    """The ``LOOKUP_PHRASINGS`` rows that match a lookup of ``prompts`` (each lookup's span,
    ``find_lookups``), in first-seen order, each once."""
    out: list[tuple[str, str, str]] = []
    for p in prompts:
        for lk in find_lookups(p):
            span = p[lk.start : lk.end]
            for row in LOOKUP_PHRASINGS:
                if row[0] == lk.kind and re.search(row[2], span, re.IGNORECASE):
                    if row not in out:
                        out.append(row)
                    break
    return out


def _skills_route_agent(h: Harness, c: FailureCluster) -> list[Patch]:
    """The routing lever: when the harness's enabled agent has ``route: skills`` and the
    cluster's failing prompts that refer to what they need (``_common.referring_prompts``,
    prompt text only) are routed to it by no active skill (``agent_route``, the routing the
    runtime does before the agent runs, with the rule extractor), add the skill
    ``ROUTE_SKILL`` (a regex trigger per lookup phrasing found, ``LOOKUP_PHRASINGS``; effect
    ``use_tool: <agent>``; priority above every other skill so ``max_active`` keeps it), or
    widen it with the phrasings its triggers lack. ``[]`` when no failing prompt refers to
    anything, the agent is absent, disabled or routed ``always``, or every referring prompt
    is already routed."""
    agent = next((t for t in h.tools.tools if isinstance(t, AgentTool) and t.enabled), None)
    if agent is None or agent.route != "skills":
        return []
    unrouted = [p for p in referring_prompts(c) if agent_route(h, p, _ROUTE_EXTRACTOR) is None]
    rows = _phrasings(unrouted)
    if not rows:
        return []
    shown = "; ".join(f'"{p}"' for p in unrouted[:2])
    kinds = ", ".join(dict.fromkeys(k for k, _, _ in rows))
    why = (
        f"the failing prompts only refer to a {kinds} ({shown}) and no skill routes them to "
        f"the agent {agent.name!r}: the generator draws the thing named, not what it stands "
        "for; a skill that fires on the lookup wording runs the agent before generation"
    )
    effect = "prompts with the lookup wording are resolved by the agent; others unchanged"
    top = max([s.priority + 1 for s in h.skills.skills if s.name != ROUTE_SKILL], default=0)
    for i, sk in enumerate(h.skills.skills):
        if sk.name != ROUTE_SKILL:
            continue
        have = {t.value for t in sk.triggers if t.kind == "regex"}
        ops: list[dict[str, Any]] = [
            _add(f"/skills/skills/{i}/triggers/-", {"kind": "regex", "value": f"(?i){rx}"})
            for _, _, rx in rows
            if f"(?i){rx}" not in have
        ]
        if not any(e.kind == "use_tool" and e.value == agent.name for e in sk.effects):
            ops.append(
                _add(f"/skills/skills/{i}/effects/-", {"kind": "use_tool", "value": agent.name})
            )
        if sk.priority < top:
            ops.append(_replace(f"/skills/skills/{i}/priority", max(10, top)))
        return [_patch("skills", ops, why, effect)] if ops else []
    named = ", ".join(f'"{ph}"' for _, ph, _ in rows)
    skill = {
        "name": ROUTE_SKILL,
        "description": f"Fires on prompts that only refer to a {kinds} ({named}); runs the "
        f"agent {agent.name!r} to look it up.",
        "triggers": [{"kind": "regex", "value": f"(?i){rx}"} for _, _, rx in rows],
        "effects": [{"kind": "use_tool", "value": agent.name}],
        "priority": max(10, top),
        "body": (
            f"Prompts that only refer to a {kinds} ({named}) need a lookup before "
            "generation: a text encoder draws the thing they name, not its colour, count or "
            "partner object, so the agent searches for it and rewrites the prompt with what "
            "it means."
        ),
    }
    return [_patch("skills", [_add("/skills/skills/-", skill)], why, effect)]
