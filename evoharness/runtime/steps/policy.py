"""The Policy responsibility at compile time: read the prompt (step 1), then write the program's
text, negative prompt and generation parameters (step 4) from the policy and the requests of
memory, skills and repair (see ``evoharness.runtime.runtime`` for the order)."""

from __future__ import annotations

from typing import Any

from evoharness.harness.schema import Policy
from evoharness.ports import PolicyExtractor
from evoharness.program import PARAM_BOUNDS, GenerationParams
from evoharness.runtime.extract import RuleExtractor, prompt_features
from evoharness.runtime.rewrite import apply_rewrite
from evoharness.runtime.steps import Rec, Requests
from evoharness.tasks.models import Constraint, ConstraintType


def extract(
    policy: Policy,
    prompt: str,
    rule_extractor: RuleExtractor,
    llm_extractor: PolicyExtractor | None,
) -> tuple[list[Constraint], str]:
    """The constraints the policy reads from ``prompt`` and which extractor read them:
    ``"llm"``, ``"rule (fallback: no llm extractor)"`` (``policy.extractor == "llm"`` without
    one) or ``"rule"``."""
    if policy.extractor == "llm" and llm_extractor is not None:
        return list(llm_extractor.extract(prompt)), "llm"
    if policy.extractor == "llm":
        return rule_extractor.extract(prompt), "rule (fallback: no llm extractor)"
    return rule_extractor.extract(prompt), "rule"


def open_constraints(prompt: str, constraints: list[Constraint]) -> list[Constraint]:
    """Constraints for the objects the open reading (``evoharness.runtime.reading.read_open``)
    finds in ``prompt`` whose noun has no class in the extractor's vocabulary: one ``object``
    (count 1) or ``count`` constraint (n, or at least 2 for a bare plural) per noun, ``subject``
    the noun as read, ids ``open:<noun>``. The verifier judges them like any other; one that
    cannot see the noun answers ``uncertain`` — so an object outside what the verifier checks is
    counted, never silently dropped (issue 19). Nouns already subjects of ``constraints`` are
    skipped. Deterministic; empty for a prompt every noun of which is in the vocabulary."""
    from evoharness.runtime.reading import read_open  # lemminflect's lexicon: load on use

    have = {c.subject for c in constraints}
    out: list[Constraint] = []
    for o in read_open(prompt).objects:
        if o.cls is not None or o.noun in have:
            continue
        have.add(o.noun)
        cid = f"open:{o.noun}"
        if o.count == 1:
            out.append(Constraint(constraint_id=cid, type=ConstraintType.object, subject=o.noun))
        else:
            out.append(
                Constraint(
                    constraint_id=cid,
                    type=ConstraintType.count,
                    subject=o.noun,
                    min_count=o.count if o.count is not None else 2,
                    max_count=o.count,
                )
            )
    return out


def read_prompt(
    policy: Policy,
    prompt: str,
    rule_extractor: RuleExtractor,
    llm_extractor: PolicyExtractor | None,
    rec: Rec,
) -> tuple[list[Constraint], set[str]]:
    """Step 1: the extracted constraints and the prompt features; traces ``policy/extract``."""
    constraints, used = extract(policy, prompt, rule_extractor, llm_extractor)
    features = prompt_features(prompt, constraints)
    rec(
        "policy",
        "extract",
        extractor=used,
        input=prompt,
        constraints=[c.model_dump(mode="json", exclude_none=True) for c in constraints],
        features=sorted(features),
    )
    return constraints, features


def rewrite_prompt(policy: Policy, prompt: str, req: Requests, rec: Rec) -> tuple[str, list[str]]:
    """Step 4a: the policy's enabled rewrites, then the requested ones (each kind once, first
    source wins), the template, the appended texts, and ``compress`` last (it targets the whole
    prompt's token budget). Returns the text and the negations the rewrites moved out of it."""
    kinds: list[tuple[str, str]] = [(r.kind, "policy") for r in policy.rewrites if r.enabled]
    seen_kinds = {k for k, _ in kinds}
    for k, src in req.rewrites:
        if k not in seen_kinds:
            kinds.append((k, src))
            seen_kinds.add(k)
    text = prompt.strip()
    moved: list[str] = []
    for k, src in kinds:
        if k == "compress":
            continue
        res = apply_rewrite(k, text, max_tokens=policy.max_prompt_tokens)
        rec(
            "policy",
            "rewrite",
            kind=k,
            source=src,
            input=text,
            output=res.text,
            negative_terms=res.negative_terms,
            details=res.details,
        )
        text = res.text if res.text.strip() else text
        moved.extend(res.negative_terms)
    templated = policy.template.format(prompt=text)
    if templated != text:
        rec("policy", "template", template=policy.template, input=text, output=templated)
    text = templated
    for t, src in req.append:
        new = f"{text.rstrip().rstrip('.')}. {t.strip().lstrip(',;. ')}"
        rec("policy", "append_text", source=src, input=text, output=new)
        text = new
    if "compress" in seen_kinds:
        src = next(s for k, s in kinds if k == "compress")
        res = apply_rewrite("compress", text, max_tokens=policy.max_prompt_tokens)
        rec(
            "policy",
            "rewrite",
            kind="compress",
            source=src,
            input=text,
            output=res.text,
            negative_terms=[],
            details=res.details,
        )
        text = res.text if res.text.strip() else text
    return text, moved


def negative_prompt(policy: Policy, moved: list[str], req: Requests, rec: Rec) -> str:
    """Step 4b: ``negative_prompt`` + ``negative_terms`` + moved negations + requested terms,
    comma-separated, each once (case-insensitive); traces ``policy/negative_prompt``."""
    neg_parts: list[str] = []
    if policy.negative_prompt.strip():
        neg_parts.append(policy.negative_prompt.strip())
    for t in [*policy.negative_terms, *moved, *(t for t, _ in req.negative)]:
        t = t.strip()
        if t and t.lower() not in {p.lower() for p in neg_parts}:
            neg_parts.append(t)
    out = ", ".join(neg_parts)
    rec(
        "policy",
        "negative_prompt",
        base=policy.negative_prompt,
        policy_terms=list(policy.negative_terms),
        moved=moved,
        other=[{"term": t, "source": s} for t, s in req.negative],
        output=out,
    )
    return out


def clamp_param(name: str, value: float) -> float | int:
    """``value`` clamped into ``PARAM_BOUNDS[name]``; width/height rounded to a multiple of 8,
    steps to an integer."""
    lo, hi = PARAM_BOUNDS[name]
    v = min(max(float(value), lo), hi)
    if name in ("width", "height"):
        return int(max(lo, min(hi, round(v / 8) * 8)))
    if name == "steps":
        return int(round(v))
    return v


def generation_params(policy: Policy, req: Requests, rec: Rec) -> GenerationParams:
    """Step 4c: the policy's params with the requested overrides applied in order, each clamped
    into ``PARAM_BOUNDS`` (clamping is traced in ``policy/params``)."""
    params = policy.params.model_dump()
    clamps: list[dict[str, Any]] = []
    for name, src, v in req.params:
        cv = clamp_param(name, float(v))
        if float(cv) != float(v):
            clamps.append({"param": name, "requested": v, "applied": cv, "source": src})
        params[name] = cv
    gp = GenerationParams.model_validate(params)
    rec(
        "policy",
        "params",
        overrides=[{"param": n, "value": v, "source": s} for n, s, v in req.params],
        clamped=clamps,
        output=gp.model_dump(),
    )
    return gp


__all__ = [
    "clamp_param",
    "extract",
    "generation_params",
    "negative_prompt",
    "read_prompt",
    "rewrite_prompt",
]
