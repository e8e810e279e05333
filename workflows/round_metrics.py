"""The worker's metrics of a finished round (``services.common.metrics``): rounds, the
decision and which rule said no (``reason_tag``), pass rates, regression and spend.
Written by the ``finalize_round`` activity after the report is stored."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evoharness.trace.models import DecisionKind, RoundReport
from services.common.metrics import (
    DECISIONS,
    EVOLUTION_PROGRESS,
    EVOLUTION_ROUND,
    PASS_RATE,
    REGRESSION,
    ROUNDS,
    SPEND_USD,
    WORKFLOW_LAST_PROGRESS,
)


def record_round(run_id: str, round_: int, report: RoundReport) -> None:
    """Update the metrics for round ``round_`` of run ``run_id`` from its finalized
    ``report`` (its decision, pass rates, gates and ``cost``: ``generator_usd``, ``llm_usd``)."""
    decision, candidates = report.decision, report.candidates
    ROUNDS.labels(run_id=run_id).inc()
    WORKFLOW_LAST_PROGRESS.labels(run_id=run_id).set(time.time())
    EVOLUTION_PROGRESS.labels(run_id=run_id, phase="finalize").set(1.0)
    EVOLUTION_ROUND.labels(run_id=run_id).set(round_)
    reason = (
        "accepted"
        if decision.kind is DecisionKind.accepted
        else reason_tag(decision.reason, candidates)
    )
    DECISIONS.labels(kind=decision.kind.value, reason=reason).inc()
    for s, v in report.pass_rates.items():
        PASS_RATE.labels(run_id=run_id, split=s).set(v)
    gates = [c.gate for c in candidates if c.gate is not None]
    if gates:
        REGRESSION.labels(run_id=run_id).set(min(g.regression for g in gates))
    SPEND_USD.labels(run_id=run_id, kind="generator").inc(report.cost.get("generator_usd", 0.0))
    if report.cost.get("llm_usd"):
        SPEND_USD.labels(run_id=run_id, kind="llm").inc(report.cost["llm_usd"])


def _slug(text: str) -> str:
    """``"Δtarget not significant (p=0.41 ≥ 0.05)"`` → ``"target_not_significant"``: the words
    before the first figure or parenthesis (a bounded label value)."""
    head = re.match(r"^[^\d(]*", text)
    return re.sub(r"[^a-z]+", "_", (head.group(0) if head else "").lower()).strip("_")[:40]


def reason_tag(reason: str, candidates: Sequence[Any] = ()) -> str:
    """The ``reason`` label of ``evoharness_decisions_total`` for a No-Patch decision: which
    rule said no (``no_failures``, ``attributed_no_patch``, ``proposal_checks``), and for
    the gate the check most candidates failed (``gate:regression``,
    ``gate:target_not_significant``, ...)."""
    if "no failures" in reason:
        return "no_failures"
    if "no_patch" in reason:
        return "attributed_no_patch"
    if "proposal checks" in reason:
        return "proposal_checks"
    if "gate" in reason:
        why = Counter(
            _slug(c.gate.reasons[0])
            for c in candidates
            if getattr(c, "gate", None) is not None and c.gate.reasons
        )
        top = why.most_common(1)[0][0] if why else ""
        return f"gate:{top}" if top else "gate"
    if "stopped" in reason:
        return "stopped"
    return "other"
