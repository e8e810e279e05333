"""The preservation set: prompts the parent already passes (issue 16, "Gates that catch harm").

A preservation split drawn i.i.d. from the same families as the target split is not a
preservation set: on prompts the parent fails, a patch can only "regress" by noise and rises
by regression to the mean (it rose +0.27 in one round). What a patch must not break is what
the parent does *right*. So each round:

1. **Selection** on the analysis seeds (the K seeds that also choose the clusters): the parent
   runs on the preservation *pool* (the ``preservation`` split, family- and
   vocabulary-stratified by ``evoharness.tasks.splits``) and a task is kept when every one of
   its constraints passed on at least ``min_pass_rate`` of the selection seeds (default 1.0:
   every seed).
2. **Gating** on the fresh validation seeds (``gates.validation_seeds``), never the selection
   seeds: a task selected because it passed by luck on the selection seeds would fail more
   often on any later seeds for parent *and* candidate alike, so selecting and gating on the
   same draws would fake a regression (the winner's curse; the same reason AutoRef separates
   feedback from selection tasks).
3. **Per-family regression** (``gates.evaluate_gate`` with ``families``): besides the
   aggregate regression ≤ ε, every family with at least ``GateConfig.min_family_tasks`` (5)
   selected tasks must not regress by more than its own ε (one net flip among its verdicts);
   smaller families count only in the aggregate.

Selection is pure and deterministic (the workflow calls it on activity results).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from evoharness.tasks.models import Task
from evoharness.tasks.splits import prompt_classes


class PreservationConfig(BaseModel):
    """``enabled``: select the parent-passing set each round (False: gate on the whole
    preservation split, the old behaviour); ``min_pass_rate``: share of the selection seeds
    on which every constraint of a task must pass for the task to be kept."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    min_pass_rate: float = Field(default=1.0, gt=0, le=1)


class PreservationSet(BaseModel):
    """The round's preservation set: ``task_ids`` (pool order) the parent passes on
    ``selection_seeds``; ``pool`` = size of the preservation split; ``families`` = selected
    tasks per family; ``pool_families`` = pool tasks per family; ``classes`` = object classes
    the selected prompts name (read by the rule extractor from the prompt, never from labels);
    ``pool_classes`` = classes the pool names."""

    model_config = ConfigDict(extra="forbid")

    task_ids: list[str] = Field(default_factory=list)
    selection_seeds: list[int] = Field(default_factory=list)
    pool: int = 0
    families: dict[str, int] = Field(default_factory=dict)
    pool_families: dict[str, int] = Field(default_factory=dict)
    classes: int = 0
    pool_classes: int = 0


def select_preservation(
    pool: Sequence[Task],
    passed: Mapping[tuple[str, int], bool],
    seeds: Sequence[int],
    config: PreservationConfig | None = None,
) -> PreservationSet:
    """The tasks of ``pool`` the parent passes: ``passed[(task_id, seed)]`` is True when
    every constraint of the task passed on that seed (a missing entry counts as not passed).
    A task is kept when it passed on ``>= min_pass_rate`` of ``seeds``. With
    ``config.enabled`` False every pool task is kept. Raises ``ValueError`` for an empty seed
    list."""
    cfg = config or PreservationConfig()
    if not seeds:
        raise ValueError("select_preservation: no selection seeds")
    if cfg.enabled:
        need = cfg.min_pass_rate * len(seeds) - 1e-9
        kept = [t for t in pool if sum(passed.get((t.task_id, s), False) for s in seeds) >= need]
    else:
        kept = list(pool)
    classes: set[str] = set()
    for t in kept:
        classes |= prompt_classes(t.prompt)
    pool_classes: set[str] = set()
    for t in pool:
        pool_classes |= prompt_classes(t.prompt)
    return PreservationSet(
        task_ids=[t.task_id for t in kept],
        selection_seeds=list(seeds),
        pool=len(pool),
        families=dict(sorted(Counter(t.task_family for t in kept).items())),
        pool_families=dict(sorted(Counter(t.task_family for t in pool).items())),
        classes=len(classes),
        pool_classes=len(pool_classes),
    )


def passed_map(executions: Sequence[object]) -> dict[tuple[str, int], bool]:
    """``{(task_id, seed): every constraint passed}`` for executions (``Execution`` with
    ``evidence``, or ``ExecutionRef`` with ``n_pass``/``n_verdicts``)."""
    out: dict[tuple[str, int], bool] = {}
    for e in executions:
        ev = getattr(e, "evidence", None)
        if ev is not None:
            ok = all(getattr(x.status, "value", x.status) == "pass" for x in ev)
        else:
            ok = getattr(e, "n_pass", 0) == getattr(e, "n_verdicts", 0)
        out[(e.task_id, e.seed)] = ok  # type: ignore[attr-defined]
    return out


__all__ = [
    "PreservationConfig",
    "PreservationSet",
    "passed_map",
    "select_preservation",
]
