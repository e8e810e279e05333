"""One look of the canary check on live sampled traffic (issue 34), shared by the CLI
(``evoharness traffic canary-check``) and the post-promotion canary workflow
(``workflows/postpromotion_canary.py``), so both judge and roll back the same way.

``check_canary`` reads what the channel serves from the registry, the sampled Render records
of its canary and stable registrations served since the canary's promotion from the artifact
store, compares their pass rates (``evoharness.traffic.canary.compare_canary``: Fisher's exact
test, one-sided) and, when the canary does worse and ``rollback`` is set, takes the canary off
the channel by a compare-and-set on the channel version it read (``RegistryClient.promote``
with ``expected=`` the stable registration and ``expected_version=``): a channel moved by
anybody in between is never overwritten, the loss is reported (``lost_race``).

Outcomes (``CanaryCheck.outcome``):

- ``rolled_back``: worse, and the canary was removed (the stable registration serves all);
- ``worse``: worse, ``rollback`` not asked (a dry run);
- ``kept``: enough requests on both arms and the canary not worse;
- ``waiting``: fewer than ``min_requests`` decided requests on an arm: look again later;
- ``channel_moved``: the channel no longer serves the canary that was to be judged (or at a
  different version) when the look began: nothing judged, nothing written;
- ``lost_race``: worse, but the compare-and-set failed because the channel moved between the
  read and the write: nothing written.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from evoharness.traffic.canary import CanaryComparison, compare_canary
from evoharness.traffic.records import ListingStore, read_window
from harness_registry.errors import StalePromotion

Outcome = Literal["rolled_back", "worse", "kept", "waiting", "channel_moved", "lost_race"]


class NoCanary(ValueError):
    """The channel has no canary to judge (names the channel and its version)."""


@dataclass(frozen=True)
class CanaryCheck:
    """One look's result: ``outcome`` (module docstring), the channel and version the look
    read, the time from which records counted, the comparison (None when nothing was judged)
    and a one-line ``detail`` for people and logs."""

    outcome: Outcome
    channel: str
    channel_version: int
    canary_id: str
    stable_id: str
    since: dt.datetime
    comparison: CanaryComparison | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (counts, rates, Wilson intervals, p) for the CLI and logs."""
        c = self.comparison
        out: dict[str, Any] = {
            "channel": self.channel,
            "channel_version": self.channel_version,
            "canary": self.canary_id,
            "stable": self.stable_id,
            "since": self.since.isoformat(),
            "outcome": self.outcome,
            "detail": self.detail,
        }
        if c is not None:
            out |= {
                "n_canary": c.n_canary,
                "n_stable": c.n_stable,
                "pass_rate_canary": c.pass_rate_canary,
                "pass_rate_stable": c.pass_rate_stable,
                "ci95_canary": list(c.ci95_canary),
                "ci95_stable": list(c.ci95_stable),
                "p_value": c.p_value,
                "enough": c.enough,
                "worse": c.worse,
            }
        return out | {"rolled_back": self.outcome == "rolled_back"}


def promotion_time(client: Any, channel: str, version: int) -> dt.datetime:
    """When ``channel`` moved to ``version`` (the channel history's entry; UTC). Raises
    ``NoCanary`` when the history has no such entry."""
    for e in client.history(channel):
        if e.version == version:
            at: dt.datetime = e.created_at  # aware UTC (``RegistryClient``, ``Registry``)
            return at
    raise NoCanary(f"channel {channel!r}: no history entry for version {version}")


def evidence(c: CanaryComparison) -> str:
    """The comparison in one line (the rollback's reason in the channel history)."""
    lo_c, hi_c = c.ci95_canary
    lo_s, hi_s = c.ci95_stable
    return (
        f"canary {c.canary_id} passed {c.pass_rate_canary:.1%} [{lo_c:.1%}, {hi_c:.1%}] of "
        f"{c.n_canary} sampled requests vs stable {c.stable_id} {c.pass_rate_stable:.1%} "
        f"[{lo_s:.1%}, {hi_s:.1%}] of {c.n_stable} (Fisher one-sided p={c.p_value:.2g}, "
        f"alpha {c.alpha}, epsilon {c.epsilon})"
    )


@dataclass(frozen=True)
class CanaryLookSpec:
    """What one look judges and how. ``canary_id``/``expected_version``: the canary to judge
    and the channel version that set it (None: whatever the channel serves now). ``since``:
    the first served time that counts (default: when the channel moved to its current
    version, from the channel history). ``now``: the end of the window (default: the current
    UTC time). ``prefix``: where the sampled traffic lies in the artifact store. ``alpha``,
    ``epsilon``, ``min_requests``: the test (``evoharness.traffic.canary.compare_canary``).
    ``rollback``: roll a worse canary back; ``actor``: who the rollback is recorded as."""

    canary_id: str | None = None
    expected_version: int | None = None
    since: dt.datetime | None = None
    now: dt.datetime | None = None
    prefix: str = "traffic"
    alpha: float = 0.05
    epsilon: float = 0.0
    min_requests: int = 30
    rollback: bool = True
    actor: str = "canary check"


def check_canary(
    client: Any,
    store: ListingStore,
    channel: str,
    spec: CanaryLookSpec | None = None,
) -> CanaryCheck:
    """One look (module docstring). ``client``: a ``services.registry.client.RegistryClient``;
    ``store``: the artifact store holding the sampled traffic under ``spec.prefix``;
    ``spec``: what is judged and how (``CanaryLookSpec``; None: its defaults).

    Raises ``NoCanary`` when the channel serves no canary and none was named, ``ValueError``
    for bad thresholds or a naive ``since``, ``harness_registry.errors.RegistryError`` when the
    registry fails, and ``evoharness.traffic.records.TrafficReadError`` for an unreadable
    batch."""
    sp = spec or CanaryLookSpec()
    canary_id, expected_version, since, now = sp.canary_id, sp.expected_version, sp.since, sp.now
    prefix, alpha, epsilon, min_requests = sp.prefix, sp.alpha, sp.epsilon, sp.min_requests
    rollback, actor = sp.rollback, sp.actor
    res = client.resolve(channel, with_document=False)
    current = res.canary_registration_id
    if canary_id is None and not current:
        raise NoCanary(f"channel {channel!r} (version {res.version}) has no canary")
    judged = canary_id or current or ""
    version = res.version if expected_version is None else expected_version
    when = since or promotion_time(client, channel, version)
    if when.tzinfo is None:
        raise ValueError(f"since {when.isoformat()} has no time zone (expected UTC)")
    moved = current != judged or res.version != version
    if moved:
        return CanaryCheck(
            "channel_moved",
            channel,
            res.version,
            judged,
            res.registration_id,
            when,
            None,
            f"channel {channel!r} is at version {res.version} serving "
            f"{res.registration_id} with canary {current or 'none'}, not canary {judged} at "
            f"version {version}: nothing judged",
        )
    end = now or dt.datetime.now(dt.UTC)
    records, _ = read_window(store, prefix, channel, when.astimezone(dt.UTC).date(), end.date())
    cmp = compare_canary(
        records,
        judged,
        res.registration_id,
        alpha=alpha,
        epsilon=epsilon,
        min_requests=min_requests,
        since=when,
    )

    def result(outcome: Outcome, detail: str) -> CanaryCheck:
        return CanaryCheck(
            outcome, channel, version, judged, res.registration_id, when, cmp, detail
        )

    if not cmp.enough:
        return result(
            "waiting",
            f"{cmp.n_canary} canary and {cmp.n_stable} stable decided requests since "
            f"{when.isoformat()} (< {min_requests} on an arm)",
        )
    if not cmp.worse:
        return result("kept", evidence(cmp))
    if not rollback:
        return result("worse", evidence(cmp))
    try:
        client.promote(
            channel,
            res.registration_id,
            expected=res.registration_id,
            expected_version=version,
            actor=actor,
            reason=evidence(cmp),
        )
    except StalePromotion as exc:
        return result(
            "lost_race",
            f"canary worse ({evidence(cmp)}) but channel {channel!r} moved since version "
            f"{version}: not rolled back ({exc})",
        )
    return result("rolled_back", evidence(cmp))
