"""The template table: symptom → responsibility → templates, most specific first, then the
removal and narrowing levers of each responsibility (``templates_for``). The agent lever
(``tools._tools_agent``) heads every symptom's tools, and the routing lever
(``skills._skills_route_agent``) every symptom's skills, and the program's wording lever
(``policy._policy_agent_counts``) every symptom's policy: whatever a referring prompt gets
wrong (a colour, a count, an object), they answer only prompts that refer to something. The
reference lever (``tools._tools_image_search``) follows the agent lever: it answers only
prompts that name an object by a material or pattern.
"""

from __future__ import annotations

from typing import Final

from evoharness.trace.patch_templates._common import (
    GOOD_GUIDANCE,
    GOOD_STEPS,
    Template,
    _rewrite_effect,
    _with_layout,
)
from evoharness.trace.patch_templates.memory import (
    _memory_drop_guideline,
    _memory_guideline,
)
from evoharness.trace.patch_templates.middleware import (
    _mw_best_of_n,
    _mw_repair,
)
from evoharness.trace.patch_templates.policy import (
    _FEATURE_REWRITES,
    _policy_agent_counts,
    _policy_compress_budget,
    _policy_drop_requested_negatives,
    _policy_drop_rewrite,
    _policy_params,
    _policy_rewrite,
)
from evoharness.trace.patch_templates.skills import (
    _skill,
    _skill_scoped_negation,
    _skills_drop,
    _skills_route_agent,
)
from evoharness.trace.patch_templates.tools import (
    _layout_levers,
    _tools_agent,
    _tools_image_search,
)

#: symptom → the extracted prompt feature it concerns (skill triggers, layout ``when``).
FEATURE: Final[dict[str, str]] = {
    "count_wrong": "count",
    "negation_drawn": "negation",
    "color_leak": "color",
    "color_wrong": "color",
    "text_garbled": "text",
    "object_dropped_long_prompt": "long_prompt",
    "relation_wrong": "position",
    "missing_object": "multi_object",
}


def templates_for(symptom: str) -> dict[str, list[Template]]:
    """The templates for ``symptom`` in every responsibility (most specific first)."""
    f = FEATURE.get(symptom, "multi_object")
    generic_mw: list[Template] = [_mw_best_of_n, _mw_repair]
    spell = _policy_rewrite(
        "spell_counts",
        "text encoders represent number words better than digits; spelled counts are drawn right more often",
        "counts drawn right more often",
    )
    enum_ = _policy_rewrite(
        "enumerate_instances",
        "naming each instance makes the encoder draw each one",
        "counts drawn right more often",
    )
    move_neg = _policy_rewrite(
        "move_negations",
        'a word in the prompt conditions the generator towards it even after "no"; moving negated objects to the negative prompt pushes them away',
        "negated objects no longer appear",
    )
    bind = _policy_rewrite(
        "bind_attributes",
        "attributes leak between objects named in one clause; one clause per coloured object binds each colour to its object",
        "each object keeps its colour",
    )
    compress = _policy_rewrite(
        "compress",
        "CLIP's text encoder reads 77 tokens; objects named later are ignored",
        "long prompts keep every object",
    )
    quote = _policy_rewrite(
        "quote_text",
        "text to render is followed more reliably when quoted",
        "fewer garbled characters",
    )
    table: dict[str, dict[str, list[Template]]] = {
        "count_wrong": {
            "policy": [spell, enum_, _policy_params],
            "tools": _layout_levers("count"),
            "skills": [
                _skill(
                    "counting",
                    "count",
                    lambda h: [_rewrite_effect("spell_counts"), *_with_layout(h)],
                    "Spell counts as words and lay out one box per instance.",
                ),
                _skill(
                    "count-instances",
                    "count",
                    lambda h: [_rewrite_effect("enumerate_instances")],
                    "Name each counted instance separately.",
                ),
            ],
            "middleware": generic_mw,
        },
        "negation_drawn": {
            "policy": [move_neg],
            "skills": [
                _skill(
                    "negation",
                    "negation",
                    lambda h: [_rewrite_effect("move_negations")],
                    "Move negated objects into the negative prompt.",
                ),
                _skill_scoped_negation,
            ],
            "middleware": [_mw_repair, _mw_best_of_n],
        },
        "color_leak": {
            "policy": [bind, _policy_params],
            "tools": _layout_levers("color"),
            "skills": [
                _skill(
                    "color-binding",
                    "color",
                    lambda h: [_rewrite_effect("bind_attributes"), *_with_layout(h)],
                    "One clause per coloured object.",
                )
            ],
            "middleware": generic_mw,
        },
        "text_garbled": {
            "policy": [quote],
            "tools": _layout_levers("text"),
            "skills": [
                _skill(
                    "text-rendering",
                    "text",
                    lambda h: [_rewrite_effect("quote_text"), *_with_layout(h)],
                    "Quote the text and render it in a layout box.",
                ),
            ],
            "middleware": [_mw_repair, _mw_best_of_n],
        },
        "object_dropped_long_prompt": {
            "policy": [compress, _policy_compress_budget],
            "tools": _layout_levers("long_prompt"),
            "skills": [
                _skill(
                    "long-prompt",
                    "long_prompt",
                    lambda h: [_rewrite_effect("compress")],
                    "Compress long prompts to fit the text encoder.",
                )
            ],
            "middleware": generic_mw,
        },
        "relation_wrong": {
            "policy": [_policy_params],
            "tools": _layout_levers("position"),
            "skills": [
                _skill(
                    "spatial-layout",
                    "position",
                    lambda h: (
                        _with_layout(h)
                        or [{"kind": "set_params", "params": {"guidance_scale": GOOD_GUIDANCE}}]
                    ),
                    "Lay out related objects in boxes.",
                )
            ],
            "middleware": generic_mw,
        },
    }
    table["color_wrong"] = table["color_leak"]
    spec = table.get(
        symptom,
        {
            "policy": [_policy_params],
            "tools": _layout_levers(f),
            "skills": [
                _skill(
                    "adherence",
                    f,
                    lambda h: [
                        {
                            "kind": "set_params",
                            "params": {"guidance_scale": GOOD_GUIDANCE, "steps": GOOD_STEPS},
                        }
                    ],
                    "Raise guidance and steps for hard prompts.",
                )
            ],
            "middleware": generic_mw,
        },
    )
    spec = dict(spec)
    spec.setdefault("tools", _layout_levers(f))
    spec.setdefault("policy", [_policy_params])
    spec.setdefault("skills", [])
    spec.setdefault("middleware", generic_mw)
    # the agent lever first: it proposes only for prompts that refer to a well-known thing
    spec["tools"] = [_tools_agent, _tools_image_search, *spec["tools"]]
    spec["skills"] = [_skills_route_agent, *spec["skills"]]
    spec["policy"] = [_policy_agent_counts, *spec["policy"]]
    # removal and narrowing levers come after the additive ones of each responsibility
    spec["policy"] = [*spec["policy"], _policy_drop_requested_negatives]
    spec["policy"] += [_policy_drop_rewrite(k) for k in _FEATURE_REWRITES.get(f, ())]
    spec["skills"] = [*spec["skills"], _skills_drop(f)]
    spec["memory"] = [_memory_guideline(f), _memory_drop_guideline(f)]
    return spec
