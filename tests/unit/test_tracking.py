"""Experiment tracking without a server (issue 33): a tracker that cannot be reached is
reported, once, as the run's tracking status and never raised; the URI's precedence; the
metrics a round report gives. The real server's readback is tests/workflows/test_tracking.py."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from temporalio.testing import ActivityEnvironment

from services.common.process import free_port
from services.tracking import TrackingUnavailable, check_health, open_tracker, resolve_uri
from workflows.backends import WorkerSection, WorkerSettings
from workflows.params import TrackingStatus
from workflows.tracking_activities import TrackingActivities, TrackRoundRequest


def _dead_uri() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_the_uri_comes_from_the_run_then_the_configuration_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert resolve_uri("http://run:1", "http://cfg:2") == "http://run:1"
    assert resolve_uri(None, "http://cfg:2") == "http://cfg:2"
    assert resolve_uri() == "http://env:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(TrackingUnavailable, match="MLFLOW_TRACKING_URI"):
        resolve_uri()


def test_a_down_server_is_named_and_an_unknown_tracker_refused() -> None:
    uri = _dead_uri()
    with pytest.raises(TrackingUnavailable, match=f"MLflow at {uri} is unreachable"):
        check_health(uri, timeout_s=2)
    with pytest.raises(ValueError, match="unknown tracker 'wandb'"):
        open_tracker("wandb", uri)


def test_a_down_server_is_reported_once_and_the_activity_does_not_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    uri = _dead_uri()
    acts = TrackingActivities(SimpleNamespace(settings=WorkerSettings(worker=WorkerSection())))
    req = TrackRoundRequest(
        run_id="r1", round=1, tracking="mlflow", tracking_uri=uri, report_keys=["k"]
    )
    with caplog.at_level(logging.WARNING):
        status = ActivityEnvironment().run(acts.track_round, req)
    assert isinstance(status, TrackingStatus)
    assert status.error.startswith("tracking off from round 1: TrackingUnavailable: MLflow at")
    assert uri in status.error and status.uri == uri
    warned = [r for r in caplog.records if "goes on untracked" in r.getMessage()]
    assert len(warned) == 1


def test_the_configured_uri_is_used_when_the_run_names_none() -> None:
    uri = _dead_uri()
    acts = TrackingActivities(
        SimpleNamespace(settings=WorkerSettings(worker=WorkerSection(tracking_uri=uri)))
    )
    req = TrackRoundRequest(run_id="r1", round=2, tracking="mlflow", report_keys=["k"])
    status = ActivityEnvironment().run(acts.track_round, req)
    assert status.uri == uri and f"MLflow at {uri}" in status.error
