"""What a search proposer may see (issue 31): results on the *feedback* split only.

AutoRef-style search ranks candidates on a *selection* split the proposer never sees; this
module makes that a property of the types rather than of the driver's care:

- ``SplitManifest``: the feedback and selection task ids of a run, checked disjoint (and
  the untouched test split's, disjoint from both, when given);
- ``FeedbackResult``: one harness's results on the feedback split — pass rate, the failing
  constraints with the verifier's reasons — built only by ``feedback_of``, which refuses an
  execution of any task outside the manifest's feedback split;
- ``ProposerInput``: everything a proposer is given (the parent, its feedback, the
  history of earlier candidates' feedback). It has no field for a selection result and
  forbids extra fields, so a selection score cannot be passed to a proposer at all.

Owns no I/O; imports nothing outside the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import pass_rate

#: Failing verdicts kept per ``FeedbackResult`` (the proposer's context stays small).
MAX_FAILURES: Final = 40


class SplitManifest(BaseModel):
    """The task ids of a search's splits: ``feedback`` (the proposer reads results on
    these), ``selection`` (candidates are ranked on these; never shown to the proposer) and
    ``test`` (untouched by the search; final figures only). Raises ``ValueError`` (pydantic
    ``ValidationError``) when feedback or selection is empty or any two splits share a task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    feedback: tuple[str, ...] = Field(min_length=1)
    selection: tuple[str, ...] = Field(min_length=1)
    test: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _disjoint(self) -> SplitManifest:
        named = {"feedback": self.feedback, "selection": self.selection, "test": self.test}
        names = list(named)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                shared = sorted(set(named[a]) & set(named[b]))
                if shared:
                    raise ValueError(f"splits {a} and {b} share tasks {shared[:5]}")
        return self

    @classmethod
    def of(
        cls, feedback: Sequence[Task], selection: Sequence[Task], test: Sequence[Task] = ()
    ) -> SplitManifest:
        """The manifest of three task lists."""
        return cls(
            feedback=tuple(t.task_id for t in feedback),
            selection=tuple(t.task_id for t in selection),
            test=tuple(t.task_id for t in test),
        )


class ConstraintFailure(BaseModel):
    """One verdict that did not pass on a feedback task: the task's prompt, the constraint
    (id, type, subject), the verdict's status and the verifier's note (its reason)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    seed: int
    prompt: str
    constraint_id: str
    constraint_type: str
    subject: str
    status: str
    reason: str = ""


class FeedbackResult(BaseModel):
    """One harness's results on the feedback split: ``pass_rate`` (mean over verdicts,
    ``aggregate.pass_rate``), ``n_verdicts``, the first ``MAX_FAILURES`` failing verdicts;
    ``parent_id`` and ``rationale``: where the harness came from (empty for the start)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    harness_id: str
    parent_id: str = ""
    rationale: str = ""
    pass_rate: float = Field(ge=0.0, le=1.0)
    n_verdicts: int = Field(ge=0)
    failures: tuple[ConstraintFailure, ...] = ()

    @property
    def failing_types(self) -> list[str]:
        """The constraint types of the failures, most frequent first (ties: first seen)."""
        counts: dict[str, int] = {}
        for f in self.failures:
            counts[f.constraint_type] = counts.get(f.constraint_type, 0) + 1
        return sorted(counts, key=lambda t: -counts[t])


def feedback_of(
    harness_id: str,
    executions: Sequence[Any],
    feedback_tasks: Mapping[str, Task],
    manifest: SplitManifest,
    parent_id: str = "",
    rationale: str = "",
) -> FeedbackResult:
    """The ``FeedbackResult`` of ``executions`` (``trace.models.Execution``) of one harness.
    ``feedback_tasks``: task id → task of the feedback split. Raises ``ValueError`` naming
    the task when an execution's task is not in ``manifest.feedback`` (a selection or test
    result must never reach a proposer) or not in ``feedback_tasks``."""
    allowed = set(manifest.feedback)
    failures: list[ConstraintFailure] = []
    n = 0
    for e in executions:
        if e.task_id not in allowed or e.task_id not in feedback_tasks:
            raise ValueError(
                f"feedback_of: execution of task {e.task_id!r} is not on the feedback split; "
                "only feedback results may reach a proposer"
            )
        task = feedback_tasks[e.task_id]
        by_id = {c.constraint_id: c for c in task.constraints}
        for ev in e.evidence:
            n += 1
            if ev.passed or len(failures) >= MAX_FAILURES:
                continue
            c = by_id.get(ev.constraint_id)
            failures.append(
                ConstraintFailure(
                    task_id=e.task_id,
                    seed=e.seed,
                    prompt=task.prompt,
                    constraint_id=ev.constraint_id,
                    constraint_type=str(c.type) if c else "",
                    subject=c.subject if c else "",
                    status=str(ev.status.value),
                    reason=ev.note,
                )
            )
    return FeedbackResult(
        harness_id=harness_id,
        parent_id=parent_id,
        rationale=rationale,
        pass_rate=pass_rate(executions),
        n_verdicts=n,
        failures=tuple(failures),
    )


class ProposerInput(BaseModel):
    """All a search proposer is given for one parent: the ``iteration`` (1-based), the
    ``parent`` harness, its feedback (None in blind search) and the ``history`` of every
    earlier candidate's feedback (empty in blind search). No selection result has a field
    here, and extra fields are refused (``ValidationError``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iteration: int = Field(ge=1)
    parent: Harness
    parent_feedback: FeedbackResult | None = None
    history: tuple[FeedbackResult, ...] = ()


class SearchProposer(Protocol):
    """A proposer of a search protocol: up to ``n`` patches of ``view.parent`` (RFC 6902
    ops, one responsibility each); the driver checks each (``trace.checks.check_proposal``)
    before it costs a generation. An LLM's answer is untrusted: a bad patch is only
    recorded. A proposer that refuses answers itself may also have ``take_failures() ->
    list[FailedProposal]`` (``search.llm.LlmSearchProposer``); the search records what it
    returns after each call as candidates that never ran."""

    def __call__(self, view: ProposerInput, n: int) -> list[Patch]: ...


__all__ = [
    "ConstraintFailure",
    "FeedbackResult",
    "MAX_FAILURES",
    "ProposerInput",
    "SearchProposer",
    "SplitManifest",
    "feedback_of",
]
