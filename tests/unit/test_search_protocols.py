"""Search protocols (issue 31, ``evoharness.search.protocols``): the selection split never
reaches a proposer, budgets are generator calls with each (harness, task, seed) run once,
``random`` runs no feedback, ``best_of_n`` tries each N; in the unit world of
``tests/unit/_trace_world.py`` (counts pass only with a layout planner)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.search.feedback import ProposerInput, SplitManifest, feedback_of
from evoharness.search.protocols import (
    SearchConfig,
    SearchPorts,
    SearchState,
    blind_mutations,
    new_search,
    run_search,
    search_step,
    with_best_of_n,
)
from evoharness.tasks.models import Task
from evoharness.trace.models import Execution
from tests.unit._trace_world import compile_program, execute, task

SEEDS = (0, 1)


def _tasks(prefix: str, n: int) -> list[Task]:
    return [
        task(
            f"{prefix}{i}",
            f"{i + 2} cats and a red dog",
            ("c0", "count", {"subject": "cat", "min_count": i + 2}),
            ("c1", "color", {"subject": "dog", "value": "red"}),
        )
        for i in range(n)
    ]


FEEDBACK = _tasks("fb", 3)
SELECTION = _tasks("sel", 3)


class Spy:
    """An execute port that records the (harness, task, seed) it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, h: Harness, t: Task, seed: int) -> Execution:
        e = execute(h, t, seed)
        self.calls.append((e.harness_id, t.task_id, seed))
        return e


def _run(protocol: str, proposer=None, spy: Spy | None = None, **kw):  # type: ignore[no-untyped-def]
    cfg = SearchConfig(
        **{"protocol": protocol, "seeds": SEEDS, "iterations": 3, "concurrency": 1, **kw}
    )
    ports = SearchPorts(spy or execute, compile_program)
    return run_search(cfg, ports, Harness(), FEEDBACK, SELECTION, proposer=proposer)


def test_a_proposer_that_reads_the_selection_split_fails() -> None:
    """The proposer's input has no selection result to read, and none can be given."""

    def peeking(view: ProposerInput, n: int) -> list[Patch]:
        return [] if view.selection_score > 0.5 else []  # type: ignore[attr-defined]

    with pytest.raises(AttributeError, match="selection_score"):
        _run("autoref", proposer=peeking)
    with pytest.raises(ValidationError, match="selection"):
        ProposerInput(iteration=1, parent=Harness(), selection=())  # type: ignore[call-arg]


def test_the_proposer_sees_feedback_results_only() -> None:
    views: list[ProposerInput] = []
    blind = blind_mutations(seed=3)

    def spying(view: ProposerInput, n: int) -> list[Patch]:
        views.append(view)
        return blind(view, n)

    run = _run("autoref", proposer=spying)
    assert views and all(v.parent_feedback is not None for v in views)
    seen = " ".join(v.model_dump_json() for v in views)
    assert "fb0" in seen  # failing feedback verdicts are shown ...
    assert not any(t.task_id in seen for t in SELECTION)  # ... selection tasks never
    last = views[-1].iteration
    earlier = [c for c in run.candidates if c.check == "ok" and c.iteration < last]
    assert len(views[-1].history) == 1 + len(earlier)  # the start's and every candidate's


def test_feedback_of_refuses_a_selection_execution() -> None:
    manifest = SplitManifest.of(FEEDBACK, SELECTION)
    sel = [execute(Harness(), SELECTION[0], 0)]
    with pytest.raises(ValueError, match="not on the feedback split"):
        feedback_of("h", sel, {t.task_id: t for t in [*FEEDBACK, *SELECTION]}, manifest)


def test_splits_must_be_disjoint() -> None:
    with pytest.raises(ValidationError, match="share tasks"):
        SplitManifest.of(FEEDBACK, [*SELECTION, FEEDBACK[0]])
    with pytest.raises(ValidationError, match="share tasks"):
        _run_overlap()


def _run_overlap() -> None:
    ports = SearchPorts(execute, compile_program)
    run_search(SearchConfig(seeds=SEEDS), ports, Harness(), FEEDBACK, FEEDBACK[:1])


def test_autoref_finds_the_layout_and_counts_each_call_once() -> None:
    spy = Spy()
    run = _run("autoref", spy=spy, iterations=5, proposer_seed=1)
    scores = [p.best_score for p in run.points]
    assert scores == sorted(scores)  # the beam never loses its best
    assert scores[-1] > scores[0]
    assert len(spy.calls) == len(set(spy.calls))  # no (harness, task, seed) twice
    assert run.points[-1].generator_calls == len(spy.calls)
    ran = {c[0] for c in spy.calls}
    assert ran == set(run.harnesses)
    for c in run.candidates:
        assert (c.check == "ok") == (c.selection_score is not None)


def test_random_runs_no_feedback_and_is_reproducible() -> None:
    spy = Spy()
    run = _run("random", spy=spy, proposer_seed=5)
    fb = {t.task_id for t in FEEDBACK}
    assert spy.calls and not any(c[1] in fb for c in spy.calls)
    again = _run("random", proposer_seed=5)
    assert [p.model_dump() for p in again.points] == [p.model_dump() for p in run.points]


def test_a_budget_stops_the_search_before_an_iteration() -> None:
    run = _run("random", max_calls=1, proposer_seed=5)
    assert len(run.points) == 1 and "budget" in run.stopped


def test_best_of_n_tries_each_n_on_the_selection_split() -> None:
    spy = Spy()
    run = _run("best_of_n", spy=spy, best_of_n=(1, 2, 4))
    assert len(run.points) == 3
    assert {c[1] for c in spy.calls} == {t.task_id for t in SELECTION}
    docs = [Harness.model_validate(run.harnesses[c.harness_id]) for c in run.candidates]
    assert [[s.n for s in d.middleware.stages] for d in docs] == [[], [2], [4]]  # type: ignore[union-attr]
    assert with_best_of_n(with_best_of_n(Harness(), 4), 1) == Harness()


@pytest.mark.parametrize("protocol", ["autoref", "random", "best_of_n"])
def test_a_search_resumed_from_its_serialised_state_is_the_same_search(protocol: str) -> None:
    """Steps over a state that went through JSON between each (a durable run's payload)
    make the same search as the in-process driver, and a step repeated from the same state
    (a retried activity) proposes the same candidates and, with a cache, generates nothing."""
    cfg = SearchConfig(protocol=protocol, seeds=SEEDS, iterations=3, concurrency=1,
                       best_of_n=(1, 2, 4), proposer_seed=2)  # fmt: skip
    whole = run_search(cfg, SearchPorts(execute, compile_program), Harness(), FEEDBACK, SELECTION)
    state = new_search(cfg, FEEDBACK, SELECTION)
    while not state.done:
        state = SearchState.model_validate_json(state.model_dump_json())
        before = state.model_copy(deep=True)
        state = search_step(
            state, SearchPorts(execute, compile_program), Harness(), FEEDBACK, SELECTION
        )
        again = search_step(
            before, SearchPorts(execute, compile_program), Harness(), FEEDBACK, SELECTION
        )
        assert again.model_dump() == state.model_dump()
    assert state.run.model_dump() == whole.model_dump()
    with pytest.raises(ValueError, match="manifest"):
        search_step(
            new_search(cfg, FEEDBACK, SELECTION), SearchPorts(execute, compile_program),
            Harness(), FEEDBACK, SELECTION[:1],
        )  # fmt: skip
