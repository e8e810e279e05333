"""The embedded rule-based localizer and patch proposer (TRACE steps 4 and 5).

Pure functions over ``FailureCluster`` records and a ``Harness``; no I/O, deterministic.

**Localizer** (``localize``): for each cluster, a score per responsibility =
``prior[symptom][responsibility] x availability`` (+ ``HINT_BONUS`` for the cluster's
responsibility hint), and a ``no_patch`` score for failures that look like generator noise.
Availability is 1 when the responsibility still has an untried template that changes the
harness for this symptom, else ``EXHAUSTED`` (its levers are already pulled, so more of the same
will not help). Scores are normalised to sum 1; ``chosen`` is the argmax.

The priors encode which lever usually fixes which failure mode of a diffusion generator
(general text-to-image knowledge, not a model of any one generator): spatial layouts
(GLIGEN, Li et al. 2023; LayoutGPT, Feng et al. 2023) help counts, relations and object
placement, and a layout that carries colours helps attribute binding; spelled-out counts help
counting a little; a negated object named in the prompt tends to be drawn, so moving it to the
negative prompt helps (classifier-free guidance with a negative prompt, Ho & Salimans 2022);
one clause per coloured object reduces attribute leakage (Feng et al. 2023, "Training-free
structured diffusion guidance"); CLIP's text encoder reads only 77 tokens (Radford et al.
2021), so compression keeps late objects; rendered text is fragile and differs between
samples, so verify-and-repair with a new seed or a text layout helps; best-of-N with a verifier
reduces random misses (Karthik et al. 2023, "If at first you don't succeed, try, try again");
guidance/steps are a small general lever. They are design choices, not fitted numbers, and
are meant to be overridden by an LLM localizer or replaced after evidence.

``no_patch`` raw score (generator noise, docs/architecture.md step 4) =
``NOISE_WEIGHT x flip_rate x max(0, 1 - 2 x failure_rate)`` + ``SINGLETON_NOISE`` when the
cluster has a single failing verdict: a constraint that fails on a minority of seeds and passes
on others is the signature of sampling noise; at a failure rate of 50% or more it is not.

**Proposer** (``propose``): maps the cluster's symptom to patch templates in every
responsibility (module-level ``TEMPLATES`` documents them). Where several levers could fix a
cluster it proposes several (policy rewrite, tool, skill, middleware, memory) and the gate
chooses; the layout lever is proposed per feature (a planner that runs only on the failing
feature) and, separately, as the combination (count, position and colour). Templates can
also *remove or narrow* what is there: drop negative terms that name objects the failing
prompts ask for, remove a memory guideline or a skill that fires on the failing prompts, drop
a rewrite. Negative terms are never copied from constraint subjects (benchmark labels) into
the global negative prompt: they come from what a failing *prompt* negates, read by the fixed
rule extractor, in a skill scoped to prompts that negate it. Candidates come from the chosen
responsibility first, then the others by score; each is applied to the harness with
``evoharness.harness.patch.apply_patch`` (and the runtime's static compile checks,
``evoharness.runtime.runtime.check_harness``) and dropped when it fails, leaves the harness unchanged
(no-op) or duplicates an earlier candidate, so every returned patch is valid, distinct and new.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.runtime.extract import RuleExtractor
from evoharness.tasks.models import ConstraintType
from evoharness.trace.models import Attribution, FailureCluster
from evoharness.trace.schema_levers import distinct_valid
from evoharness.vocab import plural

RESPONSIBILITIES: Final = tuple(r.value for r in Responsibility)
SCORE_KEYS: Final = (*RESPONSIBILITIES, "no_patch")

#: Added to the cluster's responsibility hint (the clustering's prior, ``trace.cluster``).
HINT_BONUS: Final = 0.25
#: Availability factor of a responsibility with no untried template for the symptom.
EXHAUSTED: Final = 0.05
#: Weight of the noise signature in the ``no_patch`` score.
NOISE_WEIGHT: Final = 1.5
#: Extra ``no_patch`` score for a cluster with one failing verdict (one flip is not a trend).
SINGLETON_NOISE: Final = 0.8

#: symptom → responsibility → prior score (see module docstring for the sources).
PRIORS: Final[dict[str, dict[str, float]]] = {
    "count_wrong": {"tools": 1.0, "skills": 0.7, "policy": 0.5, "middleware": 0.4, "memory": 0.15},
    "negation_drawn": {
        "policy": 1.0,
        "skills": 0.6,
        "middleware": 0.3,
        "memory": 0.2,
        "tools": 0.05,
    },
    "color_leak": {"policy": 1.0, "tools": 0.8, "skills": 0.6, "middleware": 0.3, "memory": 0.15},
    "color_wrong": {"policy": 0.8, "tools": 0.7, "middleware": 0.5, "skills": 0.5, "memory": 0.15},
    "text_garbled": {"middleware": 1.0, "skills": 0.8, "tools": 0.6, "policy": 0.5, "memory": 0.1},
    "object_dropped_long_prompt": {
        "policy": 1.0,
        "skills": 0.6,
        "tools": 0.5,
        "middleware": 0.2,
        "memory": 0.15,
    },
    "relation_wrong": {
        "tools": 1.0,
        "skills": 0.6,
        "middleware": 0.4,
        "policy": 0.2,
        "memory": 0.15,
    },
    "missing_object": {
        "middleware": 1.0,
        "policy": 0.6,
        "tools": 0.5,
        "skills": 0.3,
        "memory": 0.2,
    },
}
#: Priors for symptoms not listed above (``<type>_wrong`` and anything new).
GENERIC_PRIOR: Final[dict[str, float]] = {
    "middleware": 0.8,
    "policy": 0.6,
    "skills": 0.4,
    "tools": 0.3,
    "memory": 0.2,
}

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

#: Tuned generation parameters: guidance 7.5 is Stable Diffusion's default (Rombach et al.
#: 2022), where prompt adherence is high before over-saturation sets in at large scales;
#: 40 steps is well above the few-step regime where samples stay noisy.
GOOD_GUIDANCE: Final = 7.5
GOOD_STEPS: Final = 40

_LAYOUT = "layout_planner"
Template = Callable[[Harness, FailureCluster], list[Patch]]
_EXTRACTOR = RuleExtractor()
#: The features a combined layout lever switches on together.
LAYOUT_COMBINED: Final = ("color", "count", "position")


# ------------------------------------------------------------------------------ helpers


def _add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def _replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def _patch(resp: str, ops: list[dict[str, Any]], why: str, effect: str) -> Patch:
    return Patch(
        responsibility=Responsibility(resp), ops=ops, rationale=why, expected_effect=effect
    )


def _subjects(cluster: FailureCluster) -> list[str]:
    out: list[str] = []
    for ex in cluster.examples:
        s = ex.get("subject")
        if isinstance(s, str) and s.strip() and s.strip().lower() not in out:
            out.append(s.strip().lower())
    return out


def _layout_tool(h: Harness) -> tuple[int, Any] | None:
    for i, t in enumerate(h.tools.tools):
        if t.kind == _LAYOUT:
            return i, t
    return None


def _stage(h: Harness, kind: str) -> tuple[int, Any] | None:
    for i, s in enumerate(h.middleware.stages):
        if s.kind == kind:
            return i, s
    return None


# ------------------------------------------------------------------ templates per responsibility


def _policy_rewrite(
    kind: str, why: str, effect: str
) -> Callable[[Harness, FailureCluster], list[Patch]]:
    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        for i, r in enumerate(h.policy.rewrites):
            if r.kind == kind:
                if r.enabled:
                    return []
                return [
                    _patch("policy", [_replace(f"/policy/rewrites/{i}/enabled", True)], why, effect)
                ]
        return [
            _patch(
                "policy", [_add("/policy/rewrites/-", {"kind": kind, "enabled": True})], why, effect
            )
        ]

    return make


def _negated_in_prompts(c: FailureCluster) -> list[str]:
    """Objects the cluster's failing prompts negate, read by the fixed rule extractor from the
    prompt text (never the constraint labels)."""
    out: list[str] = []
    for ex in c.examples:
        prompt = ex.get("prompt")
        if not isinstance(prompt, str):
            continue
        for con in _EXTRACTOR.extract(prompt):
            if con.type is ConstraintType.negative and con.subject and con.subject not in out:
                out.append(con.subject)
    return out


def _requested_in_prompts(c: FailureCluster) -> list[str]:
    """Objects the cluster's failing prompts ask for (object and count constraints the rule
    extractor reads from the prompt text)."""
    out: list[str] = []
    for ex in c.examples:
        prompt = ex.get("prompt")
        if not isinstance(prompt, str):
            continue
        for con in _EXTRACTOR.extract(prompt):
            if con.type in (ConstraintType.object, ConstraintType.count) and con.subject:
                if con.subject not in out:
                    out.append(con.subject)
    return out


def _skill_scoped_negation(h: Harness, c: FailureCluster) -> list[Patch]:
    """A skill per negated object: fires only on prompts that negate it ("no X", "without X",
    "not X"), adds X to that request's negative prompt."""
    out: list[Patch] = []
    names = {s.name for s in h.skills.skills}
    for obj in _negated_in_prompts(c)[:4]:
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


def _policy_drop_requested_negatives(h: Harness, c: FailureCluster) -> list[Patch]:
    """Remove global negative terms that name an object the failing prompts ask for."""
    asked = set(_requested_in_prompts(c))
    idx = [
        i
        for i, t in enumerate(h.policy.negative_terms)
        if {t.lower().strip(), t.lower().strip().rstrip("s")} & (asked | {plural(a) for a in asked})
    ]
    if not idx:
        return []
    terms = [h.policy.negative_terms[i] for i in idx]
    return [
        _patch(
            "policy",
            [
                {"op": "remove", "path": f"/policy/negative_terms/{i}"}
                for i in sorted(idx, reverse=True)
            ],
            f"the global negative prompt lists {terms}, which the failing prompts ask for: a "
            "negative prompt suppresses the object on every request",
            f"{terms} drawn again where requested",
        )
    ]


def _policy_drop_rewrite(kind: str) -> Template:
    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        for i, r in enumerate(h.policy.rewrites):
            if r.kind == kind and r.enabled:
                return [
                    _patch(
                        "policy",
                        [_replace(f"/policy/rewrites/{i}/enabled", False)],
                        f"the {kind} rewrite acts on the failing prompts and the failures persist; "
                        "the gate decides whether the prompt is better without it",
                        "failing prompts compiled without the rewrite",
                    )
                ]
        return []

    return make


def _policy_params(h: Harness, c: FailureCluster) -> list[Patch]:
    p = h.policy.params
    out: list[Patch] = []
    if p.guidance_scale < GOOD_GUIDANCE:
        out.append(
            _patch(
                "policy",
                [_replace("/policy/params/guidance_scale", GOOD_GUIDANCE)],
                f"guidance {p.guidance_scale} is below the adherence sweet spot {GOOD_GUIDANCE}",
                "better prompt adherence on every constraint type",
            )
        )
    if p.steps < GOOD_STEPS:
        out.append(
            _patch(
                "policy",
                [_replace("/policy/params/steps", GOOD_STEPS)],
                f"{p.steps} steps leave sampling noise; {GOOD_STEPS} steps reduce misses",
                "fewer random misses, at more generator-seconds",
            )
        )
    return out


def _policy_compress_budget(h: Harness, c: FailureCluster) -> list[Patch]:
    if h.policy.max_prompt_tokens <= 60:
        return []
    ops: list[dict[str, Any]] = [_replace("/policy/max_prompt_tokens", 60)]
    if not any(r.kind == "compress" for r in h.policy.rewrites):
        ops.insert(0, _add("/policy/rewrites/-", {"kind": "compress", "enabled": True}))
    return [
        _patch(
            "policy",
            ops,
            "objects past CLIP's 77-token window are dropped; compress to 60 tokens for margin",
            "long prompts keep every object",
        )
    ]


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


def _norm_effect(e: dict[str, Any]) -> tuple[str, Any, tuple[tuple[str, Any], ...]]:
    return (e.get("kind", ""), e.get("value"), tuple(sorted((e.get("params") or {}).items())))


def _with_layout(h: Harness) -> list[dict[str, Any]]:
    found = _layout_tool(h)
    return [{"kind": "use_tool", "value": found[1].name}] if found else []


def _rewrite_effect(kind: str) -> dict[str, Any]:
    return {"kind": "rewrite", "value": kind}


def _mw_repair(h: Harness, c: FailureCluster) -> list[Patch]:
    found = _stage(h, "verify_and_repair")
    why = (
        "failures that differ between samples are caught by checking the image and "
        "re-generating with the failing evidence and a new seed"
    )
    if found is None:
        return [
            _patch(
                "middleware",
                [_add("/middleware/stages/-", {"kind": "verify_and_repair", "repair_budget": 2})],
                why,
                "failures that flip with the seed are repaired",
            )
        ]
    i, s = found
    if s.repair_budget >= 4:
        return []
    return [
        _patch(
            "middleware",
            [_replace(f"/middleware/stages/{i}/repair_budget", min(8, s.repair_budget + 2))],
            why + "; the current budget is spent",
            "more failing executions repaired",
        )
    ]


def _mw_best_of_n(h: Harness, c: FailureCluster) -> list[Patch]:
    found = _stage(h, "best_of_n")
    why = (
        "samples differ in which objects they miss; generating several and keeping the one "
        "the verifier scores best reduces random misses"
    )
    if found is None:
        return [
            _patch(
                "middleware",
                [_add("/middleware/stages/-", {"kind": "best_of_n", "n": 2})],
                why,
                "random misses drop, at n× generator-seconds",
            )
        ]
    i, s = found
    if s.n >= 4:
        return []
    return [
        _patch(
            "middleware",
            [_replace(f"/middleware/stages/{i}/n", s.n + 1)],
            why,
            "random misses drop further",
        )
    ]


_GUIDELINES: Final[dict[str, str]] = {
    "count": "Spell every count as a word and give each counted object its own box.",
    "negation": "Never name an excluded object in the positive prompt; list it in the negative prompt.",
    "color": "Give each coloured object its own clause so colours do not leak between objects.",
    "text": "Put text to render in double quotes and keep it short.",
    "long_prompt": "Keep the prompt under 77 tokens; drop filler words before object names.",
    "position": "Place related objects with explicit boxes rather than words.",
    "multi_object": "Name every object early in the prompt, each once.",
}


def _memory_drop_guideline(feature: str) -> Template:
    """Remove guidelines that fire on ``feature`` prompts (other than this proposer's own):
    the failures persist with them, the gate decides whether the harness is better without."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        ours = _GUIDELINES.get(feature)
        out: list[Patch] = []
        for i, g in enumerate(h.memory.guidelines):
            if g.trigger == feature and g.text != ours:
                out.append(
                    _patch(
                        "memory",
                        [{"op": "remove", "path": f"/memory/guidelines/{i}"}],
                        f"the stored guideline {g.text!r} fires on the failing {feature} prompts "
                        "and they still fail; a misleading guideline is worse than none",
                        f"{feature} prompts compiled without the guideline",
                    )
                )
        return out

    return make


def _skills_drop(feature: str) -> Template:
    """Remove skills that fire on ``feature`` prompts (always-on skills included) other than
    this proposer's own templates (narrowing by removal; the gate decides)."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        out: list[Patch] = []
        for i, sk in enumerate(h.skills.skills):
            fires = not sk.triggers or any(
                t.kind == "feature" and t.value == feature for t in sk.triggers
            )
            if fires and sk.name not in _OWN_SKILLS and not sk.name.startswith("exclude-"):
                out.append(
                    _patch(
                        "skills",
                        [{"op": "remove", "path": f"/skills/skills/{i}"}],
                        f"skill {sk.name!r} fires on the failing {feature} prompts and they "
                        "still fail; its effects may be what breaks them",
                        f"{feature} prompts compiled without skill {sk.name!r}",
                    )
                )
        return out

    return make


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


def _memory_guideline(feature: str) -> Callable[[Harness, FailureCluster], list[Patch]]:
    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        text = _GUIDELINES.get(feature, "Check every constraint of the prompt before finishing.")
        if any(g.trigger == feature and g.text == text for g in h.memory.guidelines):
            return []
        ops: list[dict[str, Any]] = [
            _add("/memory/guidelines/-", {"trigger": feature, "text": text})
        ]
        if not h.memory.enabled:
            ops.append(_replace("/memory/enabled", True))
        return [
            _patch(
                "memory",
                ops,
                f"a stored guideline for {feature} prompts",
                f"{feature} prompts get the guideline",
            )
        ]

    return make


#: feature → rewrites that delete or move words and so can lose requested content on those
#: prompts (candidates for ``_policy_drop_rewrite``; never a rewrite that the same symptom's
#: additive templates enable, so add and drop cannot alternate on one cluster).
_FEATURE_REWRITES: Final[dict[str, tuple[str, ...]]] = {
    "count": ("compress",),
    "color": ("compress",),
    "position": ("compress",),
    "multi_object": ("compress", "move_negations"),
}


def _templates(symptom: str) -> dict[str, list[Template]]:
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
    # removal and narrowing levers come after the additive ones of each responsibility
    spec["policy"] = [*spec["policy"], _policy_drop_requested_negatives]
    spec["policy"] += [_policy_drop_rewrite(k) for k in _FEATURE_REWRITES.get(f, ())]
    spec["skills"] = [*spec["skills"], _skills_drop(f)]
    spec["memory"] = [_memory_guideline(f), _memory_drop_guideline(f)]
    return spec


#: For documentation and tests: symptom → responsibility → number of templates.
TEMPLATES: Final[dict[str, dict[str, int]]] = {
    s: {r: len(ts) for r, ts in _templates(s).items()} for s in (*PRIORS, "generic")
}


def _candidates(harness: Harness, cluster: FailureCluster, resp: str) -> list[Patch]:
    """Valid, non-no-op, distinct patches for ``resp`` (``schema_levers.distinct_valid``)."""
    made = (p for tmpl in _templates(cluster.symptom).get(resp, []) for p in tmpl(harness, cluster))
    return distinct_valid(harness, made, lambda p: p)


# ------------------------------------------------------------------------------- public API


def localize(clusters: Sequence[FailureCluster], harness: Harness) -> list[Attribution]:
    """Attribute each cluster to a responsibility or ``no_patch`` (module docstring formula).

    Returns one ``Attribution`` per cluster, in input order, with ``scores`` over
    ``SCORE_KEYS`` summing to 1 and ``reasons`` naming the symptom, hint, exhausted levers and
    the noise signal. Never raises for well-formed clusters.
    """
    out: list[Attribution] = []
    for c in clusters:
        prior = PRIORS.get(c.symptom, GENERIC_PRIOR)
        raw: dict[str, float] = {}
        reasons = [
            f"symptom {c.symptom} on {c.constraint_type} ({len(c.members)} members, failure rate {c.failure_rate:.2f}, flip rate {c.flip_rate:.2f})"
        ]
        exhausted = []
        for r in RESPONSIBILITIES:
            s = prior.get(r, 0.1)
            if not _candidates(harness, c, r):
                s *= EXHAUSTED
                exhausted.append(r)
            if r == c.responsibility_hint:
                s += HINT_BONUS
            raw[r] = s
        if exhausted:
            reasons.append(f"no untried lever in {', '.join(exhausted)}")
        if c.responsibility_hint in RESPONSIBILITIES:
            reasons.append(f"clustering hints {c.responsibility_hint}")
        noise = NOISE_WEIGHT * c.flip_rate * max(0.0, 1.0 - 2.0 * c.failure_rate)
        if c.n_failures <= 1:
            noise += SINGLETON_NOISE
        if len(exhausted) == len(RESPONSIBILITIES):
            noise += 1.0
            reasons.append("every responsibility's levers are pulled: nothing left to patch")
        raw["no_patch"] = noise
        if noise > 0:
            reasons.append(
                f"noise signature {noise:.2f} (fails on a minority of seeds, passes on others)"
            )
        total = sum(raw.values())
        scores = {k: raw[k] / total for k in SCORE_KEYS}
        chosen = max(SCORE_KEYS, key=lambda k: (scores[k], -SCORE_KEYS.index(k)))
        reasons.append(f"chosen {chosen} ({scores[chosen]:.2f})")
        out.append(
            Attribution(cluster_id=c.cluster_id, scores=scores, chosen=chosen, reasons=reasons)
        )
    return out


def propose(
    cluster: FailureCluster,
    attribution: Attribution,
    harness: Harness,
    n: int,
    responsibility: str | None = None,
) -> list[Patch]:
    """Up to ``n`` candidate patches for ``cluster``.

    With ``responsibility`` given, only that responsibility's templates; otherwise the
    attribution's ``chosen`` responsibility first, then the others in score order (scores of
    0 skipped). ``no_patch`` chosen and no ``responsibility`` → ``[]``. Every returned patch
    applies cleanly, changes the harness, and yields a harness no other returned patch yields.
    Raises ``ValueError`` when ``n`` < 0 or ``responsibility`` is not a responsibility.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n == 0:
        return []
    if responsibility is not None:
        order: Iterable[str] = [Responsibility(responsibility).value]
    elif attribution.chosen == "no_patch":
        return []
    else:
        rest = sorted(
            (
                r
                for r in RESPONSIBILITIES
                if r != attribution.chosen and attribution.scores.get(r, 0) > 0
            ),
            key=lambda r: -attribution.scores.get(r, 0.0),
        )
        order = [attribution.chosen, *rest]
    base = harness_id(harness)
    seen = {base}
    out: list[Patch] = []
    for r in order:
        for p in _candidates(harness, cluster, r):
            hid = harness_id(apply_patch(harness, p))
            if hid in seen:
                continue
            seen.add(hid)
            out.append(p)
            if len(out) >= n:
                return out
    return out


__all__ = ["PRIORS", "SCORE_KEYS", "TEMPLATES", "localize", "propose"]
