"""Search protocols (issue 31, ``evoharness.search.protocols``): the selection split never
reaches a proposer, each (harness, task, seed) runs once, the run's spend budgets (money,
generator calls and seconds, wall time on an injected clock; 0 is zero) stop a search
before a step, ``random`` runs no feedback, ``best_of_n`` tries each N; in the unit world of
``tests/unit/_trace_world.py`` (counts pass only with a layout planner)."""

from __future__ import annotations

import json

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
from evoharness.trace.budget import Prices
from evoharness.trace.models import Execution
from evoharness.trace.run_budget import SpendBudget
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


#: ``Costed``'s price of one execution: generator-seconds and the generator call
SECONDS_PER_CALL = 2.5
PRICES = Prices(generator_second_usd=0.01, verifier_call_usd=1.0)


class Costed(Spy):
    """A ``Spy`` whose every execution took ``SECONDS_PER_CALL`` generator-seconds."""

    def __call__(self, h: Harness, t: Task, seed: int) -> Execution:
        e = super().__call__(h, t, seed)
        return e.model_copy(update={"generator_seconds": SECONDS_PER_CALL, "generator_calls": 1})


class FakeClock:
    """A clock that moves ``tick`` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def _budgeted(protocol: str, budget: dict[str, float], **kw):  # type: ignore[no-untyped-def]
    """A ``protocol`` search with ``budget`` (``SpendBudget``'s fields) on ``Costed``
    executions priced at ``PRICES``; returns the run and the executions it ran."""
    spy = Costed()
    cfg = SearchConfig.model_validate(
        {"protocol": protocol, "seeds": SEEDS, "iterations": 3, "concurrency": 1,
         "best_of_n": (1, 2, 4), "proposer_seed": 5, "budget": budget}
    )  # fmt: skip
    ports = SearchPorts(spy, compile_program, prices=PRICES)
    return run_search(cfg, ports, Harness(), FEEDBACK, SELECTION, **kw), spy.calls


def _start_calls(protocol: str) -> int:
    """The executions of the start's evaluation (step 0) of ``protocol``: selection, and
    feedback unless ``random`` or ``best_of_n``."""
    sel = len(SELECTION) * len(SEEDS)
    return sel if protocol in ("random", "best_of_n") else sel + len(FEEDBACK) * len(SEEDS)


@pytest.mark.parametrize("protocol", ["autoref", "random", "best_of_n"])
@pytest.mark.parametrize(
    "budget", ["budget_usd", "budget_generator_calls", "budget_generator_seconds", "budget_wall_s"]
)
def test_a_budget_of_zero_stops_the_search_before_its_start(protocol: str, budget: str) -> None:
    """0 is zero, not "unlimited": nothing runs, not even the start's evaluation, and the
    run says which budget stopped it (as TRACE stops before its first round)."""
    run, calls = _budgeted(protocol, {budget: 0}, clock=FakeClock(0.0))
    assert calls == [] and run.points == []
    assert run.stopped_by == budget and "exhausted" in run.stopped


@pytest.mark.parametrize("protocol", ["autoref", "random", "best_of_n"])
def test_a_generator_call_budget_stops_the_search_before_the_next_step(protocol: str) -> None:
    """A budget of 1 call lets step 0 run whole (a step is never cut short), then stops."""
    run, calls = _budgeted(protocol, {"budget_generator_calls": 1})
    assert len(run.points) == 1 and len(calls) == _start_calls(protocol)
    assert run.stopped_by == "budget_generator_calls"
    assert run.stopped == f"generator-call budget exhausted ({len(calls)} of 1)"


@pytest.mark.parametrize("protocol", ["autoref", "random"])
def test_a_money_budget_prices_the_spend_as_the_run_does(protocol: str) -> None:
    """Money = generator-seconds × their price + generator calls × the verifier's price
    (``Prices.generator_usd``, TRACE's): a budget below the start's cost stops after step 0, one
    of 1.5 × that cost after step 1; without the verifier's price the second would run all
    iterations."""
    start_usd = _start_calls(protocol) * (SECONDS_PER_CALL * 0.01 + 1.0)
    run, calls = _budgeted(protocol, {"budget_usd": start_usd / 2})
    assert len(run.points) == 1 and run.stopped_by == "budget_usd"
    assert f"spent ${start_usd:.4f}" in run.stopped
    run, calls = _budgeted(protocol, {"budget_usd": start_usd * 1.5})
    assert [p.iteration for p in run.points] == [0, 1] and run.stopped_by == "budget_usd"
    assert f"spent ${len(calls) * (SECONDS_PER_CALL * 0.01 + 1.0):.4f}" in run.stopped


def test_a_generator_seconds_budget_counts_seconds_not_calls() -> None:
    """Exactly the start's generator-seconds is reached (spent ≥ budget); one second more
    lets step 1 run. The start's calls are fewer than its seconds."""
    start_s = _start_calls("autoref") * SECONDS_PER_CALL
    run, _ = _budgeted("autoref", {"budget_generator_seconds": start_s})
    assert len(run.points) == 1 and run.stopped_by == "budget_generator_seconds"
    run, calls = _budgeted("autoref", {"budget_generator_seconds": start_s + 1})
    assert [p.iteration for p in run.points] == [0, 1]
    assert run.stopped_by == "budget_generator_seconds"
    assert f"({len(calls) * SECONDS_PER_CALL:.1f} s of {start_s + 1:.1f} s)" in run.stopped


def test_a_wall_time_budget_reads_the_drivers_clock() -> None:
    """The clock moves 10 s per read (one at the start, one before each step): steps 0 and
    1 start at 10 s and 20 s, step 2 finds 30 s ≥ 25 s and stops; no budget: all 4 steps."""
    run, _ = _budgeted("autoref", {"budget_wall_s": 25}, clock=FakeClock(10.0))
    assert [p.iteration for p in run.points] == [0, 1]
    assert run.stopped_by == "budget_wall_s"
    assert run.stopped == "wall-time budget exhausted (30 s of 25 s)"
    run, _ = _budgeted("autoref", {}, clock=FakeClock(10.0))
    assert len(run.points) == 4 and run.stopped_by == "max_rounds"


def test_a_search_state_keeps_its_budget_and_stop_through_json() -> None:
    """A stopped state round-trips; a state recorded before ``budget``/``stopped_by`` (its
    config had ``max_calls``) still loads, its call budget kept."""
    budget = SpendBudget(budget_generator_calls=0, budget_wall_s=5.0)
    cfg = SearchConfig(protocol="random", seeds=SEEDS, budget=budget)
    ports = SearchPorts(execute, compile_program)
    state = search_step(new_search(cfg, FEEDBACK, SELECTION), ports, Harness(), FEEDBACK, SELECTION)
    assert state.done and state.run.stopped_by == "budget_generator_calls"
    again = SearchState.model_validate_json(state.model_dump_json())
    assert again == state
    old = json.loads(new_search(cfg, FEEDBACK, SELECTION).model_dump_json())
    del old["run"]["config"]["budget"], old["run"]["stopped_by"]
    for calls in (None, 7):
        old["run"]["config"]["max_calls"] = calls
        loaded = SearchState.model_validate(old)
        assert loaded.run.config.budget == SpendBudget(budget_generator_calls=calls)
        assert loaded.run.stopped_by == ""


def test_the_run_parameters_give_a_search_every_budget_as_set() -> None:
    """``EvolutionParams.search_config``: 0 stays 0 (it was read as "no budget"), None
    stays None, and money, generator-seconds and wall time reach the search too."""
    from workflows.params import EvolutionParams

    doc = {"run_id": "r", "harness": {"uri": "file:///h"}, "splits": {"target": {"tasks": []}},
           "protocol": "random"}  # fmt: skip
    zero = EvolutionParams.model_validate({**doc, "budget_generator_calls": 0})
    assert zero.search_config().budget == SpendBudget(budget_generator_calls=0)
    assert EvolutionParams.model_validate(doc).search_config().budget == SpendBudget()
    some = {"budget_usd": 1.5, "budget_generator_seconds": 60.0, "budget_wall_s": 3600.0}
    p = EvolutionParams.model_validate({**doc, **some})
    assert p.search_config().budget == SpendBudget.model_validate(some)


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
