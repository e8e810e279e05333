"""The TRACE rounds in the HTML run report: each round's decision, its candidates (label,
scope, answer, why rejected) and the accepted patch, as plain values for the template
(``evoharness.report.render`` lays out the page).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from evoharness.report.cells import fmt_delta, fmt_num, fmt_pct, to_json
from evoharness.trace.models import Candidate, DecisionKind, RoundReport


def candidate_label(c: Candidate) -> tuple[str, str]:
    """``(label, badge class)`` of a candidate: ``accepted``; ``rejected by the gate`` for a
    validated candidate the gate refused; ``passed the gate, not chosen`` when another
    candidate won; ``rejected by the checks`` when it never reached the gate."""
    if c.status.value == "accepted":
        return "accepted", "accepted"
    if c.status.value == "validated":
        if c.gate is not None and c.gate.accepted:
            return "passed the gate, not chosen", "validated"
        return "rejected by the gate", "rejected"
    if c.status.value == "rejected":
        return "rejected by the checks", "rejected"
    return c.status.value, c.status.value


def _features(when: Any) -> str:
    return ", ".join(str(w) for w in when) if isinstance(when, list | tuple) else str(when)


def patch_scope(patch: Any) -> str:
    """Which prompts a patch changes, in the words of text-to-image generation: "applies to
    every prompt" for a policy change (template, negative prompt or terms, a rewrite,
    parameters) or a middleware stage; otherwise the trigger (a tool's ``when`` features, a
    skill's or memory entry's triggers)."""
    triggers: list[str] = []
    for op in patch.ops:
        value = op.get("value")
        if isinstance(value, dict):
            if value.get("when"):
                triggers.append(f"prompts with {_features(value['when'])}")
            trig = value.get("triggers") or value.get("trigger")
            if isinstance(trig, dict):
                parts = [f"{k} {_features(v)}" for k, v in sorted(trig.items()) if v]
                if parts:
                    triggers.append("prompts matching " + "; ".join(parts))
            elif isinstance(trig, list | str) and trig:
                triggers.append(f"prompts matching {_features(trig)}")
    if triggers:
        return "; ".join(dict.fromkeys(triggers))
    resp = patch.responsibility.value
    if resp in ("policy", "middleware"):
        return "applies to every prompt"
    return f"prompts that use the changed {resp}"


def _candidate_row(c: Candidate) -> dict[str, Any]:
    g = c.gate
    label, badge = candidate_label(c)
    return {
        "id": c.candidate_id,
        "cluster": c.cluster_id,
        "responsibility": c.patch.responsibility.value if c.patch else "—",
        "scope": patch_scope(c.patch) if c.patch else "",
        "source": c.source,
        "status": c.status.value,
        "label": label,
        "badge": badge,
        "reject_reason": c.reject_reason,
        "answer": candidate_answer(c),
        "gate": None
        if g is None
        else {
            "delta_target": fmt_delta(g.delta_target),
            "delta_target_raw": g.delta_target,
            "delta_heldout": fmt_delta(g.delta_heldout),
            "delta_heldout_raw": g.delta_heldout,
            "delta_preservation": fmt_delta(g.delta_preservation),
            "delta_preservation_raw": g.delta_preservation,
            "regression": f"{100.0 * g.regression:.1f} pp",
            "epsilon": f"{100.0 * g.epsilon:.1f} pp",
            "delta_cost": f"{g.delta_cost:+.3f}",
            "utility": f"{g.utility:+.4f}",
            "p_value": f"{g.p_value:.3g}",
            "n_discordant": g.n_discordant,
            "accepted": g.accepted,
            "reasons": g.reasons,
            "notes": g.notes,
            "ci95": {k: f"[{fmt_delta(lo)}, {fmt_delta(hi)}]" for k, (lo, hi) in g.ci95.items()},
            "look": g.look,
            "second_look": g.second_look,
            "seeds": ", ".join(str(x) for x in g.seeds) or "—",
            "p_holm": "—" if g.p_holm is None else f"{g.p_holm:.3g}",
            "test": g.test,
            "objective": g.objective,
            "tasks_changed": f"{g.n_tasks_changed}/{g.n_tasks}",
            "families": [
                {
                    "name": f or "(none)",
                    "tasks": int(r["tasks"]),
                    "delta": fmt_delta(r["delta"]),
                    "regression": f"{100.0 * r['regression']:.1f} pp",
                    "epsilon": f"{100.0 * r['epsilon']:.1f} pp",
                    "failed": r["regression"] > r["epsilon"] + 1e-12,
                }
                for f, r in g.family_regressions.items()
            ],
        },
        "scope_probes": _scope_view(c.scope_probes),
    }


#: characters of a candidate's answer shown in the report (the excerpt the proposer keeps of a
#: dropped answer is at most 200)
ANSWER_CHARS = 600


def candidate_answer(c: Candidate) -> str:
    """What the proposer (rule, LLM or memory miner) answered for a candidate, in one string
    of at most ``ANSWER_CHARS`` characters: the patch's rationale and its RFC 6902 ops when it
    parsed, else the raw answer the checks refused (or the excerpt of one the proposer's own
    validator dropped); "" when there is none (a call that failed outright)."""
    if c.patch is not None:
        ops = "; ".join(
            f"{op.get('op', '')} {op.get('path', '')}"
            + (f" = {to_json(op['value'])}" if "value" in op else "")
            for op in c.patch.ops
        )
        text = f"{c.patch.rationale} — {ops}" if c.patch.rationale else ops
    elif c.raw is None:
        return ""
    else:
        text = c.raw if isinstance(c.raw, str) else to_json(c.raw)
    return text if len(text) <= ANSWER_CHARS else text[: ANSWER_CHARS - 1] + "…"


def _scope_view(sp: dict[str, Any]) -> dict[str, Any] | None:
    """The scope probes of a candidate for the template (None when none ran)."""
    if not sp:
        return None
    return {
        "ok": bool(sp.get("ok")),
        "scope": str(sp.get("scope", "")),
        "detail": str(sp.get("detail", "")),
        "groups": [
            {
                "name": k,
                "parent": fmt_pct(v[0]),
                "candidate": fmt_pct(v[1]),
                "lost": int(v[2]),
                "n": int(v[3]),
            }
            for k, v in (sp.get("groups") or {}).items()
        ],
    }


def _reject_kind(c: Candidate) -> str:
    """A short name of why a candidate was rejected: the check's name (``no_op``,
    ``scope_regression``, …) or the gate's first failed condition in words before its
    figures (``regression in family single_object``)."""
    if c.gate is not None:
        first = c.gate.reasons[0] if c.gate.reasons else "refused"
        return re.split(r"[\d(:=<>≥≤+-]", first, maxsplit=1)[0].strip() or "refused"
    return c.reject_reason.split(":")[0].strip() or "not validated"


def reject_reason(c: Candidate) -> str:
    """Why a candidate was not accepted, in one line: the check that rejected it
    (``no_op``, ``scope_regression``, ``duplicate``, …, with its detail), or the gate's failed
    conditions; "" for the accepted candidate and one that passed the gate but lost to
    another."""
    if c.status.value == "accepted" or (c.gate is not None and c.gate.accepted):
        return ""
    if c.gate is not None:
        return "gate: " + "; ".join(c.gate.reasons)
    return c.reject_reason or "not validated"


def _patch_view(c: Candidate | None) -> dict[str, Any] | None:
    if c is None or c.patch is None:
        return None
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for op in c.patch.ops:
        path = str(op.get("path", ""))
        resp = path.split("/")[1] if path.count("/") >= 1 else c.patch.responsibility.value
        groups[resp].append(
            {
                "op": str(op.get("op", "")),
                "path": path,
                "from": str(op.get("from", "")),
                "value": to_json(op["value"]) if "value" in op else "",
            }
        )
    return {
        "candidate_id": c.candidate_id,
        "responsibility": c.patch.responsibility.value,
        "rationale": c.patch.rationale,
        "expected_effect": c.patch.expected_effect,
        "scope": patch_scope(c.patch),
        "groups": dict(groups),
    }


def round_view(r: RoundReport, beam: int = 0) -> dict[str, Any]:
    by_id = {c.candidate_id: c for c in r.candidates}
    accepted = None
    if r.decision.kind is DecisionKind.accepted:
        accepted = by_id.get(r.decision.candidate_id or "") or next(
            (c for c in r.candidates if c.status.value == "accepted"), None
        )
    clusters = {c.cluster_id: c for c in r.clusters}
    attributions = [
        {
            "cluster": a.cluster_id,
            "symptom": clusters[a.cluster_id].symptom if a.cluster_id in clusters else "",
            "chosen": a.chosen,
            "score": f"{a.scores.get(a.chosen, 0.0):.2f}",
            "reasons": a.reasons,
        }
        for a in r.attributions
    ]
    return {
        "round": r.round,
        "beam": beam,
        "anchor": f"round-{r.round}" + (f"-b{beam}" if beam else ""),
        "parent": r.parent_harness_id,
        "decision": {
            "kind": r.decision.kind.value,
            "reason": r.decision.reason,
            "harness_id": r.decision.harness_id,
            "candidate_id": r.decision.candidate_id,
        },
        "patch": _patch_view(accepted),
        "attributions": attributions,
        "candidates": [_candidate_row(c) for c in r.candidates],
        "rejected": [
            {
                "id": c.candidate_id,
                "stage": "gate" if c.gate is not None else "checks",
                "kind": _reject_kind(c),
                "reason": reject_reason(c),
            }
            for c in r.candidates
            if reject_reason(c)
        ],
        "preservation": None
        if r.preservation is None
        else {
            "selected": len(r.preservation.task_ids),
            "pool": r.preservation.pool,
            "seeds": ", ".join(str(x) for x in r.preservation.selection_seeds),
            "families": ", ".join(f"{k} {v}" for k, v in r.preservation.families.items()),
            "classes": r.preservation.classes,
            "pool_classes": r.preservation.pool_classes,
            "min_pass_rate": f"{r.preservation.min_pass_rate:.0%}",
            "fallback": r.preservation.fallback,
            "notes": list(r.preservation.notes),
        },
        "pass_rates": {k: fmt_pct(v) for k, v in r.pass_rates.items()},
        "cost": {k: fmt_num(v) for k, v in r.cost.items()},
        "n_clusters": len(r.clusters),
    }
