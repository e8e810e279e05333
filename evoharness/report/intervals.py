"""Pass rates before → after with task-level 95% intervals, for the run report.

The interval is ``evoharness.trace.gate_stats.task_bootstrap`` (the gates' bootstrap: tasks
resampled with replacement, each keeping its seeds and constraints, percentile method), seeded
so a report renders the same figures twice. The difference's interval is *paired*: before and
after are computed on the same resampled tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

import numpy as np

from evoharness.report.models import PassRate
from evoharness.trace.gate_stats import task_bootstrap

#: Resamples and seed of the report's intervals (1,000 resamples: the Monte Carlo error of a
#: 2.5% percentile is well under a percentage point at these sizes).
N_RESAMPLES = 1000
SEED = 0

#: Per task: (units counted, units passed), e.g. (verdicts, passing verdicts) or (images,
#: correct images).
TaskCounts = Mapping[str, tuple[int, int]]


def _rate(
    n: np.ndarray, k: np.ndarray, groups: np.ndarray | None
) -> Callable[[np.ndarray], np.ndarray]:
    """statistic(idx (B, T)) → (B,): Σk/Σn over the resampled tasks, or with ``groups`` (a
    (G, T) 0/1 membership matrix) the mean over groups present of each group's Σk/Σn."""

    def stat(idx: np.ndarray) -> np.ndarray:
        if groups is None:
            sn, sk = n[idx].sum(axis=1), k[idx].sum(axis=1)
            return np.asarray(sk / np.where(sn > 0, sn, 1))
        m = groups[:, idx]  # (G, B, T)
        sn = (m * n[idx]).sum(axis=2)  # (G, B)
        sk = (m * k[idx]).sum(axis=2)
        present = sn > 0
        rates = np.where(present, sk / np.where(present, sn, 1), 0.0)
        return np.asarray(rates.sum(axis=0) / np.maximum(present.sum(axis=0), 1))

    return stat


def paired_rate(
    before: TaskCounts,
    after: TaskCounts,
    *,
    unit: Literal["verdicts", "images"] = "verdicts",
    groups: Mapping[str, str] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> PassRate:
    """A ``PassRate`` of the same tasks under two harnesses, with 95% intervals on before,
    after and the paired difference.

    ``before`` / ``after``: task id → (units, passed units) (``TaskCounts``; the same tasks
    in both). The rate is Σpassed / Σunits over the tasks; with ``groups`` (task id → group,
    e.g. GenEval tag) it is the mean over groups of each group's rate (GenEval overall = the
    mean of the tag accuracies). ``unit`` names what the units are (``verdicts`` or
    ``images``) for the report's column. Raises ``ValueError`` naming the tasks that only
    one side has, or a task without a group.
    """
    if set(before) != set(after):
        odd = sorted(set(before) ^ set(after))
        raise ValueError(f"paired_rate: tasks not on both sides: {odd[:5]}")
    tasks = sorted(before)
    if not tasks:
        return PassRate(before=0.0, after=0.0, n=0, tasks=0, unit=unit)
    nb = np.array([before[t][0] for t in tasks], dtype=float)
    kb = np.array([before[t][1] for t in tasks], dtype=float)
    na = np.array([after[t][0] for t in tasks], dtype=float)
    ka = np.array([after[t][1] for t in tasks], dtype=float)
    member = None
    if groups is not None:
        missing = [t for t in tasks if t not in groups]
        if missing:
            raise ValueError(f"paired_rate: tasks without a group: {missing[:5]}")
        names = sorted({groups[t] for t in tasks})
        member = np.array([[groups[t] == g for t in tasks] for g in names], dtype=float)
    rate_b, rate_a = _rate(nb, kb, member), _rate(na, ka, member)

    def delta(idx: np.ndarray) -> np.ndarray:
        return np.asarray(rate_a(idx) - rate_b(idx))

    whole = np.arange(len(tasks))[None, :]
    kw = {"n_resamples": n_resamples, "seed": seed}
    return PassRate(
        before=float(np.clip(rate_b(whole)[0], 0.0, 1.0)),
        after=float(np.clip(rate_a(whole)[0], 0.0, 1.0)),
        n=int(na.sum()),
        unit=unit,
        tasks=len(tasks),
        ci_before=task_bootstrap(len(tasks), rate_b, **kw),
        ci_after=task_bootstrap(len(tasks), rate_a, **kw),
        ci_delta=task_bootstrap(len(tasks), delta, **kw),
    )


__all__ = ["N_RESAMPLES", "SEED", "TaskCounts", "paired_rate"]
