"""Aggregation of evidence over K matched seeds (TRACE step 3, ARCHITECTURE.md).

For every (task, constraint) the K executions of one harness on the matched seeds are
reduced to a ``ConstraintStats``: pass/fail/uncertain counts, the failure rate with its
Wilson 95% interval (the uncertainty of a rate estimated from K seeds), and the
*trajectory-relative contrast*: the program and trace fields whose values separate the
passing executions of the task from its failing ones. When every seed ran the same program
(up to the seed) and the failure still flips, the contrast is empty: that failure is
generator noise, and attribution leans ``no_patch`` (``evoharness.trace.attribution``).

An incomplete seed set is an error (``IncompleteSeedsError``), never a silent gap: the gate
compares matched verdicts, so a missing seed would bias every later Δ.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scipy.stats import binomtest

from evoharness.canonical import canonical_json
from evoharness.evidence import EvidenceStatus
from evoharness.tasks.models import Task
from evoharness.trace.models import ConstraintStats, Execution

#: Trace-entry keys that vary per call without being a decision (timings, seeds, refs).
_VOLATILE_TRACE_KEYS = frozenset(
    {"seconds", "seed", "elapsed", "elapsed_s", "time", "image", "ref"}
)


class AggregationError(ValueError):
    """Executions that cannot be aggregated (missing/duplicate seeds, missing evidence)."""


class IncompleteSeedsError(AggregationError):
    """A task lacks executions on some of the matched seeds (or has extras)."""


def wilson_interval(k: int, n: int) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion ``k/n`` (Wilson 1927), via
    ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``. ``(0, 1)`` when ``n == 0``."""
    if n == 0:
        return (0.0, 1.0)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (float(ci.low), float(ci.high))


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        # lists of records (layout boxes, references): compare as one value plus their length
        out[f"{prefix}.len"] = str(len(value))
        out[prefix] = canonical_json(value).decode()
    else:
        out[prefix] = canonical_json(value).decode() if not isinstance(value, str) else value


def trajectory_fields(execution: Execution) -> dict[str, str]:
    """The comparable fields of one execution: its final program (without the seed, which
    differs by construction) as ``program.<path>`` and its decision trace as
    ``trace.<step>`` (volatile keys such as timings removed), plus ``generator_calls``.
    Values are canonical JSON strings so that they compare exactly."""
    out: dict[str, str] = {}
    prog = execution.program.model_dump(mode="json", exclude_none=True)
    prog.pop("seed", None)
    _flatten(prog, "program", out)
    if "program.layout" not in out:
        out["program.layout.len"] = "0"
    for i, entry in enumerate(execution.trace):
        name = str(entry.get("step") or entry.get("kind") or entry.get("stage") or i)
        clean = {k: v for k, v in entry.items() if k not in _VOLATILE_TRACE_KEYS}
        key = f"trace.{name}"
        val = canonical_json(clean).decode()
        out[key] = val if key not in out else out[key] + "|" + val
    out["generator_calls"] = str(execution.generator_calls)
    return out


def contrast(passing: Sequence[Execution], failing: Sequence[Execution]) -> dict[str, Any]:
    """Fields whose values separate passing from failing executions of one task.

    A field is reported when the sets of values it takes in the two groups are disjoint
    (a systematic difference), as ``{field: {"pass": [...], "fail": [...]}}``. Empty when
    either group is empty or no field separates them.
    """
    if not passing or not failing:
        return {}
    p = [trajectory_fields(e) for e in passing]
    f = [trajectory_fields(e) for e in failing]
    out: dict[str, Any] = {}
    for key in sorted(set().union(*p, *f)):
        pv = {d.get(key, "<absent>") for d in p}
        fv = {d.get(key, "<absent>") for d in f}
        if pv.isdisjoint(fv):
            out[key] = {"pass": sorted(pv), "fail": sorted(fv)}
    return out


def _program_signature(e: Execution) -> bytes:
    prog = e.program.model_dump(mode="json", exclude_none=True)
    prog.pop("seed", None)
    return canonical_json(prog)


def check_seed_sets(
    executions: Iterable[Execution], task_ids: Iterable[str], seeds: Sequence[int]
) -> None:
    """Raise ``IncompleteSeedsError`` unless every task in ``task_ids`` has exactly one
    execution per seed in ``seeds`` (and no execution is for an unknown task). The message
    names every offending task with its missing/duplicate/extra seeds."""
    want = sorted(set(seeds))
    if len(want) != len(seeds):
        raise AggregationError(f"seed list has duplicates: {list(seeds)}")
    have: dict[str, list[int]] = defaultdict(list)
    for e in executions:
        have[e.task_id].append(e.seed)
    problems: list[str] = []
    ids = list(task_ids)
    for tid in ids:
        got = have.get(tid, [])
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        dups = sorted({s for s in got if got.count(s) > 1})
        if missing or extra or dups:
            problems.append(f"{tid}: missing seeds {missing}, extra {extra}, duplicate {dups}")
    unknown = sorted(set(have) - set(ids))
    if unknown:
        problems.append(f"executions for unknown tasks {unknown}")
    if problems:
        raise IncompleteSeedsError(
            f"incomplete matched seed set (K={len(want)}, seeds {want}): " + "; ".join(problems)
        )


def aggregate(
    executions: Sequence[Execution],
    tasks: Sequence[Task] | Mapping[str, Task],
    seeds: Sequence[int],
) -> list[ConstraintStats]:
    """Aggregate ``executions`` of one harness over the matched ``seeds``.

    Returns one ``ConstraintStats`` per (task, constraint), in task then constraint order.
    ``failure_rate`` = n_fail / (n_pass + n_fail) (0 when no seed was decided; uncertain
    verdicts are counted apart). Raises ``IncompleteSeedsError`` when a task lacks a seed, and
    ``AggregationError`` when an execution has no evidence for one of its task's constraints.
    """
    task_list = list(tasks.values()) if isinstance(tasks, Mapping) else list(tasks)
    check_seed_sets(executions, [t.task_id for t in task_list], seeds)
    by_task: dict[str, list[Execution]] = defaultdict(list)
    for e in executions:
        by_task[e.task_id].append(e)
    out: list[ConstraintStats] = []
    for task in task_list:
        execs = sorted(by_task[task.task_id], key=lambda e: e.seed)
        varies = len({_program_signature(e) for e in execs}) > 1
        for c in task.constraints:
            passing: list[Execution] = []
            failing: list[Execution] = []
            n_unc = 0
            observed: list[Any] = []
            for e in execs:
                ev = next((x for x in e.evidence if x.constraint_id == c.constraint_id), None)
                if ev is None:
                    raise AggregationError(
                        f"task {task.task_id} seed {e.seed}: no evidence for constraint "
                        f"{c.constraint_id!r}"
                    )
                if ev.status is EvidenceStatus.passed:
                    passing.append(e)
                elif ev.status is EvidenceStatus.failed:
                    failing.append(e)
                    observed.append(ev.observed)
                else:
                    n_unc += 1
            decided = len(passing) + len(failing)
            out.append(
                ConstraintStats(
                    task_id=task.task_id,
                    constraint_id=c.constraint_id,
                    constraint_type=c.type.value,
                    subject=c.subject,
                    n_seeds=len(execs),
                    n_pass=len(passing),
                    n_fail=len(failing),
                    n_uncertain=n_unc,
                    failure_rate=len(failing) / decided if decided else 0.0,
                    failure_ci95=wilson_interval(len(failing), decided),
                    program_varies=varies,
                    contrast=contrast(passing, failing),
                    observed=observed,
                )
            )
    return out


def pass_rate(executions: Iterable[Execution]) -> float:
    """Mean pass rate over all (execution, constraint) verdicts; uncertain counts as not
    passed (the gate's convention). 0 when there is no verdict."""
    n = k = 0
    for e in executions:
        for ev in e.evidence:
            n += 1
            k += ev.status is EvidenceStatus.passed
    return k / n if n else 0.0
