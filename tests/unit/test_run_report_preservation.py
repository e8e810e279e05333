"""``evolve report``'s run notes name a round whose preservation set was empty (issue 16)."""

from __future__ import annotations

from pathlib import Path

from evoharness.trace.preservation import EMPTY_NOTE
from evoharness_app.run_report import run_report_input
from tests.report.sample import make_run


class _Store:
    """The two calls ``run_report_input`` makes of an ``S3ArtifactStore``; ``client`` is
    absent so the times fall back to now."""

    bucket = "b"

    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs

    def list_keys(self, prefix: str) -> list[str]:
        return [k for k in self.docs if k.startswith(prefix)]

    def get(self, key: str) -> str:
        return self.docs[key]


def test_run_notes_name_an_empty_preservation_set(tmp_path: Path) -> None:
    r1, r2 = make_run(tmp_path).rounds
    assert r1.preservation is not None
    empty = r1.preservation.model_copy(update={"task_ids": [], "notes": [EMPTY_NOTE]})
    docs = {
        "runs/x/round-001.json": r1.model_copy(update={"preservation": empty}).model_dump_json(),
        "runs/x/round-002.json": r2.model_dump_json(),
    }
    notes = run_report_input(_Store(docs), "x").notes
    assert f"round 1: {EMPTY_NOTE}" in notes
    assert not any("round 2:" in n for n in notes)
    docs["runs/x/round-001.json"] = r1.model_dump_json()
    assert not any("preservation" in n for n in run_report_input(_Store(docs), "x").notes)


def test_the_printed_summary_names_an_empty_preservation_set(tmp_path: Path) -> None:
    from evoharness_app.summary import summary_doc
    from tests.unit._main_job_result import main_job_result, summary_text

    dec = {"round": 1, "kind": "accepted", "reason": "all gate conditions hold"}
    r = main_job_result(
        tmp_path, decisions=[dec | {"preservation": [EMPTY_NOTE]}, dec | {"round": 2}]
    )
    text = summary_text(r)
    assert f"round 1: {EMPTY_NOTE}" in text and "round 2: preservation" not in text
    assert summary_doc(r)["decisions"][0]["preservation"] == [EMPTY_NOTE]


def test_the_recorded_decision_carries_the_preservation_notes(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from workflows.evolution import EvolutionWorkflow
    from workflows.params import RoundOutput

    r1, _ = make_run(tmp_path).rounds
    assert r1.preservation is not None
    holder = SimpleNamespace(state=SimpleNamespace(decisions=[]))
    EvolutionWorkflow._record_decision(holder, 1, RoundOutput(report=r1, report_key="k"))  # type: ignore[arg-type]
    empty = r1.preservation.model_copy(update={"task_ids": [], "notes": [EMPTY_NOTE]})
    rep = r1.model_copy(update={"preservation": empty})
    EvolutionWorkflow._record_decision(holder, 2, RoundOutput(report=rep, report_key="k"))  # type: ignore[arg-type]
    first, second = holder.state.decisions
    assert "preservation" not in first and second["preservation"] == [EMPTY_NOTE]
