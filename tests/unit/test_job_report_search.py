"""The main job report's notes on a search-protocol run (``job_report.search_notes``)."""

from __future__ import annotations

from types import SimpleNamespace

from evoharness.harness.schema import Harness
from evoharness.search.protocols import SearchConfig, SearchPorts, run_search
from evoharness_app.job_report import search_notes
from tests.unit._trace_world import compile_program, execute
from tests.unit.test_search_protocols import FEEDBACK, SELECTION


class DictStore(dict):  # type: ignore[type-arg]
    def get(self, key: str) -> bytes:  # type: ignore[override]
        return bytes(self[key])


def test_a_search_run_gets_its_protocol_steps_and_report_key() -> None:
    cfg = SearchConfig(seeds=(0, 1), iterations=2, candidates=2, concurrency=1)
    run = run_search(cfg, SearchPorts(execute, compile_program), Harness(), FEEDBACK, SELECTION)
    store = DictStore({"runs/r/search.json": run.model_dump_json().encode()})
    [note] = search_notes(SimpleNamespace(search_report_key="runs/r/search.json"), store)
    assert "Search protocol autoref" in note and "T = 2 iterations" in note
    for p in run.points:
        assert f"step {p.iteration}: {p.best_score:.3f}" in note
    assert search_notes(SimpleNamespace(search_report_key=""), store) == []
    [bad] = search_notes(SimpleNamespace(search_report_key="runs/x/search.json"), store)
    assert "not readable" in bad
