"""Experiment tracking without a server (issue 33): a tracker that cannot be reached is
reported, once, as the run's tracking status and never raised; the URI's precedence; the
metrics a round report gives. The real server's readback is tests/workflows/test_tracking.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
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


def test_an_unknown_tracker_is_refused_by_the_cli_and_the_run_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evoharness_app.cli import main

    for job in ("main", "local"):
        assert main(["evolve", job, "--tracking", "wandb"]) == 2  # bad usage (docs/cli.md)
        err = " ".join(capsys.readouterr().err.replace("│", " ").split())
        assert "--tracking wandb: not one of mlflow" in err
    from pydantic import ValidationError

    from workflows.params import EvolutionParams

    doc = {"run_id": "r", "harness": {"uri": "file:///h"}, "splits": {"target": {"tasks": []}}}
    assert EvolutionParams.model_validate({**doc, "tracking": "mlflow"}).tracking == "mlflow"
    with pytest.raises(ValidationError, match="tracking"):
        EvolutionParams.model_validate({**doc, "tracking": "wandb"})


def test_evolve_local_passes_tracking_to_the_run_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evolve local --tracking mlflow --tracking-uri U`` writes both into ``params.json``
    (what the workflow runs on) before it connects; without ``--tracking-uri`` the URI is
    ``$MLFLOW_TRACKING_URI``. The address answers nothing, so the job stops at connecting."""
    from evoharness_app.cli import main
    from tests.conftest import SHARED, require

    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    monkeypatch.setenv("EVOHARNESS_SHARED", str(SHARED))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    argv = ["evolve", "local", "--out", str(tmp_path), "--sizes", "4,2,2,2", "--synthetic", "0"]
    argv += ["--address", "127.0.0.1:1", "--tracking", "mlflow"]
    for rid, extra, uri in (
        ("a", ["--tracking-uri", "http://u:1"], "http://u:1"),
        ("b", [], "http://env:5000"),
    ):
        assert main([*argv, "--run-id", rid, *extra]) == 1
        assert "cannot reach Temporal at 127.0.0.1:1" in capsys.readouterr().err
        params = json.loads((tmp_path / rid / "params.json").read_text())
        assert (params["tracking"], params["tracking_uri"]) == ("mlflow", uri)


def test_a_tracking_error_is_printed_once_after_the_job() -> None:
    from rich.console import Console

    from evoharness_app.commands.evolve_local import track_outputs

    console = Console(record=True, width=200)
    error = "tracking off from round 1: TrackingUnavailable: MLflow at http://x is unreachable"
    track_outputs(SimpleNamespace(tracking=TrackingStatus(error=error)), console)
    assert console.export_text().count("tracking off from round 1") == 1


def test_round_metrics_give_pass_rates_gate_figures_and_cost() -> None:
    from evoharness.trace.models import Candidate, Decision, DecisionKind, GateReport, RoundReport
    from workflows.tracking_activities import accepted_patch, round_metrics

    gate = GateReport(
        delta_target=0.25,
        delta_heldout=0.0,
        delta_preservation=-0.01,
        regression=0.01,
        delta_cost=0.1,
        utility=0.2,
        p_value=0.01,
        n_discordant=6,
        epsilon=0.02,
        accepted=True,
        p_holm=0.02,
    )
    rep = RoundReport(
        run_id="r",
        round=1,
        parent_harness_id="p",
        candidates=[
            Candidate(candidate_id="r1-c0", cluster_id="k", gate=gate),
            Candidate(candidate_id="r1-c1", cluster_id="k"),
        ],
        decision=Decision(
            kind=DecisionKind.accepted,
            reason="ok",
            harness_id="c",
            parent_harness_id="p",
            candidate_id="r1-c0",
        ),
        pass_rates={"target": 0.75, "heldout": 0.5},
        cost={"generator_calls": 40.0, "spend_usd": 0.5},
    )
    m = round_metrics(rep)
    assert m["pass_rate_target"] == 0.75 and m["pass_rate_heldout"] == 0.5
    assert m["delta_target"] == 0.25 and m["p_value"] == 0.01 and m["p_holm"] == 0.02
    assert m["cost_generator_calls"] == 40.0 and m["cost_spend_usd"] == 0.5
    assert (m["candidates"], m["candidates_gated"], m["accepted"]) == (2, 1, 1.0)
    assert accepted_patch(rep) is None  # the accepted candidate carries no patch here
