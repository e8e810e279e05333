"""Failure clusters: failing (task, constraint) stats grouped by
(responsibility hint, constraint type, symptom) (TRACE step 3→4, docs/architecture.md), and cost
clusters beside them: constraints the final images pass only after repairs or extra
candidates (``cost_clusters``).

The *symptom* is a short machine tag read from the constraint type, the verifier's
``observed`` values and the compiled program (never from the generator's internals).
The *responsibility hint* is where a persistent change could plausibly fix that symptom, given
what the program already does (e.g. a count failure without a layout hints Tools — a layout
planner; with a layout already present it hints Middleware — verify-and-repair). The hint is a
prior for attribution, not the decision.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from evoharness.tasks.models import Task
from evoharness.trace.models import ConstraintStats, Execution, FailureCluster
from evoharness.vocab import TEXTURE_WORDS

#: CLIP's text encoder context (Radford et al. 2021): tokens past it are dropped.
CLIP_CONTEXT_TOKENS = 77

_TOKEN = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str) -> int:
    """Approximate CLIP token count: words and punctuation marks (lower bound of BPE)."""
    return len(_TOKEN.findall(text))


def _has_layout(execs: Sequence[Execution]) -> bool:
    return any(e.program.layout for e in execs)


def symptom_and_hint(
    stats: ConstraintStats, task: Task, execs: Sequence[Execution]
) -> tuple[str, str]:
    """``(symptom, responsibility_hint)`` for one failing (task, constraint).

    Rules (the embedded world's documented failure modes, docs/architecture.md):
    negative → ``negation_drawn``/policy unless the negative prompt already names the subject
    (then skills); color → ``color_leak`` (several objects) or ``color_wrong``/policy;
    count → ``count_wrong``, position → ``relation_wrong``: tools without a layout, middleware
    with one; text → ``text_garbled``/middleware; object → ``object_dropped_long_prompt``/policy
    when the compiled prompt exceeds 77 tokens, else ``missing_object``/tools (no layout) or
    middleware; an attribute that is a material or pattern (``vocab.TEXTURES``) →
    ``texture_wrong``/tools when the programs carried no reference image (a reference shows a
    material that words bind poorly; T2I-CompBench's texture category), skills with one;
    anything else → ``<type>_wrong``/skills.
    """
    t = stats.constraint_type
    layout = _has_layout(execs)
    prompts = [e.program.prompt for e in execs] or [task.prompt]
    long_prompt = max(approx_tokens(p) for p in prompts) > CLIP_CONTEXT_TOKENS
    n_objects = len(
        {c.subject for c in task.constraints if c.type.value in ("object", "count", "color")}
    )
    if t == "negative":
        neg = " ".join(e.program.negative_prompt for e in execs).lower()
        return ("negation_drawn", "skills" if stats.subject.lower() in neg else "policy")
    if long_prompt and t in ("object", "count", "color", "position"):
        return ("object_dropped_long_prompt", "policy")
    if t == "color":
        return ("color_leak" if n_objects > 1 else "color_wrong", "policy")
    if t == "count":
        return ("count_wrong", "middleware" if layout else "tools")
    if t == "position":
        return ("relation_wrong", "middleware" if layout else "tools")
    if t == "text":
        return ("text_garbled", "middleware")
    if t == "object":
        return ("missing_object", "middleware" if layout else "tools")
    if t == "attribute" and _is_texture(stats, task):
        return ("texture_wrong", "skills" if _has_references(execs) else "tools")
    return (f"{t}_wrong", "skills")


def _has_references(execs: Sequence[Execution]) -> bool:
    return any(e.program.references for e in execs)


def _is_texture(stats: ConstraintStats, task: Task) -> bool:
    """Whether the failing constraint asks for a material or pattern (``vocab.TEXTURES``)."""
    con = next((c for c in task.constraints if c.constraint_id == stats.constraint_id), None)
    return con is not None and str(con.value).lower() in TEXTURE_WORDS


def cluster_failures(
    stats: Sequence[ConstraintStats],
    tasks: Sequence[Task] | Mapping[str, Task],
    executions: Sequence[Execution],
    max_examples: int = 3,
) -> list[FailureCluster]:
    """Group every (task, constraint) with at least one failing seed into clusters keyed by
    (responsibility hint, constraint type, symptom); ``cluster_id`` = ``hint/type/symptom``.

    ``failure_rate`` is the mean over members; ``flip_rate`` the share of members that pass on
    some seeds and fail on others; ``examples`` hold up to ``max_examples`` members with the
    prompt, observed values and contrast. Clusters are sorted by ``n_failures`` (desc), then id.
    Raises ``KeyError`` naming the task when a stat's task is unknown.
    """
    by_id = tasks if isinstance(tasks, Mapping) else {t.task_id: t for t in tasks}
    execs_by_task: dict[str, list[Execution]] = defaultdict(list)
    for e in executions:
        execs_by_task[e.task_id].append(e)
    groups: dict[tuple[str, str, str], list[ConstraintStats]] = defaultdict(list)
    for s in stats:
        if s.n_fail == 0:
            continue
        if s.task_id not in by_id:
            raise KeyError(f"stats refer to unknown task {s.task_id!r}")
        symptom, hint = symptom_and_hint(s, by_id[s.task_id], execs_by_task[s.task_id])
        groups[(hint, s.constraint_type, symptom)].append(s)
    clusters = []
    for (hint, ctype, symptom), members in groups.items():
        clusters.append(
            FailureCluster(
                cluster_id=f"{hint}/{ctype}/{symptom}",
                responsibility_hint=hint,
                constraint_type=ctype,
                symptom=symptom,
                members=[(m.task_id, m.constraint_id) for m in members],
                n_failures=sum(m.n_fail for m in members),
                failure_rate=sum(m.failure_rate for m in members) / len(members),
                flip_rate=sum(1 for m in members if m.n_fail and m.n_pass) / len(members),
                examples=[
                    {
                        "task_id": m.task_id,
                        "constraint_id": m.constraint_id,
                        "prompt": by_id[m.task_id].prompt,
                        "subject": m.subject,
                        "failure_rate": m.failure_rate,
                        "observed": m.observed[:2],
                        "contrast": sorted(m.contrast),
                    }
                    for m in members[:max_examples]
                ],
            )
        )
    clusters.sort(key=lambda c: (-c.n_failures, c.cluster_id))
    return clusters


def cost_clusters(
    stats: Sequence[ConstraintStats],
    tasks: Sequence[Task] | Mapping[str, Task],
    executions: Sequence[Execution],
    max_examples: int = 3,
) -> list[FailureCluster]:
    """Cost clusters: every (task, constraint) whose final images all pass (``n_fail`` 0) but
    whose first attempt failed on some seed (``n_first_fail`` > 0) — the harness gets there
    only by paying for repairs or extra candidates. Grouped like ``cluster_failures`` by
    (responsibility hint, constraint type, symptom), ``cluster_id`` =
    ``cost/<hint>/<type>/<symptom>``, ``kind`` = ``cost``; ``n_failures`` counts first-attempt
    failures, ``failure_rate`` is the mean first-attempt failure rate, ``extra_attempts`` the
    mean extra generations per execution of the member tasks. A patch that removes the need
    for the repair is then gated for its saving (``gates.evaluate_gate(objective="cost")``).
    Sorted by ``n_failures`` (desc), then id. Raises ``KeyError`` for an unknown task."""
    by_id = tasks if isinstance(tasks, Mapping) else {t.task_id: t for t in tasks}
    execs_by_task: dict[str, list[Execution]] = defaultdict(list)
    for e in executions:
        execs_by_task[e.task_id].append(e)
    # the symptom is read from what the harness first sent (before any repair changed it)
    first = {
        t: [e.model_copy(update={"program": e.programs[0]}) if e.programs else e for e in es]
        for t, es in execs_by_task.items()
    }
    groups: dict[tuple[str, str, str], list[ConstraintStats]] = defaultdict(list)
    for s in stats:
        if s.n_fail or not s.n_first_fail:
            continue
        if s.task_id not in by_id:
            raise KeyError(f"stats refer to unknown task {s.task_id!r}")
        symptom, hint = symptom_and_hint(s, by_id[s.task_id], first.get(s.task_id, []))
        groups[(hint, s.constraint_type, symptom)].append(s)
    out = []
    for (hint, ctype, symptom), members in groups.items():
        extra = [(m.n_attempts - m.n_seeds) / m.n_seeds for m in members if m.n_seeds]
        out.append(
            FailureCluster(
                cluster_id=f"cost/{hint}/{ctype}/{symptom}",
                responsibility_hint=hint,
                constraint_type=ctype,
                symptom=symptom,
                members=[(m.task_id, m.constraint_id) for m in members],
                n_failures=sum(m.n_first_fail for m in members),
                failure_rate=sum(m.n_first_fail / m.n_seeds for m in members if m.n_seeds)
                / len(members),
                flip_rate=0.0,
                kind="cost",
                extra_attempts=sum(extra) / len(extra) if extra else 0.0,
                examples=[
                    {
                        "task_id": m.task_id,
                        "constraint_id": m.constraint_id,
                        "prompt": by_id[m.task_id].prompt,
                        "subject": m.subject,
                        "first_attempt_failures": m.n_first_fail,
                        "attempts": m.n_attempts,
                        "contrast": sorted(m.contrast),
                    }
                    for m in members[:max_examples]
                ],
            )
        )
    out.sort(key=lambda c: (-c.n_failures, c.cluster_id))
    return out
