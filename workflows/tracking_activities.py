"""Experiment tracking of an evolution run (issue 33), logged from an activity.

With ``EvolutionParams.tracking`` set (``mlflow``), ``EvolutionWorkflow`` calls
``track_round`` after every round; it runs the ``track_round`` activity, which logs through
the ``services.tracking`` port (the only module that imports mlflow):

- the evolution run: one tracked run keyed by the run id, with the run's parameters
  (``run_params``: starting harness id, protocol, extractor digest, split sizes, seeds,
  rounds, beam, gate settings, backends, and the generator and verifier ids the worker
  resolves), per-round metrics at step = round (the decision's pass rate per split and the
  run's totals: spend, generator calls, cache hits, executions, best target pass rate), each
  accepted patch (``patches/round-<n>[-b<i>]-<candidate>.json``) and, after the last round,
  the final harness folder (``final_harness/``) and the stop reason (tag
  ``evoharness.stopped``); it is ended when the run stops;
- one nested run per round (``round <n>``): the decision (tags ``decision``, ``reason``),
  the metrics of the round (``round_metrics``: pass rates per split, the gate's Δ per split,
  regression, Δcost, utility, p-values, the round's cost and generator calls, candidate
  counts), the round report (``round_report.json``) and its accepted patch; with a beam of
  B > 1 parents, one run per branch nested under it (``round <n> beam <i>``).

**Idempotent.** Runs are looked up by key before they are created, a round's run is tagged
complete last, and metrics carry the workflow's clock as their timestamp (the same on a
retry, and MLflow's SQL store keeps one row of identical metrics): a retried activity
logs nothing twice.

**Never fails the run.** Any error of the tracker (no URI, MLflow not installed, server
down, a failing request) is returned as ``TrackingStatus.error``, logged once in the worker's
log; the workflow then stops calling the activity (nothing more is tracked), and the run's
result carries the error, which ``evolve main`` prints once. Runs without ``tracking`` issue
no command here, so histories recorded before it replay unchanged.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from evoharness.harness.io import harness_id, save_dir
    from evoharness.harness.schema import Harness
    from evoharness.trace.models import DecisionKind, GateReport, RoundReport
    from services.tracking import ExperimentTracker, open_tracker
    from workflows.params import (
        Backends,
        EvolutionParams,
        LoadedInputs,
        RunState,
        TrackingStatus,
    )

#: how long one ``track_round`` may take (it uploads the round report and, at the end, the
#: final harness folder); two attempts at most: tracking is never worth a long wait
TRACK_TIMEOUT = timedelta(minutes=5)
TRACK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_attempts=2)


class TrackRoundRequest(BaseModel):
    """What the ``track_round`` activity logs for round ``round`` of run ``run_id``.

    ``report_keys``: the round's report per beam parent (store keys, beam order);
    ``decision_index``: which of them holds the round's decision; ``totals``: the run's
    running totals after the round (spend_usd, generator_calls, cache_hits, executions,
    consecutive_no_patch, best_target_pass_rate); ``final``: the frontier head's document,
    given when the run stops after this round (``stopped``: why); ``timestamp_ms``: the
    workflow's clock (ms since the epoch), the metrics' timestamp."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    round: int
    tracking: str
    tracking_uri: str | None = None
    backends: Backends = Field(default_factory=Backends)
    run_params: dict[str, Any] = Field(default_factory=dict)
    report_keys: list[str]
    decision_index: int = 0
    totals: dict[str, float] = Field(default_factory=dict)
    final: dict[str, Any] | None = None
    stopped: str = ""
    timestamp_ms: int = 0
    status: TrackingStatus | None = None


def run_params(p: EvolutionParams, inputs: LoadedInputs) -> dict[str, Any]:
    """The evolution run's tracked parameters (names as MLflow shows them)."""
    mode = inputs.mode
    out: dict[str, Any] = {
        "run_id": p.run_id,
        "starting_harness_id": harness_id(inputs.harness),
        "protocol": "benchmark-labels" if p.benchmark_labels else "label-free",
        "extractor": (mode.extractor if mode is not None else "") or p.extractor,
        "seeds": list(p.seeds),
        "k_seeds": len(p.seeds),
        "max_rounds": p.max_rounds,
        "beam": p.beam,
        "generator_backend": p.backends.generator,
        "verifier_backend": p.backends.verifier,
        "proposer_backend": p.backends.proposer,
        "gate": p.gate.model_dump(mode="json"),
    }
    for split, tasks in inputs.splits.items():
        out[f"size_{split}"] = len(tasks)
    for name in ("budget_usd", "budget_generator_calls", "stop_after_no_patch"):
        if getattr(p, name) is not None:
            out[name] = getattr(p, name)
    return out


def _decided_gate(rep: RoundReport) -> GateReport | None:
    """The gate of the round's decided candidate; on No-Patch, the gated candidate with the
    highest utility (what came closest), else None."""
    gated = [c for c in rep.candidates if c.gate is not None]
    chosen = next((c for c in gated if c.candidate_id == rep.decision.candidate_id), None)
    if chosen is None and gated:
        chosen = max(gated, key=lambda c: c.gate.utility if c.gate else float("-inf"))
    return chosen.gate if chosen is not None else None


def round_metrics(rep: RoundReport) -> dict[str, float | None]:
    """One round report's metrics: ``pass_rate_<split>`` (the decided harness, or the parent
    on No-Patch), the decided (or closest) candidate's gate figures (``delta_<split>``,
    ``regression``, ``delta_cost``, ``utility``, ``p_value``, ``p_holm``,
    ``delta_first_attempt``), ``cost_<total>`` (the round's ``cost``: generator calls and
    seconds, executions, cache hits, spend), candidate counts and ``accepted`` (1 or 0)."""
    m: dict[str, float | None] = {f"pass_rate_{s}": v for s, v in rep.pass_rates.items()}
    m.update({f"cost_{k}": v for k, v in rep.cost.items()})
    m["candidates"] = len(rep.candidates)
    m["candidates_gated"] = sum(1 for c in rep.candidates if c.gate is not None)
    m["accepted"] = 1.0 if rep.decision.kind is DecisionKind.accepted else 0.0
    gate = _decided_gate(rep)
    if gate is not None:
        m.update(
            delta_target=gate.delta_target,
            delta_heldout=gate.delta_heldout,
            delta_preservation=gate.delta_preservation,
            regression=gate.regression,
            delta_cost=gate.delta_cost,
            utility=gate.utility,
            p_value=gate.p_value,
            p_holm=gate.p_holm,
            delta_first_attempt=gate.delta_first_attempt,
        )
    return m


def accepted_patch(rep: RoundReport) -> tuple[str, dict[str, Any]] | None:
    """``(candidate id, patch JSON)`` of the round's accepted candidate, or None."""
    if rep.decision.kind is not DecisionKind.accepted:
        return None
    c = next((c for c in rep.candidates if c.candidate_id == rep.decision.candidate_id), None)
    if c is None or c.patch is None:
        return None
    return c.candidate_id, c.patch.model_dump(mode="json")


class TrackingActivities:
    """The tracking activity, on the worker's ``TraceActivities`` (its settings, store and
    ports)."""

    def __init__(self, acts: Any) -> None:
        self.acts = acts

    @activity.defn(name="track_round")
    def track_round(self, req: TrackRoundRequest) -> TrackingStatus:
        """Log round ``req.round`` (module docstring). Returns where the run is tracked, or
        the error that stopped tracking (never raises for a tracker's failure)."""
        uri = req.tracking_uri or self.acts.settings.worker.tracking_uri or ""
        try:
            tracker = open_tracker(req.tracking, req.tracking_uri, uri or None)
            run = self._log(tracker, req)
        except Exception as exc:  # noqa: BLE001 - tracking never fails the run
            error = f"tracking off from round {req.round}: {type(exc).__name__}: {exc}"
            activity.logger.warning("run %s: %s; the run goes on untracked", req.run_id, error)
            prev = req.status.run_id if req.status is not None else ""
            return TrackingStatus(run_id=prev, uri=uri, error=error[:2000])
        return TrackingStatus(run_id=run, uri=tracker.uri)

    def _log(self, tracker: ExperimentTracker, req: TrackRoundRequest) -> str:
        ts, n = req.timestamp_ms, req.round
        parent = tracker.ensure_run(
            req.run_id, req.run_id, tags={"evoharness.run_id": req.run_id}, timestamp_ms=ts
        )
        pid = parent.run_id
        ports = self.acts.ports(req.backends)
        gen = ports.generator.generator_id
        ids = {"generator_id": gen, "verifier_id": ports.verifier.verifier_id}
        if gen.startswith("sim/"):  # the embedded world's ids: sim/<profile>@<digest>
            ids["profile"] = gen.removeprefix("sim/").split("@")[0]
        tracker.log(pid, params={**req.run_params, **ids})  # the same values again: a no-op
        key = f"{req.run_id}/round-{n}"
        rnd = tracker.ensure_run(key, f"round {n}", parent=pid, timestamp_ms=ts)
        if not rnd.done:
            reports = [
                RoundReport.model_validate_json(self.acts.store.get(k)) for k in req.report_keys
            ]
            decided = reports[req.decision_index]
            tracker.log(
                rnd.run_id,
                params={"parent_harness_id": decided.parent_harness_id},
                metrics=round_metrics(decided),
                step=n,
                timestamp_ms=ts,
                tags={"decision": decided.decision.kind.value, "reason": decided.decision.reason},
            )
            tracker.log_json(rnd.run_id, decided.model_dump(mode="json"), "round_report.json")
            for i, rep in enumerate(reports):
                self._branch(tracker, req, rnd.run_id, pid, i, rep, len(reports) > 1)
            parent_metrics: dict[str, float | None] = {
                f"pass_rate_{s}": v for s, v in decided.pass_rates.items()
            }
            parent_metrics.update(req.totals)
            tracker.log(pid, metrics=parent_metrics, step=n, timestamp_ms=ts)
            tracker.mark_done(rnd.run_id, end_ms=ts)
        if req.stopped and not parent.done:
            if req.final is not None:
                with tempfile.TemporaryDirectory(prefix="evoharness-track-") as tmp:
                    folder = save_dir(Harness.model_validate(req.final), Path(tmp) / "h")
                    tracker.log_path(pid, folder, "final_harness")
            tracker.log(pid, tags={"evoharness.stopped": req.stopped, "evoharness.rounds": str(n)})
            tracker.mark_done(pid, end_ms=ts)
        return pid

    def _branch(
        self,
        tracker: ExperimentTracker,
        req: TrackRoundRequest,
        round_run: str,
        parent_run: str,
        i: int,
        rep: RoundReport,
        beam: bool,
    ) -> None:
        """Beam branch ``i``'s run (when the round had several parents) and its accepted
        patch, on the round's run and the evolution run."""
        n, ts = req.round, req.timestamp_ms
        suffix = f"-b{i}" if beam else ""
        patch = accepted_patch(rep)
        if patch is not None:
            name = f"patches/round-{n}{suffix}-{patch[0]}.json"
            tracker.log_json(parent_run, patch[1], name)
            tracker.log_json(round_run, patch[1], name)
        if not beam:
            return
        run = tracker.ensure_run(
            f"{req.run_id}/round-{n}/b{i}", f"round {n} beam {i}", parent=round_run, timestamp_ms=ts
        )
        if run.done:
            return
        tracker.log(
            run.run_id,
            params={"parent_harness_id": rep.parent_harness_id, "beam_index": i},
            metrics=round_metrics(rep),
            step=n,
            timestamp_ms=ts,
            tags={"decision": rep.decision.kind.value, "reason": rep.decision.reason},
        )
        tracker.log_json(run.run_id, rep.model_dump(mode="json"), "round_report.json")
        tracker.mark_done(run.run_id, end_ms=ts)

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [self.track_round]


async def track_round(
    p: EvolutionParams, inputs: LoadedInputs, state: RunState, stopped: str
) -> None:
    """Workflow side: after round ``state.round``, run the ``track_round`` activity and keep
    its status in ``state.tracking``. Does nothing (no command) without ``p.tracking``, after
    tracking failed once, or when the round left no decision. ``stopped``: why the run ends
    after this round ("" when it goes on)."""
    prev = state.tracking
    if p.tracking is None or (prev is not None and prev.error) or not state.decisions:
        return
    d = state.decisions[-1]
    if d.get("round") != state.round:
        return
    keys = [b["report_key"] for b in d.get("beam") or []] or [d["report_key"]]
    head = state.frontier.entries[0]
    req = TrackRoundRequest(
        run_id=p.run_id,
        round=state.round,
        tracking=p.tracking,
        tracking_uri=p.tracking_uri,
        backends=p.backends,
        run_params=run_params(p, inputs),
        report_keys=keys,
        decision_index=keys.index(d["report_key"]) if d["report_key"] in keys else 0,
        totals={
            "spend_usd": state.spend_usd,
            "generator_calls": state.generator_calls,
            "cache_hits": state.cache_hits,
            "executions": state.executions,
            "consecutive_no_patch": state.consecutive_no_patch,
            "best_target_pass_rate": head.target_pass_rate,
        },
        final=head.document if stopped else None,
        stopped=stopped,
        timestamp_ms=int(workflow.now().timestamp() * 1000),
        status=prev,
    )
    try:
        state.tracking = await workflow.execute_activity_method(
            TrackingActivities.track_round,
            req,
            start_to_close_timeout=TRACK_TIMEOUT,
            retry_policy=TRACK_RETRY,
        )
    except ActivityError as exc:  # e.g. timed out twice: reported once, the run goes on
        cause = exc.cause or exc
        state.tracking = TrackingStatus(
            run_id=prev.run_id if prev else "",
            uri=p.tracking_uri or "",
            error=f"tracking off from round {state.round}: {cause}",
        )
        workflow.logger.warning("run %s: %s", p.run_id, state.tracking.error)
