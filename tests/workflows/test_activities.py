"""The activities called directly in Temporal's ``ActivityEnvironment`` (no server): LLM
usage and the proposer's own rejected answers reach the round report and the spend; and the
workflow's stop conditions as plain code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from evoharness.harness.io import harness_id, load_dir
from evoharness.trace import rule_proposer
from evoharness.trace.answers import FailedProposal
from evoharness.trace.counterfactual import CounterfactualConfig
from evoharness.trace.preservation import PreservationSet
from evoharness.trace.roles import LlmUsage, RoleResult
from evoharness.trace.round_core import Analyze, RunKey
from tests.workflows.conftest import ROOT, make_params
from workflows.activities import TraceActivities
from workflows.backends import Proposer, WorkerSection, WorkerSettings
from workflows.evolution import EvolutionWorkflow
from workflows.params import (
    AnalyzeRequest,
    Backends,
    EvolutionParams,
    ExecuteRequest,
    ExecutionRef,
    ExecutionSet,
    FinalizeRequest,
    RunState,
)


def _llm_like() -> Proposer:
    usage = LlmUsage(calls=1, prompt_tokens=2000, completion_tokens=500, model="fake")

    def localize(clusters: Any, harness: Any) -> RoleResult:
        return RoleResult(items=rule_proposer.localize(clusters, harness), usage=usage)

    def propose(cluster: Any, attr: Any, harness: Any, n: int) -> RoleResult:
        bad = FailedProposal(
            role="proposer",
            reason="contract",
            detail="op 0 writes /policy",
            index=0,
            excerpt='{"op": "add", "path": "/policy/x"}',
        )
        return RoleResult(
            items=rule_proposer.propose(cluster, attr, harness, n), failures=[bad], usage=usage
        )

    return Proposer(localize, propose)


def test_llm_usage_and_dropped_answers_reach_the_report(split: Any, tmp_path: Path) -> None:
    settings = WorkerSettings(worker=WorkerSection(store="local", local_dir=str(tmp_path)))
    acts = TraceActivities(settings, proposers={"llm-fake": _llm_like()})
    env = ActivityEnvironment()
    parent = load_dir(ROOT / "harnesses" / "baseline")
    target = split["target"][:3]
    # counterfactual attribution off: its additive levers would ask the proposer too, and
    # this test counts the proposer's calls (tests/workflows/test_two_drivers.py runs it)
    params = make_params(
        "acts",
        split,
        seeds=[0, 1],
        backends=Backends(proposer="llm-fake"),
        counterfactual=CounterfactualConfig(enabled=False),
    )
    execs = env.run(
        acts.execute_batch,
        ExecuteRequest(run_id="acts", harness=parent, tasks=target, seeds=[0, 1], concurrency=2),
    )
    # payloads carry refs: identity, verdict counts and cost, no program or trace
    assert len(execs) == 6 and all(isinstance(e, ExecutionRef) for e in execs)
    assert len(ExecutionRef.of(acts._full("acts", execs)[0]).model_dump_json()) < 400
    pid = harness_id(parent)
    tkey = RunKey(pid, "target")
    target_set = ExecutionSet(
        harness_id=pid, split="target", task_ids=[t.task_id for t in target], seeds=[0, 1]
    )
    req = AnalyzeRequest(
        request=Analyze(parent, target, tkey, [pid], [tkey], [], len(target)),
        executions=[target_set, target_set],
        config=params.round_config(1),
        backends=params.backends,
    )
    assert req.run_id == "acts" and req.config.seeds == [0, 1]
    # the core's request crosses the data converter as it is
    assert AnalyzeRequest.model_validate_json(req.model_dump_json()) == req
    res = env.run(acts.analyze_and_propose, req)
    assert res.analysis.clusters, "the counting tasks fail on some seed"
    n_prop = sum(
        1
        for c in res.analysis.clusters
        for a in res.analysis.attributions
        if a.cluster_id == c.cluster_id and a.chosen != "no_patch"
    )
    assert res.llm_usage["llm_calls"] == 1 + min(n_prop, params.max_clusters)
    # priced from the table (the fake reported no cost)
    assert res.llm_usage["llm_usd"] == acts.prices.llm_usd(
        res.llm_usage["llm_prompt_tokens"], res.llm_usage["llm_completion_tokens"]
    )
    assert res.llm_usage["llm_usd"] > 0
    dropped = [
        pc.candidate for pc in res.proposed if pc.candidate.reject_reason.startswith("proposer_")
    ]
    assert dropped and all(c.reject_reason.startswith("proposer_contract") for c in dropped)
    # the dropped answer itself is kept beside its reason (the report shows it)
    assert all(c.raw == '{"op": "add", "path": "/policy/x"}' for c in dropped)
    # a language model answered (usage names it): every proposed patch is labelled llm
    assert {pc.candidate.source for pc in res.proposed} <= {"llm", "memory"}
    report = env.run(
        acts.finalize_round,
        FinalizeRequest(
            run_id="acts",
            round=1,
            parent=parent,
            analysis=res,
            gates={},
            target_tasks=target,
            executions=[target_set],
            spent=[target_set],
            alpha=params.gate.alpha,
            preservation=PreservationSet(),
        ),
    )
    assert report.cost["llm_usd"] == res.llm_usage["llm_usd"]
    assert report.cost["spend_usd"] >= report.cost["llm_usd"] > 0
    assert any(c.reject_reason.startswith("proposer_contract") for c in report.candidates)


def test_budget_stop_conditions() -> None:
    wf = EvolutionWorkflow()
    base = EvolutionParams.model_validate(
        {
            "run_id": "b",
            "harness": {"document": {}},
            "splits": {"target": {"tasks": []}},
            "budget_usd": 1.0,
            "budget_generator_calls": 100,
            "max_rounds": 9,
        }
    )
    wf.state = RunState(round=1, spend_usd=0.5, generator_calls=10)
    assert wf._finished(base) == ""
    wf.state = RunState(round=1, spend_usd=1.0)
    assert wf._finished(base).startswith("budget exhausted")
    wf.state = RunState(round=1, generator_calls=100)
    assert wf._finished(base).startswith("generator-call budget exhausted")
    wf.state = RunState(round=9)
    assert wf._finished(base) == "max rounds (9) reached"


def test_no_patch_reason_labels_name_the_rule() -> None:
    """``evoharness_decisions_total{reason}`` carries which rule said No-Patch, and for the
    gate which check failed (issue 14 item 12), with bounded label values."""
    from types import SimpleNamespace as NS

    from workflows.round_metrics import reason_tag

    assert reason_tag("no failures on the target split") == "no_failures"
    assert (
        reason_tag("every failure cluster is attributed to no_patch (generator noise)")
        == "attributed_no_patch"
    )
    assert reason_tag("no candidate passed the proposal checks (rejected: schema)") == (
        "proposal_checks"
    )
    gated = [
        NS(gate=NS(reasons=["regression 3.0 pp > ε 1.0 pp"])),
        NS(gate=NS(reasons=["regression 2.0 pp > ε 1.0 pp", "Δtarget not significant (p=0.4)"])),
        NS(gate=NS(reasons=["Δtarget not significant (p=0.41 ≥ 0.05)"])),
        NS(gate=None),
    ]
    reason = "no candidate passed the gate: c1: regression 3.0 pp > ε 1.0 pp | ..."
    assert reason_tag(reason, gated) == "gate:regression"
    assert reason_tag(reason, gated[2:]) == "gate:target_not_significant"


def test_load_inputs_is_label_free_by_default_and_refuses_overlap(
    split: Any, tmp_path: Path
) -> None:
    """Default mode: every evolution task's constraints are the frozen extractor's reading of
    its prompt (a wrong benchmark label is ignored); evolution prompts that overlap the
    scored-on prompts are refused with a list; a continuation with another extractor id is
    refused; ``benchmark_labels: true`` keeps the tasks' own constraints."""
    from temporalio.exceptions import ApplicationError

    from evoharness.tasks.labelfree import extractor_id
    from evoharness.tasks.models import Constraint, ConstraintType
    from workflows.params import EvolutionMode, TaskSource

    settings = WorkerSettings(worker=WorkerSection(store="local", local_dir=str(tmp_path)))
    acts = TraceActivities(settings)
    env = ActivityEnvironment()
    first = split["target"][0]
    lying = first.model_copy(
        update={
            "constraints": [
                Constraint(
                    constraint_id="x", type=ConstraintType.count, subject="zebra", min_count=9
                )
            ]
        }
    )
    sp = {**split, "target": [lying, *split["target"][1:]]}
    loaded = env.run(acts.load_inputs, make_params("lf", sp))
    got = loaded.splits["target"][0]
    assert all(c.subject != "zebra" for c in got.constraints) and got.constraints
    assert got.metadata["constraints_from"] == extractor_id("rules-v1")
    assert loaded.mode is not None and not loaded.mode.benchmark_labels
    assert "label-free" in loaded.mode.describe()
    labelled = env.run(acts.load_inputs, make_params("lf", sp, benchmark_labels=True))
    assert labelled.splits["target"][0].constraints == lying.constraints
    assert labelled.mode is not None and "benchmark labels" in labelled.mode.describe()
    assert labelled.mode.nothing_checkable() == "" and labelled.mode.read == 0
    # a prompt the extractor reads nothing checkable from is left out, and counted: in the
    # mode (and so every report), in the run's mode.json, and in a gauge (issue 19)
    from prometheus_client import REGISTRY

    from workflows.params import run_mode_key

    vague = first.model_copy(update={"task_id": "vague/0", "prompt": "the meaning of happiness"})
    sp2 = {**split, "heldout": [vague, *split["heldout"]]}
    n = sum(len(v) for v in sp2.values())
    counted = env.run(acts.load_inputs, make_params("nc", sp2))
    assert counted.mode is not None and counted.mode.dropped == ["vague/0"]
    assert counted.mode.read == n
    assert f"nothing checkable read from 1 of {n} prompt(s)" in counted.mode.describe()
    assert all(t.task_id != "vague/0" for t in counted.splits["heldout"])
    stored = EvolutionMode.model_validate_json(acts.store.get(run_mode_key("nc")))
    assert stored == counted.mode
    gauge = REGISTRY.get_sample_value("evoharness_run_nothing_checkable_prompts", {"run_id": "nc"})
    assert gauge == 1
    # the run's scored-on prompts: one of them near-duplicates a held-out prompt
    held = split["heldout"][0]
    echo = held.model_copy(update={"task_id": "scored/0", "prompt": held.prompt.upper() + "!"})
    other = split["target"][0].model_copy(update={"task_id": "scored/1", "prompt": "a kite"})
    with pytest.raises(ApplicationError, match="overlap the prompts the run is scored on") as err:
        env.run(
            acts.load_inputs,
            make_params("lf", split, scored_on=[TaskSource(tasks=[echo, other])]),
        )
    assert held.task_id in str(err.value) and "exact" in str(err.value)
    ok = env.run(acts.load_inputs, make_params("lf", split, scored_on=[TaskSource(tasks=[other])]))
    assert ok.mode is not None and ok.mode.scored_on == 1 and "tfidf-char" in ok.mode.overlap
    stale = RunState(mode=EvolutionMode(extractor="rules-v1@000000000000"))
    with pytest.raises(ApplicationError, match="extractor changed during the run"):
        env.run(acts.load_inputs, make_params("lf", split, state=stale))


def test_concurrent_attempts_make_one_generator_call_per_program(tmp_path: Path) -> None:
    """Two attempts of one activity running at once in a worker (Temporal retried an attempt
    whose heartbeats a restarted server lost: tests/chaos) ask for the same programs; the
    execution cache makes each generator call once and serves the other from the store."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from evoharness.local_store import LocalArtifactStore
    from evoharness.program import Program
    from evoharness.sim import SimGenerator
    from workflows.backends import CachingGenerator

    inner = SimGenerator()
    made: list[str] = []
    started = threading.Barrier(2)

    class Counting:
        generator_id = inner.generator_id

        def generate(self, program: Program) -> Any:
            made.append(program.prompt)
            return inner.generate(program)

    gen = CachingGenerator(Counting(), LocalArtifactStore(tmp_path / "store"))  # type: ignore[arg-type]
    program = Program(prompt="three red apples on a table", seed=7)

    def attempt(_: int) -> Any:
        started.wait()
        return gen.generate(program)

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(attempt, range(2))
    assert made == [program.prompt]
    assert a.png == b.png and sorted([a.cached, b.cached]) == [False, True]


def test_a_slow_activity_heartbeats_between_executions() -> None:
    """A body slower than the heartbeat timeout still heartbeats (from the background thread),
    with the details it is given; without a heartbeat timeout nothing is sent."""
    import dataclasses
    import time
    from datetime import timedelta

    from workflows.heartbeat import heartbeating

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.3))
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    def slow() -> None:
        with heartbeating(lambda: 7):
            time.sleep(1.0)

    env.run(slow)
    assert len(beats) >= 3 and all(d == (7,) for d in beats)

    quiet = ActivityEnvironment()
    quiet.info = dataclasses.replace(quiet.info, heartbeat_timeout=None)
    quiet_beats: list[Any] = []
    quiet.on_heartbeat = lambda *details: quiet_beats.append(details)
    quiet.run(slow)
    assert quiet_beats == []
