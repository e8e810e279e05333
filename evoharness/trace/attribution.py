"""Attribution: scores over the five responsibilities plus ``no_patch`` per failure cluster
(TRACE step 4, docs/architecture.md).

Two sources are combined, and the result records both:

- the **localizer's** scores (the LLM localizer, or the embedded rule-based one in
  ``evoharness.trace.rule_proposer.localize``);
- **evidence signals** from aggregation: a member that flips between seeds of one unchanged
  program with no systematic contrast, while passing on most seeds (failure rate ≤
  ``NOISE_MAX_FAILURE_RATE``), is generator noise —
  no persistent change of the prompt, tools, skills or memory should chase it, so it votes
  ``no_patch``; a member that fails on every seed, or whose failing seeds ran a different
  program than its passing ones, is systematic and votes for the cluster's responsibility hint.
- **resampling** (``worth_resampling``): seed noise is what run-time resampling with a
  verifier fixes on real generators — best-of-N keeps the sample a verifier scores best,
  verify-and-repair re-draws a failing one (Karthik et al. 2023, "If at first you don't
  succeed, try, try again"; Ma et al. 2025, "Inference-time scaling for diffusion models
  beyond scaling denoising steps", verifier-guided search; Xie et al. 2025, "SANA 1.5",
  best-of-N with a VLM judge) — at the price of the extra generations. So a failure
  cluster's noisy members vote ``middleware`` instead of ``no_patch`` when they are material:
  their pooled failure rate is at least ``RESAMPLE_MIN_FAILURE_RATE`` and they span at least
  ``RESAMPLE_MIN_TASKS`` distinct tasks (the fewest changed tasks the gate's task-level test
  can ever call significant, ``gate_stats.min_changed_tasks``). Whether the gain is worth the
  price is the gate's decision: Δcost (generator-seconds) enters its utility, and a
  middleware candidate that does not pay, or cannot be shown to help, is refused there and
  the round ends No-Patch. Noise below either floor still votes ``no_patch``: no patch could
  be shown to help it.

Combined score = ``w_localizer · localizer + (1 − w_localizer) · evidence``, renormalised to sum
to 1; ``chosen`` is the argmax (ties broken in ``LABELS`` order, ``no_patch`` last).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evoharness.harness.schema import Responsibility
from evoharness.trace.gate_config import GateConfig
from evoharness.trace.gate_stats import min_changed_tasks
from evoharness.trace.models import Attribution, ConstraintStats, FailureCluster

NO_PATCH = "no_patch"
#: Attribution labels: the five responsibilities, then ``no_patch``.
LABELS: tuple[str, ...] = (*(r.value for r in Responsibility), NO_PATCH)


def _normalize(scores: Mapping[str, float]) -> dict[str, float]:
    clean = {k: max(0.0, float(scores.get(k, 0.0))) for k in LABELS}
    total = sum(clean.values())
    if total <= 0:
        return {k: 1.0 / len(LABELS) for k in LABELS}
    return {k: v / total for k, v in clean.items()}


#: A flipping failure counts as noise only when it fails on at most this share of seeds
#: (one seed in four at K = 4): a constraint failing on 2 of 4 seeds of the same program is a
#: systematic weakness of the generator that a harness change (layout, rewrite) can fix.
NOISE_MAX_FAILURE_RATE = 0.25


def is_noise(stats: ConstraintStats, max_failure_rate: float = NOISE_MAX_FAILURE_RATE) -> bool:
    """True when a (task, constraint) failure looks like generator noise: it flips between
    seeds (some pass, some fail), the program did not vary (or no field separates passing from
    failing seeds), and it fails on at most ``max_failure_rate`` of the decided seeds."""
    flips = stats.n_pass > 0 and stats.n_fail > 0
    return (
        flips
        and (not stats.program_varies or not stats.contrast)
        and stats.failure_rate <= max_failure_rate
    )


#: Resampling is worth proposing for a cluster's noisy members only when they fail on at least
#: this share of their decided seeds, pooled: below one failure in ten draws, what a
#: resampling can win on them is of the order of a verifier's own error rate (open-vocabulary
#: detectors and VLM judges miss or invent objects on several percent of images), so the extra
#: generations would mostly buy the verifier's mistakes.
RESAMPLE_MIN_FAILURE_RATE = 0.1
#: ... and when they span at least this many distinct tasks: the gate's unit is the task, and
#: with fewer changed tasks its exact one-sided test cannot reach significance at the default
#: level however large the effect (``gate_stats.min_changed_tasks``: 6 at alpha = 0.0294).
RESAMPLE_MIN_TASKS = min_changed_tasks(GateConfig().alpha)
#: Where material seed noise is sent: the responsibility whose run-time stages resample.
RESAMPLE_RESPONSIBILITY = Responsibility.middleware.value


def pooled_failure_rate(members: Sequence[ConstraintStats]) -> float:
    """Failures over decided seeds, pooled over ``members`` (0 when none was decided)."""
    decided = sum(m.n_pass + m.n_fail for m in members)
    return sum(m.n_fail for m in members) / decided if decided else 0.0


def worth_resampling(
    noisy: Sequence[ConstraintStats],
    min_failure_rate: float = RESAMPLE_MIN_FAILURE_RATE,
    min_tasks: int = RESAMPLE_MIN_TASKS,
) -> bool:
    """True when seed-noise members (``is_noise``) are material enough for a resampling
    middleware to be worth gating: pooled failure rate ≥ ``min_failure_rate`` and at least
    ``min_tasks`` distinct tasks among them (module docstring, "resampling")."""
    tasks = {m.task_id for m in noisy}
    return len(tasks) >= min_tasks and pooled_failure_rate(noisy) >= min_failure_rate


def evidence_scores(
    cluster: FailureCluster, stats_by_key: Mapping[tuple[str, str], ConstraintStats]
) -> tuple[dict[str, float], list[str]]:
    """Evidence-based scores for ``cluster`` and the reasons. The share of noisy members
    (``is_noise``) goes to ``no_patch``, or to ``middleware`` (resampling) when the cluster is
    a failure cluster and its noisy members are material (``worth_resampling``); the
    responsibility hint gets the rest."""
    members = [stats_by_key[tuple(m)] for m in cluster.members if tuple(m) in stats_by_key]  # type: ignore[index]
    if not members:
        return {cluster.responsibility_hint: 1.0}, ["no member stats; evidence follows the hint"]
    noisy = [m for m in members if is_noise(m)]
    share = len(noisy) / len(members)
    resample = cluster.kind == "failure" and worth_resampling(noisy)
    noise_label = RESAMPLE_RESPONSIBILITY if resample else NO_PATCH
    scores: dict[str, float] = {NO_PATCH: 0.0}
    scores[noise_label] = share
    scores[cluster.responsibility_hint] = scores.get(cluster.responsibility_hint, 0.0) + 1 - share
    n_tasks = len({m.task_id for m in noisy})
    rate = pooled_failure_rate(noisy)
    reasons = [
        f"evidence: {len(noisy)}/{len(members)} members flip between seeds of an unchanged "
        f"program with no systematic contrast (noise share {share:.2f})",
        f"evidence: {len(members) - len(noisy)}/{len(members)} members fail systematically "
        f"(hint {cluster.responsibility_hint}, symptom {cluster.symptom})",
    ]
    if noisy:
        reasons.append(
            f"evidence: the noisy members span {n_tasks} task(s) at a pooled failure rate of "
            f"{rate:.2f}; "
            + (
                f"material (>= {RESAMPLE_MIN_TASKS} tasks, >= {RESAMPLE_MIN_FAILURE_RATE}): "
                "seed noise votes middleware (resampling with a verifier; the gate prices its "
                "extra generations)"
                if resample
                else f"below the resampling floors ({RESAMPLE_MIN_TASKS} tasks, failure rate "
                f"{RESAMPLE_MIN_FAILURE_RATE}) or a cost cluster: seed noise votes no_patch"
            )
        )
    return scores, reasons


def attribute(
    clusters: Sequence[FailureCluster],
    stats: Sequence[ConstraintStats],
    localizer: Sequence[Attribution] = (),
    w_localizer: float = 0.5,
) -> list[Attribution]:
    """Combine localizer attributions with evidence signals, one ``Attribution`` per cluster.

    ``localizer`` attributions are matched by ``cluster_id``; a cluster the localizer did not
    score uses the evidence alone (recorded in ``reasons``). ``w_localizer`` in [0, 1].
    Raises ``ValueError`` for a weight outside [0, 1] or a localizer label outside ``LABELS``.
    """
    if not 0.0 <= w_localizer <= 1.0:
        raise ValueError(f"w_localizer={w_localizer} must be in [0, 1]")
    by_key = {(s.task_id, s.constraint_id): s for s in stats}
    loc = {a.cluster_id: a for a in localizer}
    out = []
    for c in clusters:
        ev, reasons = evidence_scores(c, by_key)
        ev_n = _normalize(ev)
        a = loc.get(c.cluster_id)
        if a is not None:
            bad = sorted(set(a.scores) - set(LABELS))
            if bad:
                raise ValueError(
                    f"localizer scored unknown labels {bad} for cluster {c.cluster_id}"
                )
            loc_n = _normalize(a.scores)
            combined = {k: w_localizer * loc_n[k] + (1 - w_localizer) * ev_n[k] for k in LABELS}
            reasons = [f"localizer chose {a.chosen}: " + "; ".join(a.reasons)] + reasons
        else:
            combined = ev_n
            reasons = ["no localizer score for this cluster; evidence only", *reasons]
        combined = _normalize(combined)
        chosen = max(LABELS, key=lambda k: (combined[k], -LABELS.index(k)))
        reasons.append(
            f"combined (w_localizer={w_localizer}): chosen {chosen} ({combined[chosen]:.2f})"
        )
        out.append(
            Attribution(
                cluster_id=c.cluster_id,
                scores={k: round(v, 6) for k, v in combined.items()},
                chosen=chosen,
                reasons=reasons,
            )
        )
    return out
