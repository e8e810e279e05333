"""The preservation set: prompts the parent already passes (issue 16, "Gates that catch harm").

A preservation split drawn i.i.d. from the same families as the target split is not a
preservation set: on prompts the parent fails, a patch can only "regress" by noise and rises
by regression to the mean (it rose +0.27 in one round). What a patch must not break is what
the parent does *right*. So each round:

1. **Selection** on the analysis seeds (the K seeds that also choose the clusters): the parent
   runs on the preservation *pool* (the ``preservation`` split, family- and
   vocabulary-stratified by ``evoharness.tasks.splits``) and a task is kept when every one of
   its constraints passed on at least ``min_pass_rate`` of the selection seeds (default 1.0:
   every seed). **Fallback**: when no pool task meets that, the tasks passed on at least
   ``fallback_pass_rate`` of the selection seeds (default 0.5: half) are kept instead, and the
   set says so (``PreservationSet.fallback``, ``notes``). A prompt the parent passes most of
   the time is still something a patch can break, and gating on fresh seeds keeps the
   selection from faking a regression whatever the rule; an empty set would instead leave the
   regression check with nothing to check (issue 16: a flux-like run selected no task on four
   seeds). When even the fallback keeps nothing, the set is empty and ``notes`` says that the
   regression was checked on held-out only; the gate (``GateReport.notes``) and the reports
   repeat it — never silently.
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

from evoharness.tasks.class_cover import prompt_classes
from evoharness.tasks.models import Task


class PreservationConfig(BaseModel):
    """``enabled``: select the parent-passing set each round (False: gate on the whole
    preservation split, the old behaviour); ``min_pass_rate``: share of the selection seeds
    on which every constraint of a task must pass for the task to be kept."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    min_pass_rate: float = Field(default=1.0, gt=0, le=1)
    #: when no task meets ``min_pass_rate``: keep the tasks passed on at least this share of
    #: the selection seeds (None: no fallback; a value >= ``min_pass_rate`` changes nothing)
    fallback_pass_rate: float | None = Field(default=0.5, gt=0, le=1)


class PreservationSet(BaseModel):
    """The round's preservation set: ``task_ids`` (pool order) the parent passes on
    ``selection_seeds``; ``pool`` = size of the preservation split; ``families`` = selected
    tasks per family; ``pool_families`` = pool tasks per family; ``classes`` = object classes
    the selected prompts name (read by the rule extractor from the prompt, never from labels);
    ``pool_classes`` = classes the pool names; ``min_pass_rate`` = the share of the selection
    seeds a kept task passed on (the configured rule, or the fallback's); ``fallback`` = the
    fallback rule chose the set; ``notes`` = what a reader must know (fallback used, set
    empty), repeated in the round and run reports."""

    model_config = ConfigDict(extra="forbid")

    task_ids: list[str] = Field(default_factory=list)
    selection_seeds: list[int] = Field(default_factory=list)
    pool: int = 0
    families: dict[str, int] = Field(default_factory=dict)
    pool_families: dict[str, int] = Field(default_factory=dict)
    classes: int = 0
    pool_classes: int = 0
    min_pass_rate: float = 1.0
    fallback: bool = False
    notes: list[str] = Field(default_factory=list)


#: the note of an empty preservation set (``GateReport.notes`` says the same at the gate)
EMPTY_NOTE = (
    "preservation set empty: no preservation prompt passed on the selection seeds; "
    "regression checked on held-out only"
)


def select_preservation(
    pool: Sequence[Task],
    passed: Mapping[tuple[str, int], bool],
    seeds: Sequence[int],
    config: PreservationConfig | None = None,
) -> PreservationSet:
    """The tasks of ``pool`` the parent passes: ``passed[(task_id, seed)]`` is True when
    every constraint of the task passed on that seed (a missing entry counts as not passed).
    A task is kept when it passed on ``>= min_pass_rate`` of ``seeds``; when that keeps
    nothing and ``fallback_pass_rate`` is lower, the tasks passed on ``>= fallback_pass_rate``
    of ``seeds`` are kept (``fallback`` True, a note says so): a task the parent passes most
    of the time can still regress, and the gate's fresh seeds keep selection from faking a
    regression. An empty result (empty pool, or no task passes even the fallback) carries
    ``EMPTY_NOTE``. With ``config.enabled`` False every pool task is kept. Raises
    ``ValueError`` for an empty seed list."""
    cfg = config or PreservationConfig()
    if not seeds:
        raise ValueError("select_preservation: no selection seeds")

    def passing(rate: float) -> list[Task]:
        need = rate * len(seeds) - 1e-9
        return [t for t in pool if sum(passed.get((t.task_id, s), False) for s in seeds) >= need]

    rate, fallback, notes = cfg.min_pass_rate, False, []
    if not cfg.enabled:
        kept = list(pool)
    else:
        kept = passing(cfg.min_pass_rate)
        fb = cfg.fallback_pass_rate
        if not kept and pool and fb is not None and fb < cfg.min_pass_rate:
            kept, rate, fallback = passing(fb), fb, True
            if kept:
                notes.append(
                    f"preservation fallback: no preservation prompt passed on "
                    f"{cfg.min_pass_rate:.0%} of the {len(seeds)} selection seeds; kept the "
                    f"{len(kept)} of {len(pool)} passed on at least {fb:.0%} of them"
                )
    if not kept:
        notes.append(
            EMPTY_NOTE
            if pool
            else "preservation set empty: the preservation split is empty; regression "
            "checked on held-out only"
        )
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
        min_pass_rate=rate if cfg.enabled else 0.0,
        fallback=fallback,
        notes=notes,
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


def run_notes(rounds: Sequence[object]) -> list[str]:
    """``"round N: <note>"`` for every preservation note of ``rounds`` (``RoundReport``s,
    in order): the run report's and summary's line for a fallback or an empty set."""
    out: list[str] = []
    for r in rounds:
        pres = getattr(r, "preservation", None)
        for n in pres.notes if pres is not None else ():
            out.append(f"round {r.round}: {n}")  # type: ignore[attr-defined]
    return out


__all__ = [
    "EMPTY_NOTE",
    "PreservationConfig",
    "PreservationSet",
    "passed_map",
    "run_notes",
    "select_preservation",
]
