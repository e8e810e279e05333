"""Input of the HTML run report (``evoharness.report.render_report``).

One ``RunReportInput`` describes one evolution run: its ids and dates, the baseline and final
harness, pass rates before/after per split and per GenEval tag, every round's
``evoharness.trace.models.RoundReport`` (accepted patch, No-Patch decisions with their
reasons, candidates with gate figures, cost), and before/after image pairs of the same task
and seed with per-constraint verdicts.

Pass rates are fractions in 0..1: the mean over matched (task, seed, constraint) verdicts,
the same figure the gate uses (docs/architecture.md, "Gates are statistical").
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoharness.evidence import EvidenceStatus
from evoharness.report.agent import AgentTrajectory
from evoharness.trace.models import RoundReport


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: A 95% interval (low, high) on a fraction or a difference of fractions.
Interval = tuple[float, float]


class PassRate(_Model):
    """A pass rate before (baseline harness) and after (final harness), each in 0..1.
    ``n`` counts the ``unit`` behind each figure (``verdicts``: matched (task, seed,
    constraint) verdicts; ``images``: (task, seed) images, GenEval's unit); ``tasks`` the
    tasks they come from (0: not recorded). ``ci_*``: task-level bootstrap 95% intervals
    (``evoharness.report.intervals.paired_rate``; the difference's is paired), None when not
    computed."""

    before: float = Field(ge=0.0, le=1.0)
    after: float = Field(ge=0.0, le=1.0)
    n: int = Field(default=0, ge=0)
    unit: Literal["verdicts", "images"] = "verdicts"
    tasks: int = Field(default=0, ge=0)
    ci_before: Interval | None = None
    ci_after: Interval | None = None
    ci_delta: Interval | None = None

    @property
    def delta(self) -> float:
        """``after - before`` (net change in mean pass rate)."""
        return self.after - self.before


class VerifierScores(_Model):
    """One split scored two ways, before → after: by evolution's *internal* verifier (what
    the gates saw, e.g. ``sim-detector``, which errs like a real detector) and by the
    *official* scorer (the exact inspector with GenEval's rules: an image is correct when all
    its constraints hold; overall = mean of the six tags). ``*_constraint``: mean pass rate
    over matched (task, seed, constraint) verdicts; ``*_geneval``: GenEval overall (None when
    the split has no GenEval task). A harness that pleases the internal verifier but not the
    official scorer shows as an internal gain the official columns do not share."""

    internal_constraint: PassRate
    official_constraint: PassRate
    internal_geneval: PassRate | None = None
    official_geneval: PassRate | None = None


class ConstraintVerdict(_Model):
    """The verifier's verdict on one constraint in the before and the after image
    (``ImagePair.verifier`` names the verifier); ``official_before`` / ``official_after``:
    the official scorer's on the same images (None: not scored)."""

    constraint_id: str
    type: str
    description: str = ""
    before: EvidenceStatus
    after: EvidenceStatus
    note: str = ""
    official_before: EvidenceStatus | None = None
    official_after: EvidenceStatus | None = None


class ImagePair(_Model):
    """The same task and seed rendered by the baseline and by the final harness.

    ``before_png`` / ``after_png`` are local PNG files; the report embeds them (data URIs) or
    copies them beside the HTML, never links to remote or presigned URLs.
    """

    task_id: str
    prompt: str
    seed: int = Field(ge=0)
    split: str = ""
    task_family: str = ""
    before_png: Path
    after_png: Path
    verdicts: list[ConstraintVerdict] = Field(default_factory=list)
    #: the verifier whose verdicts ``verdicts`` are (e.g. the internal ``sim-detector@…``)
    verifier: str = ""
    #: why this pair is shown: "improved", "regressed", "unchanged failure", "unchanged
    #: pass", or "example of patch <candidate_id>" (shown as the card's label)
    label: str = ""
    #: the agent's run on this request by each harness (``report.agent.agent_trajectory`` of
    #: the execution's trace); None: that harness ran no agent
    agent_before: AgentTrajectory | None = None
    agent_after: AgentTrajectory | None = None


class RequestCost(_Model):
    """What one request (one task and seed) costs a harness, measured on the same requests
    for both: ``generator_calls`` per request (every image generated, repairs and best-of-N
    candidates included, cached or not) and ``generator_seconds`` per request (what those
    calls cost when made: ``Execution.nominal_generator_seconds``). ``requests`` counts them."""

    generator_calls: float = Field(ge=0.0)
    generator_seconds: float = Field(ge=0.0)
    requests: int = Field(ge=0)


class PromotionRecord(_Model):
    """Whether the run moved a registry channel to its harness, and what that rests on (the
    main job's promotion decision, ``evoharness_app.promotion.PromotionDecision``):
    ``moved``; ``forced`` (moved by ``--force-promote`` although not better); ``line`` (the
    decision's one line, as the console prints it); the candidate's and the current
    registration; ``basis`` (what was compared: the untouched test split, else the evolution
    splits pooled) and the two internal-verifier constraint pass rates there over
    ``verdicts`` (task, seed, constraint) verdicts, same tasks and seeds (None / 0 when
    nothing was compared: the channel served nothing, or already served this harness)."""

    channel: str = Field(min_length=1)
    moved: bool
    line: str
    forced: bool = False
    candidate_registration: str = ""
    current_registration: str | None = None
    basis: str = ""
    candidate_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    current_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    verdicts: int = Field(default=0, ge=0)


class TransferScores(_Model):
    """How much of a run's gain carries over to prompts no evolution split came from (issue
    30 item 4; built by ``evoharness_app.transfer``). ``sources``: dataset → tasks of the
    transfer set (T2I-CompBench training prompts, PartiPrompts); ``nothing_checkable``:
    dataset → prompts passed over because the extractor read nothing checkable from them;
    ``extractor``: the fixed extractor that read every transfer constraint (no benchmark
    label); ``evolution_sources``: dataset → tasks of the evolution splits (disjoint from
    ``sources``); ``seeds``: matched seeds per task. ``official`` / ``internal``: the transfer
    set's constraint pass rate before → after by the official scorer and the internal
    verifier (``PassRate``, task-level bootstrap intervals, the difference's paired);
    ``test_official``: the untouched test split's official constraint pass rate, the gain
    ``gain_kept`` divides by (None: no test split)."""

    sources: dict[str, int]
    nothing_checkable: dict[str, int] = Field(default_factory=dict)
    extractor: str = ""
    evolution_sources: dict[str, int] = Field(default_factory=dict)
    seeds: int = Field(default=0, ge=0)
    official: PassRate
    internal: PassRate
    test_official: PassRate | None = None

    @property
    def gain_kept(self) -> float | None:
        """Transfer gain / test gain, both official constraint pass rate (the one measure
        defined on both sets: transfer prompts have no GenEval tags); None when there is no
        test split or its gain is ≤ 0 (a share of no gain means nothing)."""
        t = self.test_official
        if t is None or t.delta <= 0:
            return None
        return self.official.delta / t.delta


class RunReportInput(_Model):
    """Everything the run report shows. ``split_pass_rates`` is keyed by split (``target``,
    ``heldout``, ``preservation``); ``tag_pass_rates`` by GenEval tag (``counting``, ...).
    ``currency`` labels money figures found in round costs (keys ending in ``_usd`` or
    ``money``). ``verifier_scores`` (by split) puts the internal verifier's and the official
    scorer's figures side by side; ``internal_verifier`` / ``official_verifier`` name them.
    ``beams``: each round report's beam branch (0: the head's; one per entry of ``rounds``,
    or empty when the run had no beam); a round with B branches has B round reports.
    ``unreadable_rounds``: round reports that could not be read (``"<key>: <error>"``), shown
    at the top of the page. ``request_cost``: ``baseline`` / ``final`` cost per request;
    ``spend``: what evolution spent (in ``currency``), as the console prints it.
    ``promotion``: whether the run moved a channel to its harness, and why (None: no
    promotion was decided)."""

    run_id: str = Field(min_length=1)
    title: str = "evoharness run report"
    started_at: datetime
    finished_at: datetime | None = None
    generator_id: str = ""
    baseline_harness_id: str
    final_harness_id: str
    split_pass_rates: dict[str, PassRate] = Field(default_factory=dict)
    tag_pass_rates: dict[str, PassRate] = Field(default_factory=dict)
    tag_split: str = ""  # the split the per-tag figures are measured on ("" = unspecified)
    verifier_scores: dict[str, VerifierScores] = Field(default_factory=dict)
    internal_verifier: str = ""
    official_verifier: str = ""
    #: how evolution read its tasks (label-free with the extractor, or benchmark labels; the
    #: overlap check), shown at the top of the report
    mode: str = ""
    #: label-free runs: the task ids of the prompts from which the extractor read nothing
    #: checkable (left out of evolution, never counted as passes; issue 19) and how many
    #: prompts it read (0: not recorded); None when nothing was extracted (benchmark labels)
    #: or the run's mode is not known
    nothing_checkable: list[str] | None = None
    prompts_read: int = Field(default=0, ge=0)
    rounds: list[RoundReport] = Field(default_factory=list)
    beams: list[int] = Field(default_factory=list)
    unreadable_rounds: list[str] = Field(default_factory=list)
    request_cost: dict[str, RequestCost] = Field(default_factory=dict)
    spend: float | None = None
    promotion: PromotionRecord | None = None
    #: baseline → evolved on the transfer set (None: not measured, ``--transfer 0``)
    transfer: TransferScores | None = None
    image_pairs: list[ImagePair] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    currency: str = "USD"

    @model_validator(mode="after")
    def _dates_in_order(self) -> RunReportInput:
        if self.finished_at is not None and self.finished_at < self.started_at:
            raise ValueError(
                f"finished_at {self.finished_at.isoformat()} is before started_at "
                f"{self.started_at.isoformat()}"
            )
        if self.beams and len(self.beams) != len(self.rounds):
            raise ValueError(
                f"beams: {len(self.beams)} beam indices for {len(self.rounds)} round reports"
            )
        return self


__all__ = [
    "ConstraintVerdict",
    "ImagePair",
    "Interval",
    "PassRate",
    "RequestCost",
    "RunReportInput",
    "TransferScores",
    "VerifierScores",
]
