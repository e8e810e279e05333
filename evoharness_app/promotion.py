"""Promotion of the main job's result to a channel (``make evolve`` → channel ``dev``).

The main job moves a channel only to a harness that is better than what the channel serves
now, measured on the same tasks and seeds (issue 27 item 3: a No-Patch run used to move
``dev`` from an evolved harness back to the baseline without a word). ``--force-promote``
moves it anyway, and says so.

Owns: reading what a channel serves (``serving``: only a channel that was never promoted to
means "nothing yet"; any other registry error is raised with what failed) and the decision
(``decide_promotion``, pure), and applying it (``promote``: the main job passes how to score
the channel's harness, ``evoharness_app.main_job``). Imports nothing from the main job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from evoharness.tasks.splits import TEST_SPLIT


class PromotionError(RuntimeError):
    """What a channel serves could not be read; the message names the channel, the registry
    and the registry's error. Nothing was promoted."""


class _SplitScore(Protocol):
    """A split's internal pass rate (``evoharness_app.evaluation.SplitScore``): ``constraint`` =
    passed / ``n_verdicts`` over matched (task, seed, constraint) verdicts."""

    constraint: float
    n_verdicts: int


def serving(registry: Any, channel: str) -> Any | None:
    """What ``channel`` serves now (``services.registry.client.Resolved``, with the primary's
    document), or None when the channel was never promoted to (the registry's ``NotFound``,
    gRPC NOT_FOUND). Raises ``PromotionError`` for any other registry error (unauthenticated,
    unreachable, a served registration without a document): those must not read as "no
    channel yet", or the job would promote with ``expected=None`` over a channel it cannot
    see."""
    from harness_registry.errors import NotFound, RegistryError

    where = getattr(registry, "target", "the registry")
    try:
        resolved = registry.resolve(channel, with_document=True)
    except NotFound:
        return None
    except RegistryError as exc:
        raise PromotionError(
            f"channel {channel}: could not read what it serves from the registry at {where} "
            f"({exc}); nothing was promoted"
        ) from None
    if resolved.harness is None:
        raise PromotionError(
            f"channel {channel}: the registry at {where} returned registration "
            f"{resolved.registration_id} without its harness document; nothing was promoted"
        )
    return resolved


@dataclass(frozen=True)
class PromotionDecision:
    """Whether the main job moves ``channel`` to its candidate, and the one line that says
    so. ``basis``: what was compared (the untouched test split, else the evolution splits
    pooled); ``candidate_rate`` / ``current_rate``: the internal verifier's constraint pass
    rates there over ``verdicts`` (task, seed, constraint) verdicts (None / 0 when nothing
    was compared); ``forced``: moved by ``--force-promote`` although not better."""

    channel: str
    move: bool
    line: str
    candidate_registration: str
    candidate_harness_id: str
    current_registration: str | None = None
    current_harness_id: str | None = None
    basis: str = ""
    candidate_rate: float | None = None
    current_rate: float | None = None
    forced: bool = False
    verdicts: int = 0

    def to_doc(self) -> dict[str, Any]:
        """A JSON-able dict of the decision (``summary.json``'s ``promotion``)."""
        return asdict(self)

    def to_record(self) -> Any:
        """The decision as the run report shows it (``evoharness.report.models
        .PromotionRecord``)."""
        from evoharness.report.models import PromotionRecord

        return PromotionRecord(
            channel=self.channel,
            moved=self.move,
            line=self.line,
            forced=self.forced,
            candidate_registration=self.candidate_registration,
            current_registration=self.current_registration,
            basis=self.basis,
            candidate_rate=self.candidate_rate,
            current_rate=self.current_rate,
            verdicts=self.verdicts,
        )


def _passed(scores: Mapping[str, _SplitScore], test_split: str) -> tuple[str, int, int]:
    """(basis, passed verdicts, verdicts): on ``test_split`` when scored (no gate of the run
    saw it), else every split pooled. Counts, not rates, so equal means equal."""
    names = [test_split] if test_split in scores else sorted(scores)
    basis = f"{test_split} split" if test_split in scores else "+".join(names) + " splits pooled"
    n = sum(scores[s].n_verdicts for s in names)
    passed = sum(round(scores[s].constraint * scores[s].n_verdicts) for s in names)
    return basis, passed, n


def decide_promotion(
    channel: str,
    candidate: tuple[str, str],
    current: tuple[str, str] | None,
    candidate_scores: Mapping[str, _SplitScore],
    current_scores: Mapping[str, _SplitScore] | None,
    *,
    test_split: str = "test",
    force: bool = False,
) -> PromotionDecision:
    """Decide whether ``channel`` moves from ``current`` to ``candidate`` (each
    ``(registration_id, harness_id)``; ``current`` None: never promoted to).

    ``candidate_scores`` / ``current_scores``: split → score of each harness on the same
    tasks and seeds, by the internal verifier (the main job's before/after evaluation).
    Better means strictly more passed (task, seed, constraint) verdicts on the untouched
    ``test_split`` (the split no gate of the run read, so the candidate is not favoured by
    its own selection), or on every split pooled when there is no test split. A channel that
    already serves the candidate's harness is left as it is; one that serves nothing is
    moved. ``force`` moves it although not better (``forced`` set, the line says so).
    Raises ``ValueError`` when the two harnesses were not scored on the same verdicts."""
    reg, hid = candidate
    d = PromotionDecision(channel, False, "", reg, hid)
    if current is None:
        line = f"promoted {reg} to channel {channel} (the channel served nothing yet)"
        return replace(d, move=True, line=line)
    cur_reg, cur_hid = current
    d = replace(d, current_registration=cur_reg, current_harness_id=cur_hid)
    if cur_hid == hid:
        return replace(
            d, line=f"channel {channel} already serves this harness ({cur_reg}): left as it is"
        )
    if current_scores is None:
        raise ValueError(f"channel {channel} serves {cur_reg}: its scores are needed")
    basis, c_pass, n = _passed(candidate_scores, test_split)
    basis2, s_pass, n2 = _passed(current_scores, test_split)
    if (basis, n) != (basis2, n2):
        raise ValueError(
            f"not comparable: the candidate has {n} verdicts on the {basis}, what channel "
            f"{channel} serves {n2} on the {basis2}"
        )
    c_rate, s_rate = (c_pass / n, s_pass / n) if n else (0.0, 0.0)
    d = replace(d, basis=basis, candidate_rate=c_rate, current_rate=s_rate, verdicts=n)
    figures = (
        f"{c_rate:.3f} vs {s_rate:.3f} constraint pass rate on the {basis}, {n} verdicts, "
        "same tasks and seeds"
    )
    if c_pass > s_pass:
        line = f"promoted {reg} to channel {channel}, replacing {cur_reg}: {figures}"
        return replace(d, move=True, line=line)
    if force:
        line = (
            f"promoted {reg} to channel {channel} (--force-promote), replacing {cur_reg} "
            f"although it is not better: {figures}"
        )
        return replace(d, move=True, line=line, forced=True)
    line = (
        f"channel {channel} not moved: this run's harness {reg} is not better than what it "
        f"serves ({cur_reg}): {figures}; --force-promote moves it anyway"
    )
    return replace(d, line=line)


#: Who the main job's channel moves are recorded as (its only caller).
ACTOR = "make evolve"


def promote(
    registry: Any,
    channel: str,
    candidate: tuple[str, str],
    baseline_harness_id: str,
    scores: Mapping[str, Mapping[str, _SplitScore]],
    run_id: str,
    *,
    score_current: Callable[[Any], Mapping[str, _SplitScore]],
    force: bool = False,
) -> PromotionDecision:
    """Move ``channel`` to ``candidate`` (registration id, harness id: the run's best
    harness) only when it is better than what the channel serves now (``decide_promotion``;
    ``force`` moves it anyway) and return the decision; the caller prints its ``line``.
    ``scores``: role ("before": the baseline, harness ``baseline_harness_id``; "after": the
    candidate) → split → score on the run's tasks and seeds. What the channel serves is scored
    on the same splits and seeds: the baseline's figures when it serves the baseline, else
    ``score_current(harness)`` (the main job evaluates it through the execution cache).
    Raises ``PromotionError`` when the registry cannot say what the channel serves (only a
    channel never promoted to means "nothing"), ``StalePromotion`` when it moved meanwhile."""
    now = serving(registry, channel)
    current = None if now is None else (now.registration_id, now.harness_id)
    current_scores = None
    if now is not None and now.harness_id != candidate[1]:
        if now.harness_id == baseline_harness_id:
            current_scores = scores["before"]
        else:
            current_scores = score_current(now.harness)
    decision = decide_promotion(
        channel,
        candidate,
        current,
        scores["after"],
        current_scores,
        test_split=TEST_SPLIT,
        force=force,
    )
    if decision.move:
        registry.promote(
            channel,
            candidate[0],
            expected=current[0] if current else None,
            actor=ACTOR,
            reason=f"run {run_id}" + (" (--force-promote)" if decision.forced else ""),
        )
    return decision
