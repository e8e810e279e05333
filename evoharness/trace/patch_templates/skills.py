"""Skill templates: a skill that fires on the failing feature's prompts with the effects that
help it, a skill per negated object scoped to the prompts that negate it, and the removal of
skills (not this proposer's own) that fire on the failing prompts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import ConstraintType
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    Template,
    _add,
    _drop_each,
    _in_prompts,
    _norm_effect,
    _patch,
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
    }
)


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
