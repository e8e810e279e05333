"""Experiment tracking against a real MLflow server (issue 33): a small evolution run with
``tracking: mlflow`` (real Temporal dev server, SeaweedFS, sim backends, in-process worker)
shows up in a local ``mlflow server`` (SQLite backend, local artifact root), read back
through ``MlflowClient``: one run for the evolution run with its parameters, per-round
metrics and artifacts, one nested run per round, one per beam branch; a retried activity
logs nothing twice; a down server leaves the run as it was, reported once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from temporalio.testing import ActivityEnvironment

from services.common.process import free_port
from services.tracking import KEY_TAG, log_outputs, open_tracker
from tests.fixtures.mlflow import artifacts as _artifacts
from tests.fixtures.mlflow import by_key as _by_key
from tests.fixtures.mlflow import children as _children
from tests.workflows.conftest import PROFILE, make_params, run_in_process, settings_for
from workflows.activities import TraceActivities
from workflows.tracking_activities import TrackingActivities, TrackRoundRequest

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]


async def test_a_tracked_run_shows_up_with_nested_rounds_metrics_and_artifacts(
    temporal_env: Any, s3_server: Any, split: Any, mlflow_server: Any, tmp_path: Path
) -> None:
    settings = settings_for(s3_server, f"evo-track-{uuid.uuid4().hex[:8]}")
    params = make_params(
        f"track-{uuid.uuid4().hex[:6]}",
        split,
        tracking="mlflow",
        tracking_uri=mlflow_server.uri,
    )
    _, result = await run_in_process(temporal_env.client, settings, params)
    assert result.tracking is not None and result.tracking.error == ""
    client = MlflowClient(mlflow_server.uri)
    run = _by_key(client, params.run_id)
    assert result.tracking.run_id == run.info.run_id
    assert run.info.status == "FINISHED"
    assert run.data.tags["evoharness.stopped"] == result.stopped
    p = run.data.params
    assert p["starting_harness_id"] == result.decisions[0]["parent_harness_id"]
    assert p["protocol"] == "label-free" and "@" in p["extractor"]
    assert p["size_target"] == str(len(split["target"])) and p["seeds"] == "[0, 1, 2, 3]"
    assert p["generator_id"].startswith(f"sim/{PROFILE}@") and p["verifier_id"]
    assert p["profile"] == PROFILE
    # one point per round, the last one the run's totals
    calls = client.get_metric_history(run.info.run_id, "generator_calls")
    assert [m.step for m in calls] == list(range(1, result.rounds + 1))
    assert calls[-1].value == result.generator_calls
    assert {"pass_rate_target", "best_target_pass_rate", "spend_usd"} <= set(run.data.metrics)
    # nested: one run per round, each with its decision, metrics and report
    rounds = sorted(_children(client, run.info.run_id), key=lambda r: r.info.run_name)
    assert [r.info.run_name for r in rounds] == [f"round {n}" for n in range(1, result.rounds + 1)]
    for n, r in enumerate(rounds, start=1):
        assert r.data.tags["decision"] == result.decisions[n - 1]["kind"]
        assert r.data.tags[KEY_TAG] == f"{params.run_id}/round-{n}"
        m = r.data.metrics
        assert {"pass_rate_target", "cost_generator_calls", "candidates", "accepted"} <= set(m)
        assert "round_report.json" in _artifacts(client, r.info.run_id)
    first = rounds[0].data.metrics
    assert first["accepted"] == 1.0 and "p_value" in first and "delta_target" in first
    # artifacts: the final harness folder and each accepted patch
    top = _artifacts(client, run.info.run_id)
    assert {"final_harness", "patches"} <= top
    assert "final_harness/harness.yaml" in _artifacts(client, run.info.run_id, "final_harness")
    accepted = [d for d in result.decisions if d["kind"] == "accepted"]
    assert len(_artifacts(client, run.info.run_id, "patches")) == len(accepted) >= 1

    # what the main job adds after its report: report.html and summary.json on the same run
    (tmp_path / "report.html").write_text("<html>report</html>")
    (tmp_path / "summary.json").write_text("{}")
    tracker = open_tracker("mlflow", mlflow_server.uri)
    files = [tmp_path / "report.html", tmp_path / "summary.json"]
    assert log_outputs(tracker, params.run_id, files, {"test_pass_rate_after": 0.5}) == (
        run.info.run_id
    )
    assert {"report.html", "summary.json"} <= _artifacts(client, run.info.run_id)

    # a retried activity logs nothing twice: the same request again changes nothing
    acts = TrackingActivities(TraceActivities(settings))
    key = result.decisions[0]["report_key"]
    req = TrackRoundRequest(
        run_id=params.run_id,
        round=1,
        tracking="mlflow",
        tracking_uri=mlflow_server.uri,
        report_keys=[key],
        totals={"generator_calls": 1.0},
        timestamp_ms=1,
    )
    status = ActivityEnvironment().run(acts.track_round, req)
    assert status.run_id == run.info.run_id and status.error == ""
    assert len(_children(client, run.info.run_id)) == result.rounds
    assert len(client.get_metric_history(run.info.run_id, "generator_calls")) == result.rounds

    # a beam round: one nested run per branch under the round's run, each logged once
    beam_id = f"beam-{uuid.uuid4().hex[:6]}"
    keys = [d["report_key"] for d in result.decisions[:2]]
    breq = req.model_copy(update={"run_id": beam_id, "report_keys": keys, "decision_index": 1})
    for _ in range(2):
        assert ActivityEnvironment().run(acts.track_round, breq).error == ""
    brun = _by_key(client, beam_id)
    (rnd,) = _children(client, brun.info.run_id)
    branches = sorted(r.info.run_name for r in _children(client, rnd.info.run_id))
    assert branches == [f"round 1 beam {i}" for i in range(len(keys))]
    assert len(client.get_metric_history(rnd.info.run_id, "pass_rate_target")) == 1


async def test_a_down_server_never_fails_the_run_and_is_reported_once(
    temporal_env: Any, s3_server: Any, split: Any
) -> None:
    settings = settings_for(s3_server, f"evo-down-{uuid.uuid4().hex[:8]}")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    params = make_params(f"down-{uuid.uuid4().hex[:6]}", split, tracking="mlflow", tracking_uri=uri)
    _, result = await run_in_process(temporal_env.client, settings, params)
    assert result.rounds == params.max_rounds and not result.stopped.startswith("stopped")
    assert result.tracking is not None
    # the error of round 1, kept: round 2 did not try again
    assert result.tracking.error.startswith("tracking off from round 1: TrackingUnavailable")
    assert uri in result.tracking.error
