"""``evoharness evolve main --tracking mlflow`` through the real CLI and the whole local stack
(the job starts it and stops it, as ``make evolve`` does): the reduced run shows up in a local
``mlflow server`` (``tests.fixtures.mlflow``) and is read back through ``MlflowClient`` —
the evolution run's MLflow run, one nested run per round with its metrics, the per-round
points on the parent, the final harness folder, and what the job uploads after its report
(report.html, summary.json, the test split's pass rates) — issue 33's done-when line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from evoharness_app.cli import main
from tests.conftest import SHARED, require
from tests.fixtures.mlflow import artifacts, by_key, children

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_evolve_main_with_mlflow_tracking_is_read_back(
    mlflow_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    monkeypatch.setenv("EVOHARNESS_SHARED", str(SHARED))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)  # the job's own stack lives in ./runs/stack
    rid = "tracked"
    argv = ["evolve", "main", "--run-id", rid, "--out", "runs", "--sizes", "4,2,2,2"]
    argv += ["--rounds", "1", "--seeds", "2", "--synthetic", "0", "--transfer", "0"]
    argv += ["--tracking", "mlflow", "--tracking-uri", mlflow_server.uri]
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out[-4000:]
    summary = json.loads((tmp_path / "runs" / rid / "summary.json").read_text())
    tracked = summary["tracking"]
    assert tracked is not None and tracked["error"] == "", tracked
    assert f"tracked: MLflow run {tracked['run_id']} at {mlflow_server.uri}" in out

    client = MlflowClient(mlflow_server.uri)
    run = by_key(client, rid)
    assert run.info.run_id == tracked["run_id"] and run.info.status == "FINISHED"
    p = run.data.params
    assert p["starting_harness_id"] == summary["baseline_harness_id"]
    assert p["seeds"] == "[0, 1]" and p["size_target"] == "4"
    # one point per round on the parent, the last one the run's generator calls
    calls = client.get_metric_history(run.info.run_id, "generator_calls")
    assert [m.step for m in calls] == [1]
    assert calls[-1].value == summary["generator_calls"] > 0
    # one nested run per round, with its decision, metrics and round report
    (rnd,) = children(client, run.info.run_id)
    assert rnd.info.run_name == "round 1" and rnd.info.status == "FINISHED"
    assert rnd.data.tags["decision"] == summary["decisions"][0]["kind"]
    assert {"pass_rate_target", "cost_generator_calls", "candidates", "accepted"} <= set(
        rnd.data.metrics
    )
    assert "round_report.json" in artifacts(client, rnd.info.run_id)
    # what the job uploads after the run: its report, its summary, the final harness, and
    # the untouched test split's pass rates before and after
    top = artifacts(client, run.info.run_id)
    assert {"report.html", "summary.json", "final_harness"} <= top, top
    assert "final_harness/harness.yaml" in artifacts(client, run.info.run_id, "final_harness")
    local = client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))
    assert json.loads(Path(local).read_text())["run_id"] == rid
    final = summary["final"]["constraint_pass_rate"]
    logged = client.get_run(run.info.run_id).data.metrics
    assert logged["test_pass_rate_before"] == pytest.approx(final["before"])
    assert logged["test_pass_rate_after"] == pytest.approx(final["after"])
