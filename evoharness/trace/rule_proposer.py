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

A cluster whose failing prompts only *refer* to an attribute of a well-known thing ("a cup
in the colour of a flamingo", read from the prompt text by
``patch_templates._common.referring_prompts``) adds ``REFERENCE_BONUS`` to ``tools`` while
the agent lever (``patch_templates.tools._tools_agent``) is untried: no rewording, skill or sampling lever tells the generator what a
flamingo's colour is, an agent that searches for it does (GenEvolve). When the harness's
enabled agent is routed by skills (``route: skills``) and no active skill routes those
prompts to it, ``ROUTING_BONUS`` goes to ``skills`` instead (the routing lever,
``patch_templates.skills._skills_route_agent``); the Tools bonus stays for a harness with no
agent or a disabled one. When the agent is on and runs on the cluster's prompts that refer
to a count, ``WORDING_BONUS`` goes to ``policy`` (the program's wording lever,
``patch_templates.policy._policy_agent_counts``: ``enumerate_instances``). Otherwise, a
cluster whose failing prompts name an object by a material or pattern ("a wooden chair",
``patch_templates._common.textured_prompts``) adds ``REFERENCE_BONUS`` to ``tools`` while the
reference lever (``patch_templates.tools._tools_image_search``) is untried: text encoders bind
material and pattern words poorly (T2I-CompBench's texture category, Huang et al. 2023), and
a reference image of the object shows the material (GenEvolve's ``image_search``).

``no_patch`` raw score (generator noise, docs/architecture.md step 4) =
``NOISE_WEIGHT x flip_rate x max(0, 1 - 2 x failure_rate)`` + ``SINGLETON_NOISE`` when the
cluster has a single failing verdict: a constraint that fails on a minority of seeds and passes
on others is the signature of sampling noise; at a failure rate of 50% or more it is not.

**Proposer** (``propose``): maps the cluster's symptom to patch templates in every
responsibility (``evoharness.trace.patch_templates``, one module per responsibility;
module-level ``TEMPLATES`` counts them). Where several levers could fix a
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

from collections.abc import Iterable, Sequence
from typing import Final

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.trace.models import Attribution, FailureCluster
from evoharness.trace.patch_templates import templates_for
from evoharness.trace.patch_templates._common import referring_prompts, textured_prompts
from evoharness.trace.patch_templates.policy import _policy_agent_counts
from evoharness.trace.patch_templates.skills import _skills_route_agent
from evoharness.trace.patch_templates.tools import _tools_agent_for, _tools_image_search
from evoharness.trace.schema_levers import distinct_valid

RESPONSIBILITIES: Final = tuple(r.value for r in Responsibility)
SCORE_KEYS: Final = (*RESPONSIBILITIES, "no_patch")

#: Added to the cluster's responsibility hint (the clustering's prior, ``trace.cluster``).
HINT_BONUS: Final = 0.25
#: Availability factor of a responsibility with no untried template for the symptom.
EXHAUSTED: Final = 0.05
#: Added to ``tools`` for a cluster whose failing prompts refer to a well-known thing (the
#: agent lever; module docstring): above every symptom's top prior, so it is chosen.
REFERENCE_BONUS: Final = 0.5
#: Added to ``skills`` instead, when the harness's agent is routed by skills and no active
#: skill routes those prompts to it (``patch_templates.skills._skills_route_agent``): the
#: agent is there and only the routing misses, so the evidence also outweighs the
#: clustering's hint (``REFERENCE_BONUS + HINT_BONUS``).
ROUTING_BONUS: Final = REFERENCE_BONUS + HINT_BONUS
#: Added to ``policy`` when neither agent lever applies (the agent is on and runs on the
#: cluster's prompts that refer to a count) and the program's wording lever does
#: (``patch_templates.policy._policy_agent_counts``): the lookup is done, what fails is how
#: the count is worded; above count_wrong's Tools prior plus the hint (1.25) from Policy's 0.5.
WORDING_BONUS: Final = REFERENCE_BONUS + 2 * HINT_BONUS
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

#: For documentation and tests: symptom → responsibility → number of templates.
TEMPLATES: Final[dict[str, dict[str, int]]] = {
    s: {r: len(ts) for r, ts in templates_for(s).items()} for s in (*PRIORS, "generic")
}


def _candidates(harness: Harness, cluster: FailureCluster, resp: str) -> list[Patch]:
    """Valid, non-no-op, distinct patches for ``resp`` (``schema_levers.distinct_valid``)."""
    made = (
        p for tmpl in templates_for(cluster.symptom).get(resp, []) for p in tmpl(harness, cluster)
    )
    return distinct_valid(harness, made, lambda p: p)


def _same(p: Patch) -> Patch:
    return p


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
        referring = referring_prompts(c)
        route_lever: list[Patch] = distinct_valid(harness, _skills_route_agent(harness, c), _same)
        agent_lever: list[Patch] = (
            []
            if route_lever
            else distinct_valid(harness, _tools_agent_for(harness, referring), _same)
        )
        if route_lever:  # only with referring prompts the routed agent does not get
            raw["skills"] += ROUTING_BONUS
            reasons.append(
                f"{len(referring)} failing prompt(s) refer to an attribute of a well-known "
                f'thing (e.g. "{referring[0]}") and no skill routes them to the agent: a '
                "routing skill can"
            )
        elif agent_lever:  # only with referring prompts
            raw["tools"] += REFERENCE_BONUS
            reasons.append(
                f"{len(referring)} failing prompt(s) refer to an attribute of a well-known "
                f'thing (e.g. "{referring[0]}"): an agent can look it up'
            )
        elif distinct_valid(harness, _policy_agent_counts(harness, c), _same):
            raw["policy"] += WORDING_BONUS
            reasons.append(
                f"{len(referring)} failing prompt(s) refer to a count (e.g. "
                f'"{referring[0]}") that the agent already resolves: the program\'s wording '
                "is left"
            )
        elif distinct_valid(harness, _tools_image_search(harness, c), _same):
            raw["tools"] += REFERENCE_BONUS
            textured = textured_prompts(c)
            reasons.append(
                f"{len(textured)} failing prompt(s) name an object by a material or pattern "
                f'(e.g. "{textured[0]}"): an agent can retrieve a reference image of it'
            )
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


__all__ = [
    "PRIORS",
    "REFERENCE_BONUS",
    "ROUTING_BONUS",
    "WORDING_BONUS",
    "SCORE_KEYS",
    "TEMPLATES",
    "localize",
    "propose",
]
