"""Replay tests: the workflow code must replay the recorded histories of a real run
(``tests/workflows/histories/*.json.gz``: every run of an ``EvolutionWorkflow`` chain and its
``RoundWorkflow`` children) without non-determinism. A change to the commands the workflow issues
either is guarded with ``workflow.patched`` or retires the old histories (workers upgraded as
in ``docs/evolution.md``, "Upgrading workers").

Re-record with ``EVOHARNESS_RECORD_HISTORIES=1 pytest tests/workflows/test_evolution.py -k
full_run``."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.evolution import EvolutionWorkflow
from workflows.params import RoundInput, RoundOutput
from workflows.round_workflow import RoundWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json.gz"))

ASYNC = pytest.mark.asyncio(loop_scope="session")


def _load(path: Path) -> WorkflowHistory:
    """File names are ``<kind>__<workflow id>.json.gz`` (the id is needed to replay)."""
    wid = path.name.removesuffix(".json.gz").split("__", 1)[1]
    return WorkflowHistory.from_json(wid, gzip.decompress(path.read_bytes()).decode())


def test_histories_are_present() -> None:
    kinds = {p.name.split("__")[0] for p in HISTORIES}
    assert {"evolution-run0", "evolution-run1", "round-1", "round-2"} <= kinds


@ASYNC
@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.name)
async def test_recorded_history_replays(path: Path) -> None:
    replayer = Replayer(
        workflows=[EvolutionWorkflow, RoundWorkflow], data_converter=pydantic_data_converter
    )
    await replayer.replay_workflow(_load(path))


@workflow.defn(name="RoundWorkflow")
class _UnguardedRound(RoundWorkflow):
    """The round with an unguarded change: it skips the progress signal to its parent."""

    async def _report(self, inp):  # type: ignore[no-untyped-def,override]
        return None

    @workflow.run
    async def run(self, inp):  # type: ignore[no-untyped-def,override]
        return await super().run(inp)


@ASYNC
async def test_an_unguarded_change_is_caught_by_replay() -> None:
    replayer = Replayer(workflows=[_UnguardedRound], data_converter=pydantic_data_converter)
    res = await replayer.replay_workflow(
        _load(next(p for p in HISTORIES if p.name.startswith("round-1__"))),
        raise_on_replay_failure=False,
    )
    assert res.replay_failure is not None


@ASYNC
async def test_every_worker_workflow_passes_the_sandbox_validation() -> None:
    """What ``Worker(...)`` does before it starts: each workflow the worker registers
    (``workflows.worker``) is loaded in the sandbox. A module-level import of a C extension
    (numpy, scipy) that is not passed through fails here, as it would fail the worker."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
    from temporalio.workflow import _Definition

    from workflows.postpromotion import PostPromotionWorkflow
    from workflows.postpromotion_canary import CanaryCheckWorkflow
    from workflows.traffic_evolution import TrafficEvolutionWorkflow

    runner = SandboxedWorkflowRunner()
    wfs = (EvolutionWorkflow, RoundWorkflow, PostPromotionWorkflow)
    for wf in (*wfs, TrafficEvolutionWorkflow, CanaryCheckWorkflow):
        runner.prepare_workflow(_Definition.must_from_class(wf))


#: (phase, done, total) of every progress report of ``_CountingRound`` (unsandboxed replay).
_REPORTS: list[tuple[str, int, int]] = []


@workflow.defn(name="RoundWorkflow")
class _CountingRound(RoundWorkflow):
    """The round as it is, recording what each progress report to the parent says."""

    async def _report(self, inp: RoundInput) -> None:
        _REPORTS.append((self.phase, self.done, self.total))
        await super()._report(inp)

    @workflow.run
    async def run(self, inp: RoundInput) -> RoundOutput:
        return await super().run(inp)


@ASYNC
async def test_progress_never_reports_more_done_than_its_total() -> None:
    """The recorded round whose candidate went to the gate's second look (seeds 2K..3K-1 on
    the target split): its executions are a phase of their own, counted against their own
    total, so the progress bar never reads done > total (it read 144/108)."""
    from temporalio.worker import UnsandboxedWorkflowRunner

    path = next(p for p in HISTORIES if p.name.startswith("round-1__"))
    replayer = Replayer(
        workflows=[_CountingRound],
        data_converter=pydantic_data_converter,
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    _REPORTS.clear()
    await replayer.replay_workflow(_load(path))
    validates = [r for r in _REPORTS if r[0] == "validate"]
    assert len(validates) == 2, _REPORTS  # look 1, then the second look
    assert all(done <= total for _phase, done, total in _REPORTS), _REPORTS
    # each validation phase's executions end up exactly at its total
    gates = [r for r in _REPORTS if r[0] == "gate"]
    assert [g[1:] for g in gates] == [(v[2], v[2]) for v in validates], _REPORTS
