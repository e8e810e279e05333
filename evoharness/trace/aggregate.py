"""Aggregation of evidence over K matched seeds (TRACE step 3, docs/architecture.md).

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

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import binomtest

from evoharness.canonical import canonical_json
from evoharness.evidence import EvidenceStatus
from evoharness.program import Program
from evoharness.tasks.models import Task
from evoharness.trace.models import ConstraintStats, Execution

#: Keys that vary per call or report an outcome rather than a decision: seeds, timings,
#: execution keys and generator ids, verdicts and scores, attempt indices. Removed at every
#: nesting level before fields are compared.
VOLATILE_KEYS = frozenset(
    {
        "seed",
        "seconds",
        "elapsed",
        "elapsed_s",
        "time",
        "image",
        "ref",
        "execution_key",
        "generator_id",
        "statuses",
        "status",
        "score",
        "scores",
        "index",
        "attempt",
        "failing",
        "note",
        "chosen",
    }
)

#: Trace responsibilities whose entries are harness decisions (rewrites, tool calls and their
#: outputs, skills that fired, memory applied). Middleware entries record candidates, seeds,
#: generations, verdicts and selection — outcomes — except ``repair.compile`` (what the
#: repair decided to change), kept without its verdict fields.
DECISION_RESPONSIBILITIES = frozenset({"policy", "tools", "skills", "memory"})
_DECISION_MIDDLEWARE_STEPS = frozenset({"repair.compile"})
#: Policy steps that restate the program (compared as ``program.*`` already).
_RESTATED_STEPS = frozenset({"program"})


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


def _strip(value: Any) -> Any:
    """``value`` without ``VOLATILE_KEYS`` at any nesting level; a rewrite's ``source``
    (``repair:<attempt>:<constraint>``) is reduced to its kind (``repair``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in VOLATILE_KEYS:
                continue
            if k == "source" and isinstance(v, str):
                v = v.split(":", 1)[0]
            out[k] = _strip(v)
        return out
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


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


def is_decision_entry(entry: Mapping[str, Any]) -> bool:
    """True for a trace entry that records a harness decision (``DECISION_RESPONSIBILITIES``,
    or the middleware's ``repair.compile``), except steps that restate the program."""
    resp = entry.get("responsibility")
    step = entry.get("step")
    if resp == "middleware":
        return step in _DECISION_MIDDLEWARE_STEPS
    return resp in DECISION_RESPONSIBILITIES and step not in _RESTATED_STEPS


def _decided_program(program: Program) -> dict[str, Any]:
    """``program`` as JSON without its seed and without unset (None) fields: what the harness
    decided for a request, whatever the seed."""
    prog = program.model_dump(mode="json", exclude_none=True)
    prog.pop("seed", None)
    return prog


def decision_fields(program: Program, entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The fields a harness decides for one generation attempt, as canonical JSON strings:
    the program without its seed as ``program.<path>`` (``program.layout.len`` is ``0``
    without a layout), and each decision trace entry (``is_decision_entry``) as
    ``trace.<responsibility>.<step>[.<tool|skill|kind>]`` with ``VOLATILE_KEYS`` removed at
    every level (repeated entries are joined with ``|``). Seeds, execution keys, verdicts and
    scores never appear."""
    out: dict[str, str] = {}
    _flatten(_decided_program(program), "program", out)
    if "program.layout.len" not in out:
        out["program.layout.len"] = "0"
    for entry in entries:
        if not is_decision_entry(entry):
            continue
        name = f"trace.{entry.get('responsibility')}.{entry.get('step')}"
        what = entry.get("tool") or entry.get("skill") or entry.get("kind")
        if isinstance(what, str):
            name += f".{what}"
        val = canonical_json(_strip(dict(entry))).decode()
        out[name] = val if name not in out else out[name] + "|" + val
    return out


@dataclass(frozen=True)
class Attempt:
    """One generation attempt of an execution (the initial candidate, a best-of-N candidate,
    a repair): its program, the decision trace entries that compiled it, the runtime's
    verdicts on it as ``{(constraint type, subject): status}`` (from the trace's ``verify``
    step, empty without one) and whether it is the selected attempt."""

    index: int
    program: Program
    entries: tuple[Mapping[str, Any], ...]
    statuses: Mapping[tuple[str, str], str]
    selected: bool

    def status_of(self, constraint_type: str, subject: str, n_of_type: int) -> str | None:
        """The runtime's verdict on this attempt for the task constraint (``constraint_type``,
        ``subject``): the exact (type, subject) match, else — when the task has exactly one
        constraint of that type (``n_of_type == 1``) and this attempt verified exactly one of
        that type — that one. None when neither lines up.

        Why the fallback: the runtime extracts constraints from the *compiled* prompt, so a
        harness whose rewrites changed the prompt (a counterfactual probe that removed a
        rewrite, "three dogs" → "3 dogs") names the same constraint with another subject;
        matched by subject alone its verdicts would be lost, and the first attempt would
        silently take the final verdict. With two constraints of one type the pairing is
        ambiguous and nothing is guessed."""
        exact = self.statuses.get((constraint_type, subject))
        if exact is not None or n_of_type != 1:
            return exact
        same = [st for (t, _), st in self.statuses.items() if t == constraint_type]
        return same[0] if len(same) == 1 else None


def attempts(execution: Execution) -> list[Attempt]:
    """Every attempt of ``execution``, in generation order, read from its trace (attempts start
    at middleware ``candidate`` steps; the ``extract`` step's constraints map the runtime's
    constraint ids to (type, subject); ``select`` names the chosen attempt) and
    ``execution.programs``. An execution whose trace has no ``candidate`` step is one attempt
    (its final program, every trace entry)."""
    trace = execution.trace
    starts = [
        i
        for i, e in enumerate(trace)
        if e.get("responsibility") == "middleware" and e.get("step") == "candidate"
    ]
    programs = list(execution.programs) or [execution.program]
    if not starts or len(starts) != len(programs):
        return [Attempt(0, execution.program, tuple(trace), {}, True)]
    chosen = next(
        (int(e["chosen"]) for e in trace if e.get("step") == "select" and "chosen" in e),
        len(programs) - 1,
    )
    out = []
    for n, (i, j) in enumerate(zip(starts, [*starts[1:], len(trace)], strict=True)):
        entries = trace[i:j]
        ids: dict[str, tuple[str, str]] = {}
        statuses: dict[tuple[str, str], str] = {}
        for e in entries:
            if e.get("step") == "extract":
                for c in e.get("constraints") or []:
                    ids.setdefault(
                        str(c.get("constraint_id")), (str(c.get("type")), str(c.get("subject")))
                    )
            elif e.get("step") == "verify":
                for cid, st in (e.get("statuses") or {}).items():
                    if cid in ids:
                        statuses.setdefault(ids[cid], str(st))
        out.append(Attempt(n, programs[n], tuple(entries), statuses, n == chosen))
    return out


def trajectory_fields(execution: Execution) -> dict[str, str]:
    """``decision_fields`` of the selected attempt of ``execution`` (the program that made the
    evaluated image and the decisions that compiled it)."""
    sel = next(a for a in attempts(execution) if a.selected)
    return decision_fields(sel.program, sel.entries)


def contrast(
    passing: Sequence[Mapping[str, str]], failing: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """Fields whose values separate passing from failing attempts of one task.

    ``passing``/``failing``: ``decision_fields`` of each attempt. A field is reported when
    the sets of values it takes in the two groups are disjoint (a systematic difference), as
    ``{field: {"pass": [...], "fail": [...]}}``. Empty when either group is empty or no field
    separates them — in particular when one unchanged program both passes and fails.
    """
    if not passing or not failing:
        return {}
    out: dict[str, Any] = {}
    for key in sorted(set().union(*passing, *failing)):
        pv = {d.get(key, "<absent>") for d in passing}
        fv = {d.get(key, "<absent>") for d in failing}
        if pv.isdisjoint(fv):
            out[key] = {"pass": sorted(pv), "fail": sorted(fv)}
    return out


def _signature(program: Program) -> bytes:
    return canonical_json(_decided_program(program))


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
    ``failure_rate`` = n_fail / (n_pass + n_fail) over the final (selected) images (0 when no
    seed was decided; uncertain verdicts are counted apart). Every attempt is evidence
    (``attempts``): the selected attempt carries the inspector's verdict, the others the
    runtime's own verdicts from the trace, matched to the task's constraint by (type,
    subject), or by type alone when the task has one constraint of that type
    (``Attempt.status_of``); ``n_first_fail`` counts seeds whose first attempt failed (a failure that repair
    or best-of-N fixed is still a first-attempt failure), ``n_attempts`` every attempt over the
    seeds, and ``contrast`` compares the ``decision_fields`` of passing and failing attempts. Raises ``IncompleteSeedsError`` when a task lacks a seed, and
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
        tries = [attempts(e) for e in execs]
        fields = [[decision_fields(a.program, a.entries) for a in at] for at in tries]
        varies = len({_signature(a.program) for at in tries for a in at}) > 1
        n_of_type = Counter(c.type.value for c in task.constraints)
        for c in task.constraints:
            key = (c.type.value, c.subject)
            n_pass = n_fail = n_unc = n_first_fail = 0
            observed: list[Any] = []
            pass_fields: list[dict[str, str]] = []
            fail_fields: list[dict[str, str]] = []
            for e, at, fs in zip(execs, tries, fields, strict=True):
                ev = next((x for x in e.evidence if x.constraint_id == c.constraint_id), None)
                if ev is None:
                    raise AggregationError(
                        f"task {task.task_id} seed {e.seed}: no evidence for constraint "
                        f"{c.constraint_id!r}"
                    )
                if ev.status is EvidenceStatus.passed:
                    n_pass += 1
                elif ev.status is EvidenceStatus.failed:
                    n_fail += 1
                    observed.append(ev.observed)
                else:
                    n_unc += 1
                for i, (a, f) in enumerate(zip(at, fs, strict=True)):
                    status = (
                        ev.status.value
                        if a.selected
                        else a.status_of(key[0], key[1], n_of_type[key[0]])
                    )
                    if status == EvidenceStatus.passed.value:
                        pass_fields.append(f)
                    elif status == EvidenceStatus.failed.value:
                        fail_fields.append(f)
                        n_first_fail += i == 0
            decided = n_pass + n_fail
            out.append(
                ConstraintStats(
                    task_id=task.task_id,
                    constraint_id=c.constraint_id,
                    constraint_type=c.type.value,
                    subject=c.subject,
                    n_seeds=len(execs),
                    n_pass=n_pass,
                    n_fail=n_fail,
                    n_uncertain=n_unc,
                    failure_rate=n_fail / decided if decided else 0.0,
                    failure_ci95=wilson_interval(n_fail, decided),
                    program_varies=varies,
                    contrast=contrast(pass_fields, fail_fields),
                    observed=observed,
                    n_first_fail=n_first_fail,
                    n_attempts=sum(len(at) for at in tries),
                    n_attempts_failed=len(fail_fields),
                )
            )
    return out


def pass_rate(executions: Iterable[Any]) -> float:
    """Mean pass rate over all (execution, constraint) verdicts; uncertain counts as not
    passed (the gate's convention). 0 when there is no verdict. Reads an ``Execution``'s
    ``evidence``, or the verdict counts ``n_pass``/``n_verdicts`` of a record without it
    (the workflows' ``ExecutionRef``)."""
    n = k = 0
    for e in executions:
        evidence = getattr(e, "evidence", None)
        if evidence is None:
            n += e.n_verdicts
            k += e.n_pass
            continue
        for ev in evidence:
            n += 1
            k += ev.status is EvidenceStatus.passed
    return k / n if n else 0.0
