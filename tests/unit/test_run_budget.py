"""Budgets and stop conditions (issue 33): the accounting both drivers use
(``evoharness.trace.run_budget``), the in-process beam stopping after the round that crosses
a budget, and a budget too small for one round refused by ``evolve start`` before anything
is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.harness.schema import Harness
from evoharness.trace.beam import RunControl, run_beam
from evoharness.trace.budget import BudgetConfig, BudgetFigures, Prices, estimate_budget
from evoharness.trace.round import RoundConfig, RoundPorts
from evoharness.trace.run_budget import (
    BudgetTooSmall,
    RunBudget,
    RunSpend,
    crossed,
    refuse_too_small,
    round_costs,
)
from tests.unit._trace_world import compile_program, execute, task
from tests.unit.test_trace_beam import _localize, _propose


def test_nothing_crossed_while_every_limit_is_below() -> None:
    b = RunBudget(
        max_rounds=5,
        budget_usd=1.0,
        budget_generator_calls=100,
        budget_generator_seconds=50.0,
        budget_wall_s=60.0,
    )
    s = RunSpend(rounds=4, usd=0.99, generator_calls=99, generator_seconds=49.9, wall_s=59.0)
    assert crossed(b, s) is None
    assert crossed(RunBudget(max_rounds=1), RunSpend()) is None


@pytest.mark.parametrize(
    ("spend", "by", "words"),
    [
        ({"rounds": 5}, "max_rounds", "max rounds (5) reached"),
        ({"usd": 1.0}, "budget_usd", "spent $1.0000 of $1.0000"),
        ({"generator_calls": 100}, "budget_generator_calls", "(100 of 100)"),
        ({"generator_seconds": 50.0}, "budget_generator_seconds", "50.0 s of 50.0 s"),
        ({"wall_s": 61.0}, "budget_wall_s", "61 s of 60 s"),
        ({"no_improvement": 2}, "stop_after_no_patch", "2 consecutive No-Patch rounds"),
    ],
)
def test_each_limit_reached_names_itself(spend: dict, by: str, words: str) -> None:
    b = RunBudget(
        max_rounds=5,
        budget_usd=1.0,
        budget_generator_calls=100,
        budget_generator_seconds=50.0,
        budget_wall_s=60.0,
    )
    stop = crossed(b, RunSpend(**spend))
    assert stop is not None and stop.by == by and words in stop.reason


def test_the_first_limit_in_order_wins() -> None:
    """Rounds before money before calls before seconds before wall time before
    no-improvement (the workflow recorded ``max rounds`` first before this module)."""
    b = RunBudget(max_rounds=2, budget_usd=0.0, budget_generator_calls=0)
    everything = RunSpend(rounds=2, usd=9, generator_calls=9, no_improvement=9)
    assert crossed(b, everything).by == "max_rounds"  # type: ignore[union-attr]
    assert crossed(b, everything.model_copy(update={"rounds": 1})).by == "budget_usd"  # type: ignore[union-attr]


def test_a_round_adds_its_cost_and_resets_no_improvement_when_it_accepts() -> None:
    s = RunSpend()
    s = s.add_round({"generator_calls": 10, "generator_seconds": 4.0, "spend_usd": 0.5}, False)
    s = s.add_round({"generator_calls": 5, "generator_seconds": 1.0, "spend_usd": 0.25}, False)
    assert (s.rounds, s.generator_calls, s.generator_seconds, s.usd) == (2, 15, 5.0, 0.75)
    assert s.no_improvement == 2
    assert s.add_round({}, True).no_improvement == 0
    # without the workflow's spend_usd, the money is priced here with the report's model
    priced = RunSpend().add_round(
        {"generator_calls": 10, "generator_seconds": 100.0, "llm_usd": 0.5},
        False,
        Prices(generator_second_usd=0.01, verifier_call_usd=0.1),
    )
    assert priced.usd == pytest.approx(100 * 0.01 + 10 * 0.1 + 0.5)
    assert RunSpend().add_round({"generator_seconds": 100.0}, False).usd == 0.0
    # a beam round: the parents' reports summed
    assert round_costs([{"generator_calls": 2.0}, {"generator_calls": 3.0, "x": 1.0}]) == {
        "generator_calls": 5.0,
        "x": 1.0,
    }


def test_a_budget_below_one_round_is_refused_naming_it() -> None:
    one = estimate_budget(BudgetConfig(n_target=10, seeds=4, rounds=1)).expected
    assert one.generator_calls > 10
    with pytest.raises(BudgetTooSmall) as exc:
        refuse_too_small(RunBudget(max_rounds=3, budget_generator_calls=10), one)
    msg = str(exc.value)
    assert "budget_generator_calls = 10" in msg and f"{one.generator_calls:.0f}" in msg
    with pytest.raises(BudgetTooSmall, match="budget_usd = 1e-06"):
        refuse_too_small(RunBudget(max_rounds=3, budget_usd=1e-6), one)
    with pytest.raises(BudgetTooSmall, match="budget_generator_seconds = 1.0"):
        refuse_too_small(RunBudget(max_rounds=3, budget_generator_seconds=1.0), one)
    # enough for one round, or no such budget (wall time has no estimate): accepted
    refuse_too_small(
        RunBudget(max_rounds=3, budget_generator_calls=int(one.generator_calls), budget_wall_s=1),
        one,
    )
    zero = BudgetFigures(**dict.fromkeys(BudgetFigures.model_fields, 0.0))
    refuse_too_small(RunBudget(max_rounds=3, budget_usd=0.0), zero)


@pytest.mark.parametrize("one_round", ["estimate", None])
def test_a_wall_budget_of_zero_is_refused_with_or_without_an_estimate(
    one_round: str | None,
) -> None:
    """``--budget-wall-s 0`` was accepted (the other budgets at 0 were refused); the
    estimate has no wall time, so a wall budget must be above 0 s."""
    one = (
        estimate_budget(BudgetConfig(n_target=10, seeds=4, rounds=1)).expected
        if one_round
        else None
    )
    with pytest.raises(BudgetTooSmall, match="budget_wall_s = 0.0 is too small for one round"):
        refuse_too_small(RunBudget(max_rounds=3, budget_wall_s=0.0), one)
    refuse_too_small(RunBudget(max_rounds=3, budget_wall_s=0.5), one)


def _world() -> tuple[RoundPorts, RoundConfig, dict]:
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
    cfg = RoundConfig(
        seeds=[0, 1, 2, 3], max_clusters=2, scope={"enabled": False}, mine_memory=False
    )
    return ports, cfg, {"target": counting + colours, "heldout": [], "preservation": []}


def test_the_beam_stops_after_the_round_that_crosses_a_call_budget() -> None:
    """Round 1 of this world makes more than 10 generator calls (1 per execution): a budget
    of 10 lets round 1 finish (it is never cut short), then stops the run, which keeps what
    round 1 accepted; without the budget the same run goes on to round 2."""
    ports, cfg, splits = _world()
    free = run_beam(ports, Harness(), splits, cfg, RunBudget(max_rounds=3), beam=3)
    assert len(free.rounds) >= 2
    run = run_beam(
        ports,
        Harness(),
        splits,
        cfg,
        RunBudget(max_rounds=3, budget_generator_calls=10),
    )
    assert len(run.rounds) == 1
    assert run.stopped_by == "budget_generator_calls"
    assert run.stopped == f"generator-call budget exhausted ({run.spend.generator_calls} of 10)"
    assert run.spend.generator_calls == run.rounds[0].results[0].report.cost["generator_calls"]
    assert run.rounds[0].best is not None  # what round 1 accepted is kept
    assert run.frontier.head.harness_id == free.rounds[0].frontier.head.harness_id


def test_the_beam_stops_on_wall_time_and_on_a_graceful_stop() -> None:
    ports, cfg, splits = _world()
    ticks = iter(range(0, 10_000, 100))  # 100 s per reading of the clock
    run = run_beam(
        ports,
        Harness(),
        splits,
        cfg,
        RunBudget(max_rounds=3, budget_wall_s=50),
        control=RunControl(clock=lambda: float(next(ticks))),
    )
    assert (len(run.rounds), run.stopped_by) == (1, "budget_wall_s")
    graceful = run_beam(
        ports,
        Harness(),
        splits,
        cfg,
        RunBudget(max_rounds=3),
        control=RunControl(stop_requested=lambda: True),
    )
    assert (len(graceful.rounds), graceful.stopped_by) == (1, "graceful_stop")
    assert graceful.stopped == "stopped after round 1"


def _params(tmp_path: Path, **kw: object) -> Path:
    tasks = [
        task(f"n{i}", f"{i + 2} cats", ("c0", "count", {"subject": "cat", "min_count": i + 2}))
        for i in range(6)
    ]
    doc = {
        "run_id": "tiny",
        "harness": {"document": Harness().to_document()},
        "splits": {"target": {"tasks": [t.model_dump(mode="json") for t in tasks]}},
        "seeds": [0, 1, 2, 3],
        **kw,
    }
    path = tmp_path / "params.json"
    path.write_text(json.dumps(doc))
    return path


def test_evolve_start_refuses_a_budget_too_small_for_one_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any connection: the address given answers nothing, and the error is
    the budget's, not a connection failure."""
    from evoharness_app.cli import main

    path = _params(tmp_path, budget_generator_calls=5)
    assert main(["evolve", "start", str(path), "--address", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert "budget_generator_calls = 5 is too small for one round" in err
    assert str(path) in err and "dry-run estimate of one round is" in err
    assert "cannot reach Temporal" not in err
    # a budget that fits one round passes the check and goes on to connect (and fails there)
    big = _params(tmp_path, budget_generator_calls=100_000)
    assert main(["evolve", "start", str(big), "--address", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert "too small" not in err and "cannot reach Temporal" in err


def test_evolve_local_refuses_a_budget_too_small_for_one_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any Temporal server or worker starts (the address answers nothing) and before
    ``params.json`` is written."""
    from evoharness_app.cli import main
    from tests.conftest import SHARED, require

    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    monkeypatch.setenv("EVOHARNESS_SHARED", str(SHARED))

    argv = ["evolve", "local", "--out", str(tmp_path), "--run-id", "tiny", "--sizes", "4,2,2,2"]
    argv += ["--synthetic", "0", "--address", "127.0.0.1:1", "--budget-generator-calls", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "evolve local: budget_generator_calls = 1 is too small for one round" in err
    assert not (tmp_path / "tiny" / "params.json").exists()


def test_evolve_main_refuses_a_budget_too_small_for_one_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the stack starts or the run folder is made."""
    from evoharness_app.cli import main

    argv = ["evolve", "main", "--out", str(tmp_path / "runs"), "--sizes", "4,2,2,2"]
    assert main([*argv, "--budget-generator-seconds", "1"]) == 1
    err = capsys.readouterr().err
    assert "evolve main: budget_generator_seconds = 1.0 is too small for one round" in err
    assert not (tmp_path / "runs").exists()
