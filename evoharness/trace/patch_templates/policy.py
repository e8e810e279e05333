"""Policy templates: enable a prompt rewrite (spell counts, enumerate instances, move
negations, bind attributes, compress, quote text), tune guidance and steps, a compression
budget, and the removals: negative terms naming requested objects, a rewrite that acts on the
failing prompts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from evoharness.agent.planner import find_lookups
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import ConstraintType
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    GOOD_GUIDANCE,
    GOOD_STEPS,
    Template,
    _add,
    _in_prompts,
    _patch,
    _replace,
    agent_runs_on,
    referring_prompts,
)
from evoharness.vocab import plural

#: feature → rewrites that delete or move words and so can lose requested content on those
#: prompts (candidates for ``_policy_drop_rewrite``; never a rewrite that the same symptom's
#: additive templates enable, so add and drop cannot alternate on one cluster).
_FEATURE_REWRITES: Final[dict[str, tuple[str, ...]]] = {
    "count": ("compress",),
    "color": ("compress",),
    "position": ("compress",),
    "multi_object": ("compress", "move_negations"),
}


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


def _policy_drop_requested_negatives(h: Harness, c: FailureCluster) -> list[Patch]:
    """Remove global negative terms that name an object the failing prompts ask for."""
    asked = set(_in_prompts(c, ConstraintType.object, ConstraintType.count))
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


def _policy_agent_counts(h: Harness, c: FailureCluster) -> list[Patch]:
    """The program's wording lever: when the cluster's failing prompts refer to a count
    ("as many apples as a spider has legs": ``find_lookups`` kind ``count`` in
    ``_common.referring_prompts``, prompt text only) and the harness's enabled agent runs on
    them (``_common.agent_runs_on``), the agent's program already states the count as a bare
    number word ("eight apples") and the failures are in how the policy words it for the
    generator: enable ``enumerate_instances`` ("an apple, a second apple, …", n ≤ 10), which
    makes the text encoder draw each instance. ``[]`` without such prompts, without an agent
    that runs on them, or with the rewrite already enabled."""
    counts = [
        p
        for p in referring_prompts(c)
        if any(lk.kind == "count" for lk in find_lookups(p)) and agent_runs_on(h, p)
    ]
    if not counts:
        return []
    shown = "; ".join(f'"{p}"' for p in counts[:2])
    why = (
        f"the agent resolves the failing prompts' counts ({shown}) into a bare number word "
        "and they still fail: a text encoder draws a bare count of many objects poorly; "
        "naming each instance makes it draw each one"
    )
    effect = "looked-up counts drawn right more often; prompts without a count unchanged"
    return _policy_rewrite("enumerate_instances", why, effect)(h, c)
