"""A non-TRACE search protocol (``autoref``, issue 31) through ``EvolutionWorkflow`` on a real
Temporal dev server, real SeaweedFS S3 and the embedded sim world: the run completes, its
frontier is registered with lineage, both drivers (in process and durable) make the same
search, the proposer never sees the selection split, and a run whose worker is SIGKILLed
resumes with no generator call repeated.

The uninterrupted run (module fixture, in-process worker) is the reference the others are
compared with."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.patch import Patch
from evoharness.search.feedback import ProposerInput
from evoharness.search.protocols import (
    SearchConfig,
    SearchPorts,
    SearchRun,
    SearchSettings,
    default_proposer,
    run_search,
)
from evoharness.tasks.models import Task
from services.common.process import ManagedProcess
from services.storage.s3 import S3ArtifactStore
from tests.workflows.conftest import (
    ROOT,
    kill_after_calls,
    log_keys,
    make_params,
    run_in_process,
    settings_for,
    start_worker,
)
from tests.workflows.splits import small_split
from workflows.backends import TracePorts
from workflows.evolution import EvolutionWorkflow
from workflows.params import Backends, EvolutionParams, EvolutionResult
from workflows.search_driver import search_splits
from workflows.store_keys import search_report_key

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]

#: The reduced search: K = 2 candidates, beam 2, T = 2 iterations on 2 seeds.
SEARCH = SearchSettings(candidates=2, beam=2, iterations=2)
#: SIGKILL the durability test's first worker once this many generator calls are complete
#: (the start's evaluation is 2 × 14 tasks = 28 executions: the kill falls in iteration 1).
KILL_AFTER = 40


@pytest.fixture(scope="module")
def search_split(shared_dir: Path) -> dict[str, list[Task]]:
    """5 target (feedback) tasks; 3 held-out + 6 preservation (selection) tasks."""
    return small_split(shared_dir, n_target=4, n_synthetic=1)


def search_params(run_id: str, split: dict[str, list[Task]], **kw: Any) -> EvolutionParams:
    """An ``autoref`` run of ``SEARCH`` on ``split``, seeds 0 and 1."""
    return make_params(run_id, split, protocol="autoref", search=SEARCH, seeds=[0, 1], **kw)


@dataclass
class Ref:
    result: EvolutionResult
    params: EvolutionParams
    store: S3ArtifactStore
    settings: Any
    views: list[ProposerInput]
    calls: list[str]


def spying_proposer(views: list[ProposerInput]) -> Any:
    """``autoref``'s own proposer for ``SEARCH`` (the guided mutation proposer), recording
    every input it is given."""
    inner = default_proposer(SearchConfig(**SEARCH.model_dump(), protocol="autoref"))

    def propose(view: ProposerInput, n: int) -> list[Patch]:
        views.append(view)
        return inner(view, n)

    return propose


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ref(temporal_env: Any, s3_server: Any, search_split: Any, tmp_path_factory: Any) -> Ref:
    bucket = f"evo-search-{uuid.uuid4().hex[:10]}"
    calls = tmp_path_factory.mktemp("search") / "calls.log"
    settings = settings_for(s3_server, bucket, calls)
    views: list[ProposerInput] = []
    params = search_params(
        f"autoref-{uuid.uuid4().hex[:6]}", search_split, backends=Backends(proposer="spy")
    )
    _, result = await run_in_process(
        temporal_env.client,
        settings,
        params,
        search_proposers={"spy": spying_proposer(views)},
    )
    store = S3ArtifactStore.from_settings(settings.s3)
    return Ref(result, params, store, settings, views, log_keys(calls))


async def test_an_autoref_run_completes_and_registers_its_frontier_with_lineage(ref: Ref) -> None:
    r = ref.result
    assert r.stopped == "2 iterations" and r.stopped_by == "max_rounds"
    assert r.rounds == 2 and [d["round"] for d in r.decisions] == [1, 2]
    assert r.generator_calls == len(ref.calls) > 0  # every call counted once
    assert r.report_keys == [] and r.search_report_key == search_report_key(r.run_id)
    report = SearchRun.model_validate_json(ref.store.get(r.search_report_key))
    assert report.config.protocol == "autoref" and len(report.points) == 3
    assert report.points[-1].generator_calls == r.generator_calls
    ran = [c for c in report.candidates if c.check == "ok"]
    assert len(ran) == 2 * SEARCH.candidates
    # every harness of the frontier but the start was registered, its parent before it
    start = harness_id(load_dir(ROOT / "harnesses" / "baseline"))
    joined = [e for e in r.frontier if e.harness_id != start]
    assert joined and set(r.registrations) >= {e.harness_id for e in joined}
    known = {start}
    order = list(r.registrations)
    for hid in order:
        lineage = json.loads(ref.store.get(f"runs/{r.run_id}/registered/{hid}.json"))
        assert lineage["parent_harness_id"] in known, "a parent registered after its child"
        known.add(hid)
        assert lineage["patch"]["ops"] and "autoref search" in lineage["note"]
        assert ref.store.exists(f"harnesses/{hid}.json")
    assert r.best_harness_id == r.frontier[0].harness_id


async def test_the_durable_search_is_the_in_process_search(ref: Ref, search_split: Any) -> None:
    """The same search in process, on the run's store (every execution a cache hit): the
    same points, candidates and best harness."""
    ports = TracePorts(ref.settings, store=ref.store)
    feedback, selection = search_splits(search_split)
    views: list[ProposerInput] = []
    run = run_search(
        ref.params.search_config(),
        SearchPorts(ports.execute, ports.compile_program, ports.generator.capabilities),
        load_dir(ROOT / "harnesses" / "baseline"),
        feedback,
        selection,
        proposer=spying_proposer(views),
    )
    report = SearchRun.model_validate_json(ref.store.get(ref.result.search_report_key))
    assert [p.best_harness_id for p in run.points] == [p.best_harness_id for p in report.points]
    assert [c.harness_id for c in run.candidates] == [c.harness_id for c in report.candidates]
    assert run.points[-1].best_harness_id == ref.result.best_harness_id
    assert run.points[-1].generator_calls == 0  # nothing generated twice


async def test_the_proposer_never_sees_the_selection_split_through_the_workflow(
    ref: Ref, search_split: Any
) -> None:
    """Every input the proposer was given, as JSON, names feedback tasks and no selection
    task: a proposer that could read a selection result would find it here."""
    assert ref.views and all(v.parent_feedback is not None for v in ref.views)
    seen = " ".join(v.model_dump_json() for v in ref.views)
    assert any(f'"{t.task_id}"' in seen for t in search_split["target"])
    selection = [*search_split["heldout"], *search_split["preservation"]]
    leaked = [t.task_id for t in selection if f'"{t.task_id}"' in seen or f'"{t.prompt}"' in seen]
    assert not leaked, f"selection tasks reached the proposer: {leaked}"


async def test_a_sigkilled_autoref_worker_resumes_with_no_repeated_generator_call(
    ref: Ref, temporal_env: Any, s3_server: Any, search_split: Any, tmp_path: Path
) -> None:
    bucket = f"evo-skill-{uuid.uuid4().hex[:10]}"
    calls = tmp_path / "calls.log"
    queue = f"evoharness-skill-{uuid.uuid4().hex[:6]}"

    def worker(name: str) -> ManagedProcess:
        return start_worker(name, tmp_path, temporal_env, s3_server, bucket, queue, calls)

    a = worker("worker-a")
    b: ManagedProcess | None = None
    try:
        # the default proposer ('rule'), which the reference's spy wraps: the same search
        params = search_params(f"skill-{uuid.uuid4().hex[:6]}", search_split)
        handle = await temporal_env.client.start_workflow(
            EvolutionWorkflow.run,
            params,
            id=f"evolve-{params.run_id}",
            task_queue=queue,
            result_type=EvolutionResult,
        )
        at_kill = await kill_after_calls(a, calls, KILL_AFTER)
        assert KILL_AFTER <= at_kill < len(ref.calls), "killed too late to test a resume"
        b = worker("worker-b")
        result = await asyncio.wait_for(handle.result(), timeout=600)
    finally:
        a.stop()
        if b is not None:
            b.stop()
    keys = log_keys(calls)
    assert len(keys) > at_kill  # the second worker did the rest
    assert len(keys) == len(set(keys)), "a completed generator call was repeated"
    # the same search as the uninterrupted run: the same decisions and registrations ...
    assert [(d["kind"], d["harness_id"]) for d in result.decisions] == [
        (d["kind"], d["harness_id"]) for d in ref.result.decisions
    ]
    assert set(result.registrations) == set(ref.result.registrations)
    # ... and the same generator work: the calls of the uninterrupted run and no other (a
    # call the killed worker made but had not logged yet was then served from the cache)
    assert set(keys) <= set(ref.calls)
    assert len(ref.calls) - len(keys) <= params.concurrency


async def test_best_of_n_runs_through_the_workflow_on_the_selection_split_only(
    ref: Ref, temporal_env: Any, s3_server: Any, search_split: Any, tmp_path: Path
) -> None:
    """``best_of_n`` through the same driver: one step per N, the selection split only (no
    feedback execution), each N's harness registered with the start as its parent."""
    settings = settings_for(s3_server, f"evo-bon-{uuid.uuid4().hex[:10]}", tmp_path / "c.log")
    params = make_params(
        f"bon-{uuid.uuid4().hex[:6]}",
        search_split,
        protocol="best_of_n",
        search=SearchSettings(best_of_n=(1, 2)),
        seeds=[0, 1],
    )
    _, r = await run_in_process(temporal_env.client, settings, params)
    assert r.stopped == "every N of [1, 2] tried" and r.rounds == 1
    store = S3ArtifactStore.from_settings(settings.s3)
    report = SearchRun.model_validate_json(store.get(r.search_report_key))
    selection = len(search_split["heldout"]) + len(search_split["preservation"])
    assert report.points[-1].executions == 2 * selection * 2  # 2 N × tasks × 2 seeds
    start = harness_id(load_dir(ROOT / "harnesses" / "baseline"))
    for hid in r.registrations:
        lineage = json.loads(store.get(f"runs/{r.run_id}/registered/{hid}.json"))
        assert lineage["parent_harness_id"] == start and "best-of-2" in lineage["note"]
