"""What executions cost: ``ExecCost.of`` one execution, ``spent_cost`` totals them (the
search's ledger), ``round_cost`` totals a round's execution groups with the same figures
(each (harness, task, seed) once, cache hits free) and adds the probes'."""

from __future__ import annotations

from evoharness.program import Program
from evoharness.trace.models import ExecCost, Execution
from evoharness.trace.round import round_cost, spent_cost


def _ex(hid: str, tid: str, seed: int, calls: int, secs: float, cached: bool = False) -> Execution:
    return Execution(
        task_id=tid,
        seed=seed,
        harness_id=hid,
        execution_key=f"{hid}-{tid}-{seed}",
        program=Program(prompt="a dog", seed=seed),
        generator_calls=calls,
        generator_seconds=secs,
        cached=cached,
    )


A = _ex("h1", "t1", 0, 2, 3.0)
A_AGAIN = _ex("h1", "t1", 0, 5, 9.0, cached=True)  # the same execution seen again
B_HIT = _ex("h1", "t1", 1, 2, 1.5, cached=True)
C = _ex("h2", "t1", 0, 1, 0.5)


def test_a_cache_hit_costs_nothing() -> None:
    assert ExecCost.of(A) == ExecCost(generator_calls=2.0, generator_seconds=3.0)
    assert ExecCost.of(B_HIT) == ExecCost(cached=True)


def test_spent_cost_totals_each_cost() -> None:
    got = spent_cost([ExecCost.of(e) for e in (A, B_HIT, C)])
    assert got == {
        "executions": 3.0,
        "cache_hits": 1.0,
        "generator_calls": 3.0,
        "generator_seconds": 3.5,
    }
    assert spent_cost([]) == dict.fromkeys(got, 0.0)


def test_round_cost_counts_each_execution_once_as_the_ledger_does() -> None:
    got = round_cost([[A, B_HIT], [A_AGAIN, C]])
    assert got == {
        "executions": 3.0,
        "cache_hits": 1.0,
        "generator_calls": 3.0,
        "generator_seconds": 3.5,
    }
    assert got == spent_cost([ExecCost.of(e) for e in (A, B_HIT, C)])


def test_round_cost_adds_the_probes_and_names_them() -> None:
    probes = round_cost([[_ex("h1", "p1", 0, 4, 2.0)]])
    cf = round_cost([[_ex("h1", "p2", 0, 1, 0.25, cached=True)]])
    got = round_cost([[A, C]], probes=probes, counterfactual=cf)
    assert got["executions"] == 2 + 1 + 1
    assert got["cache_hits"] == 1.0
    assert got["generator_calls"] == 3 + 4
    assert got["generator_seconds"] == 3.5 + 2.0
    assert got["scope_probe_generator_calls"] == 4.0
    assert got["counterfactual_probe_cache_hits"] == 1.0
    assert got["counterfactual_probe_generator_seconds"] == 0.0
