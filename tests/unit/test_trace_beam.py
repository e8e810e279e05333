"""The in-process beam (issue 16, "A real beam"): B parents are expanded per round, by the
rules the workflow uses (``evoharness.trace.beam``)."""

from __future__ import annotations

import pytest

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.trace.beam import (
    EXHAUSTED_REASON,
    beam_parents,
    best_accepted,
    frontier_exhausted,
    run_beam,
)
from evoharness.trace.frontier import FrontierEntry
from evoharness.trace.models import Attribution, DecisionKind
from evoharness.trace.round import RoundConfig, RoundPorts
from evoharness.trace.run_budget import RunBudget
from tests.unit._trace_world import compile_program, execute, task

SEEDS = [0, 1, 2, 3]
LAYOUT = {"op": "add", "path": "/tools/tools/-", "value": {"kind": "layout_planner", "name": "l"}}
BIND = {"op": "add", "path": "/policy/rewrites/-", "value": {"kind": "bind_attributes"}}


def _entry(hid: str, rate: float) -> FrontierEntry:
    return FrontierEntry(harness_id=hid, document={}, target_pass_rate=rate)


def test_parents_are_the_unexpanded_best_b_else_the_head() -> None:
    es = [_entry("a", 0.9), _entry("b", 0.8), _entry("c", 0.7), _entry("d", 0.6)]
    assert [e.harness_id for e in beam_parents(es, [], 3)] == ["a", "b", "c"]
    assert [e.harness_id for e in beam_parents(es, ["a", "c"], 3)] == ["b"]
    assert [e.harness_id for e in beam_parents(es, ["a", "b", "c"], 3)] == ["a"]
    assert [e.harness_id for e in beam_parents(es, [], 1)] == ["a"]
    with pytest.raises(IndexError):
        beam_parents([], [], 3)


def test_the_frontier_is_exhausted_when_its_best_b_were_all_expanded() -> None:
    es = [_entry("a", 0.9), _entry("b", 0.8), _entry("c", 0.7), _entry("d", 0.6)]
    assert not frontier_exhausted(es, [], 3)
    assert not frontier_exhausted(es, ["a", "b"], 3)
    assert frontier_exhausted(es, ["a", "b", "c"], 3)  # d is outside the beam
    assert frontier_exhausted(es, ["a"], 1)
    assert not frontier_exhausted(es, ["b"], 1)
    assert not frontier_exhausted([], ["a"], 3)


def test_a_run_stops_instead_of_repeating_a_round() -> None:
    """Nothing passes a gate (the proposer has nothing to offer), so after round 1 the only
    parent left is the expanded baseline: the run stops with the reason instead of running
    the same round on the same seeds again (stop_after_no_patch is not reached)."""
    ports = RoundPorts(
        execute=execute,
        compile_program=compile_program,
        localize=_localize,
        propose=lambda c, a, h, n: [],
    )
    cfg = RoundConfig(seeds=SEEDS, scope={"enabled": False}, mine_memory=False)
    tasks = [
        task(f"n{i}", f"{i + 2} cats", ("c0", "count", {"subject": "cat", "min_count": i + 2}))
        for i in range(3)
    ]
    splits = {"target": tasks, "heldout": [], "preservation": []}
    run = run_beam(
        ports, Harness(), splits, cfg, RunBudget(max_rounds=3, stop_after_no_patch=5), beam=3
    )
    assert len(run.rounds) == 1 and run.stopped == EXHAUSTED_REASON
    assert run.rounds[0].results[0].report.decision.kind is DecisionKind.no_patch
    # the last round allowed ends for that reason, not for exhaustion
    one = run_beam(
        ports, Harness(), splits, cfg, RunBudget(max_rounds=1, stop_after_no_patch=5), beam=3
    )
    assert one.stopped == "max rounds (1) reached"


def test_the_best_utility_wins_ties_to_the_earlier_parent() -> None:
    assert best_accepted([None, 0.1, 0.3, 0.3]) == 2
    assert best_accepted([0.2, None, 0.2]) == 0
    assert best_accepted([None, None]) is None
    assert best_accepted([]) is None


def _localize(clusters, h):
    return [
        Attribution(cluster_id=c.cluster_id, scores={"tools": 1.0}, chosen="tools")
        for c in clusters
    ]


def _propose(cluster, attr, h, n):
    """Layout for counting failures, attribute binding for colour failures."""
    op = LAYOUT if cluster.constraint_type == "count" else BIND
    return [{"responsibility": "tools" if op is LAYOUT else "policy", "ops": [op]}]


def test_a_round_expands_every_unexpanded_parent_on_the_frontier() -> None:
    """Round 1 (one parent) gates two children that both pass (layout fixes the counting
    tasks, binding fixes the colour tasks; 7 tasks each: p = 1/128, 1/64 after Holm's
    correction over the two); both enter the frontier, so round 2 expands both — not only the
    head — and never the already-expanded baseline again."""
    counting = [
        task(f"n{i}", f"{i + 2} cats", ("c0", "count", {"subject": "cat", "min_count": i + 2}))
        for i in range(7)
    ]
    colours = [
        task(
            f"k{i}",
            f"a red cat and a blue dog {i}",
            ("k0", "color", {"subject": "cat", "value": "red"}),
        )
        for i in range(7)
    ]
    ports = RoundPorts(
        execute=execute, compile_program=compile_program, localize=_localize, propose=_propose
    )
    cfg = RoundConfig(seeds=SEEDS, max_clusters=2, scope={"enabled": False}, mine_memory=False)
    splits = {"target": counting + colours, "heldout": [], "preservation": []}
    run = run_beam(
        ports, Harness(), splits, cfg, RunBudget(max_rounds=2, stop_after_no_patch=5), beam=3
    )
    r1, r2 = run.rounds
    base = harness_id(Harness())
    assert [e.harness_id for e in r1.parents] == [base]
    [res1] = r1.results
    passing = [c for c in res1.report.candidates if c.gate is not None and c.gate.accepted]
    assert len(passing) == 2 and r1.best == 0
    assert res1.report.decision.kind is DecisionKind.accepted
    assert {e.harness_id for e in r1.frontier.entries} == {base, *(c.harness_id for c in passing)}
    # round 2: both children are parents (each in its own round), the baseline is not
    assert {e.harness_id for e in r2.parents} == {c.harness_id for c in passing}
    assert len(r2.results) == 2
    assert all(e.harness_id != base for e in r2.parents)
    # each child fixes the other cluster in round 2: the one combined harness heads the beam
    assert r2.best is not None
    assert run.frontier.head.round == 2 and run.frontier.head.target_pass_rate == 1.0
    assert run.best.tools.tools and run.best.policy.rewrites
