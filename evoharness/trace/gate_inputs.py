"""The validation gate's inputs: matched-verdict checks and the per-task quantities the gate
tests and reports (per-task pass-rate differences d_t, relative cost savings s_t, per-family
preservation regressions). Formulae in ``evoharness.trace.gates`` (moved from there, issue 29).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from evoharness.trace.gate_stats import Verdicts


class GateInputError(ValueError):
    """Verdicts that are not matched (different keys for parent and candidate) or empty."""


@dataclass(frozen=True)
class GateEvidence:
    """What the gate reads beyond the final verdicts and the generator-seconds, each None
    when not known (``gates.evaluate_gate`` says how each is used):

    ``families``: task_id → family of the preservation tasks (per-family regression);
    ``first_attempt``: (parent, candidate) matched verdicts of the first attempts of the
    target and held-out tasks; ``calls``: (parent, candidate) generator calls per task
    (summed over seeds); ``reference_cost``: generator-seconds per task of the reference
    configuration (None: the parent is the reference)."""

    families: Mapping[str, str] | None = None
    first_attempt: tuple[Verdicts, Verdicts] | None = None
    calls: tuple[Mapping[str, float], Mapping[str, float]] | None = None
    reference_cost: Mapping[str, float] | None = None


def check_matched(split: str, parent: Verdicts, candidate: Verdicts) -> None:
    if set(parent) != set(candidate):
        only_p = sorted(set(parent) - set(candidate))[:3]
        only_c = sorted(set(candidate) - set(parent))[:3]
        raise GateInputError(
            f"split {split}: verdicts are not matched (only parent: {only_p}, only candidate: "
            f"{only_c}; {len(set(parent) ^ set(candidate))} keys differ)"
        )


def net_delta(parent: Verdicts, candidate: Verdicts) -> float:
    if not parent:
        return 0.0
    return (sum(candidate.values()) - sum(parent.values())) / len(parent)


def per_task_counts(parent: Verdicts, candidate: Verdicts) -> dict[str, tuple[int, int, int]]:
    """task → (n verdicts, parent passes, candidate passes)."""
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for k, v in parent.items():
        a = acc[k[0]]
        a[0] += 1
        a[1] += int(v)
        a[2] += int(candidate[k])
    return {t: (a[0], a[1], a[2]) for t, a in acc.items()}


def task_deltas(parent: Verdicts, candidate: Verdicts) -> dict[str, float]:
    """d_t per task: mean over the task's matched (seed, constraint) verdicts of
    candidate − parent (each in {0, 1}), so d_t ∈ [−1, 1]. Keys in first-seen order."""
    return {t: (c - p) / n for t, (n, p, c) in per_task_counts(parent, candidate).items()}


def cost_savings(
    target: Verdicts, parent_cost: Mapping[str, float], candidate_cost: Mapping[str, float]
) -> dict[str, float]:
    """s_t per target task (the tasks of ``target``'s verdict keys): (parent − candidate)
    generator-seconds over the parent's mean cost per target task, so Σ s_t / T is the
    relative saving. A task missing from a cost map costs 0 there; all 0 when the parent
    spent nothing."""
    tasks = list(dict.fromkeys(k[0] for k in target))
    mean = sum(parent_cost.get(t, 0.0) for t in tasks) / len(tasks) if tasks else 0.0
    if mean <= 0:
        return {t: 0.0 for t in tasks}
    return {t: (parent_cost.get(t, 0.0) - candidate_cost.get(t, 0.0)) / mean for t in tasks}


def family_regressions(
    parent: Verdicts,
    candidate: Verdicts,
    families: Mapping[str, str],
    min_tasks: int,
    epsilon_floor: float,
) -> dict[str, dict[str, float]]:
    """Per-family regression on matched preservation verdicts: for every family (``families``:
    task_id → family; a task not in it is family ``""``) with at least ``min_tasks`` tasks,
    ``{family: {tasks, verdicts, delta, regression, epsilon}}`` where delta = the family's net
    change in pass rate, regression = max(0, −delta) and epsilon = max(``epsilon_floor``,
    1/verdicts) (one net flip). Families below ``min_tasks`` are left out (they count in the
    aggregate regression only). Sorted by family name."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    tasks: dict[str, set[str]] = defaultdict(set)
    for k, v in parent.items():
        f = families.get(k[0], "")
        a = per[f]
        a[0] += 1
        a[1] += int(v)
        a[2] += int(candidate[k])
        tasks[f].add(k[0])
    out: dict[str, dict[str, float]] = {}
    for f in sorted(per):
        if len(tasks[f]) < min_tasks:
            continue
        n, p, c = per[f]
        delta = (c - p) / n
        out[f] = {
            "tasks": float(len(tasks[f])),
            "verdicts": float(n),
            "delta": delta,
            "regression": max(0.0, -delta),
            "epsilon": max(epsilon_floor, 1.0 / n),
        }
    return out
