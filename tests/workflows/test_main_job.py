"""``evoharness evolve local`` (the main job without the service stack): splits, a Temporal dev server, an
in-process worker, rounds, ``result.json`` — on a tiny split."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness_app.cli import main
from tests.conftest import SHARED


def test_evolve_local_runs_rounds_and_writes_the_result(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("EVOHARNESS_SHARED", str(SHARED))
    rc = main(
        [
            "evolve",
            "local",
            "--run-id",
            "tiny",
            "--out",
            str(tmp_path),
            "--sizes",
            "4,2,2,2",
            "--rounds",
            "1",
            "--seeds",
            "2",
            "--synthetic",
            "12",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    res = json.loads((tmp_path / "tiny" / "result.json").read_text())
    assert res["rounds"] == 1 and res["decisions"][0]["kind"] in ("accepted", "no_patch")
    report = tmp_path / "tiny" / "store" / res["report_keys"][0]
    assert json.loads(report.read_text())["decision"]["reason"]
    assert "round 1:" in out
    manifest = json.loads((tmp_path / "tiny" / "splits" / "manifest.json").read_text())
    assert manifest["splits"]["target"]["count"] == 4
    # the untouched test split is prepared but never given to the workflow
    assert manifest["splits"]["test"]["count"] == 2
    params = json.loads((tmp_path / "tiny" / "params.json").read_text())
    assert set(params["splits"]) == {"target", "heldout", "preservation"}
    # the best harness's executions on the test split are stored: export-eval reads them
    assert "test split: 4 execution(s) of the best harness stored" in out
    run = tmp_path / "tiny"
    assert (
        main(["export-eval", str(run), "--dataset", "geneval", "--out", str(tmp_path / "gv")]) == 0
    )
    exported = json.loads((tmp_path / "gv" / "evoharness-export.json").read_text())
    c = exported["counts"]
    assert c["written"] + c["not_in_benchmark"] * 2 == 4 and c["missing"] == c["failed"] == 0
    assert exported["harness_id"] == res["best_harness_id"]
    assert main(["export-trajectories", str(run), "--out", str(tmp_path / "pairs.jsonl")]) == 0
    assert "pair(s) written" in capsys.readouterr().out
