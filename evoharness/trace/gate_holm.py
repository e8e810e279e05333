"""Across one round's gated candidates: Holm's correction over the testable ones (Tarone
1990) and the rank of the accepted ones. Sources in ``evoharness.trace.gates`` (moved from
there, issue 29).
"""

from __future__ import annotations

from collections.abc import Mapping

from evoharness.trace.gate_config import ALL_HOLD
from evoharness.trace.gate_stats import holm_adjust, tarone_testable
from evoharness.trace.models import GateReport


def apply_holm(reports: Mapping[str, GateReport], alpha: float) -> dict[str, GateReport]:
    """Holm's correction across one round's gated candidates (``candidate_id → report``, the
    final look of each), counting only the candidates whose exact test can reach α at their
    sample size (Tarone 1990; ``tarone_testable`` on each report's ``p_min``, None counting as
    0 — always testable). The testable candidates get Holm-adjusted p-values
    (``holm_adjust`` over them alone, Holm 1979) in ``p_holm``; an untestable one gets
    ``p_holm`` = 1 (its test cannot reach α/K*, so it is never significant). One that was
    accepted and whose ``p_holm`` ≥ ``alpha`` is no longer accepted and says why. Reports are
    copied, never modified in place. The family-wise error stays ≤ α: every untestable
    hypothesis is accepted, and Holm over the fixed testable set controls it there."""
    p_min = {k: (r.p_min if r.p_min is not None else 0.0) for k, r in reports.items()}
    k_star, testable = tarone_testable(p_min, alpha) if reports else (1, [])
    adj = holm_adjust({k: reports[k].p_value for k in testable})
    out: dict[str, GateReport] = {}
    for k, r in reports.items():
        p_adj = adj.get(k, 1.0)
        upd: dict[str, object] = {"p_holm": p_adj}
        if r.accepted and not p_adj < alpha:
            reasons = [x for x in r.reasons if x != ALL_HOLD]
            if k in adj:
                left = len(reports) - len(testable)
                reasons.append(
                    f"not significant after Holm's correction over {len(testable)} candidates"
                    + (f" ({left} untestable left out, Tarone 1990)" if left else "")
                    + f": adjusted p={p_adj:.4f} >= alpha={alpha}"
                )
            else:
                reasons.append(
                    f"its test cannot reach alpha/K* = {alpha}/{k_star} at its sample size "
                    f"(smallest attainable p {p_min[k]:.4g}; Tarone 1990): not testable"
                )
            upd.update(accepted=False, reasons=reasons)
        out[k] = r.model_copy(update=upd)
    return out


def rank_key(report: GateReport) -> tuple[float, float, float, float]:
    """Sort key for accepted candidates: highest utility, then the largest first-attempt gain
    (the mean of the target's and, when measured, the held-out split's Δfirst-attempt; 0 when
    unknown; a fix at the cause before a mask, ``gates``), then Δtarget, then lowest
    p."""
    known = [
        v for v in (report.delta_first_attempt, report.delta_first_attempt_heldout) if v is not None
    ]
    first = sum(known) / len(known) if known else 0.0
    return (report.utility, first, report.delta_target, -report.p_value)
