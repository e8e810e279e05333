"""Canary against stable on live sampled traffic (issue 34).

While a channel splits its requests between a stable registration and a canary, the sampled
records of each (``TrafficRecord.registration_id``) say how often each one's images pass. A
request *passes* when every constraint its serving harness read was decided and passed —
GenEval's per-image success (Ghosh et al. 2023); requests whose verifier decided nothing are
left out, as the runtime counts them apart (``evoharness_render_nothing_checked``).

The two arms serve different prompts (each request goes to one arm), so the comparison is
unpaired: Fisher's exact test on the 2×2 table (passed / failed × canary / stable), one-sided
for "the canary passes less often" (``evoharness.trace.gate_stats.fisher_less``, the project's
exact tests in one place). The canary is *worse* when that test rejects at ``alpha`` and its
pass rate is below the stable one's by more than ``epsilon``; with fewer than ``min_requests``
decided requests on either arm nothing is concluded (``enough`` False). Each arm's pass rate
comes with its Wilson 95% interval (``evoharness.trace.aggregate.wilson_interval``).

Only requests served at or after ``since`` count (the canary's promotion time): before it the
stable arm served a different mix of traffic, and comparing across that time would mix drift
into the verdict.

One look per call. A caller that polls until enough requests arrive (the post-promotion
canary check, ``workflows/postpromotion_canary.py``) stops at its first look with ``enough``: the
looks before it decide nothing and ``enough`` depends only on how many requests were decided,
not on whether they passed, so the test is made once at ``alpha`` and the waiting adds no
repeated-testing inflation (Armitage, McPherson & Rowe 1969).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from evoharness.trace.aggregate import wilson_interval
from evoharness.trace.gate_stats import fisher_less
from evoharness.traffic.records import TrafficRecord


def request_passed(record: TrafficRecord) -> bool | None:
    """Whether a sampled request passed (every constraint decided and passed), or None when
    no verdict was decided (nothing to judge it by)."""
    decided = [v for v in record.verdicts if v.status != "uncertain"]
    if not decided:
        return None
    return all(v.status == "pass" for v in decided) and len(decided) == len(record.verdicts)


@dataclass(frozen=True)
class CanaryComparison:
    """Counts and verdict of one canary-vs-stable comparison (module docstring)."""

    canary_id: str
    stable_id: str
    n_canary: int
    n_stable: int
    passed_canary: int
    passed_stable: int
    p_value: float
    alpha: float
    epsilon: float
    min_requests: int

    @property
    def pass_rate_canary(self) -> float:
        """Canary pass rate (0 when it has no decided request)."""
        return self.passed_canary / self.n_canary if self.n_canary else 0.0

    @property
    def pass_rate_stable(self) -> float:
        """Stable pass rate (0 when it has no decided request)."""
        return self.passed_stable / self.n_stable if self.n_stable else 0.0

    @property
    def ci95_canary(self) -> tuple[float, float]:
        """Wilson 95% interval of the canary's pass rate ((0, 1) with no decided request)."""
        return wilson_interval(self.passed_canary, self.n_canary)

    @property
    def ci95_stable(self) -> tuple[float, float]:
        """Wilson 95% interval of the stable pass rate ((0, 1) with no decided request)."""
        return wilson_interval(self.passed_stable, self.n_stable)

    @property
    def enough(self) -> bool:
        """Both arms have at least ``min_requests`` decided requests."""
        return min(self.n_canary, self.n_stable) >= self.min_requests

    @property
    def worse(self) -> bool:
        """The canary passes significantly less often, by more than ``epsilon``."""
        gap = self.pass_rate_stable - self.pass_rate_canary
        return self.enough and self.p_value < self.alpha and gap > self.epsilon


def compare_canary(
    records: Iterable[TrafficRecord],
    canary_id: str,
    stable_id: str,
    *,
    alpha: float = 0.05,
    epsilon: float = 0.0,
    min_requests: int = 30,
    since: dt.datetime | None = None,
) -> CanaryComparison:
    """Compare the canary's and the stable registration's sampled requests (module docstring).
    Records of other registrations, and with ``since`` (timezone-aware) records served before
    it, are ignored. Raises ``ValueError`` when the two ids are equal, ``alpha`` is not in
    (0, 1) or ``since`` is naive."""
    if canary_id == stable_id:
        raise ValueError(f"canary and stable are the same registration {canary_id!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} must be in (0, 1)")
    if since is not None and since.tzinfo is None:
        raise ValueError(f"since {since.isoformat()} has no time zone (expected UTC)")
    counts = {canary_id: [0, 0], stable_id: [0, 0]}  # [passed, decided]
    for r in records:
        arm = counts.get(r.registration_id)
        if arm is None or (since is not None and r.time < since):
            continue
        ok = request_passed(r)
        if ok is None:
            continue
        arm[0] += ok
        arm[1] += 1
    (pc, nc), (ps, ns) = counts[canary_id], counts[stable_id]
    p = fisher_less(pc, nc, ps, ns)
    return CanaryComparison(canary_id, stable_id, nc, ns, pc, ps, p, alpha, epsilon, min_requests)
