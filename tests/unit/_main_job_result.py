"""A ``MainJobResult`` for the summary and report tests: an empty run with every required
field filled (``main_job_result``), and the console summary it prints (``summary_text``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from evoharness_app.summary import MainJobResult, print_summary


def main_job_result(tmp_path: Path, **kw: Any) -> MainJobResult:
    """An empty run (no decisions, no calls, baseline h0 → final h1) with ``kw`` replacing
    any field."""
    fields: dict[str, Any] = {
        "run_id": "x",
        "run_dir": tmp_path,
        "report": tmp_path / "report.html",
        "baseline_harness_id": "h0",
        "final_harness_id": "h1",
        "scores": {"before": {}, "after": {}},
        "decisions": [],
        "accepted_diffs": [],
        "generator_calls": 0,
        "cache_hits": 0,
        "executions": 0,
        "spend_usd": 0.0,
        "promoted_registration": "",
        "timings": {},
    }
    return MainJobResult(**(fields | kw))


def summary_text(r: MainJobResult) -> str:
    """What ``print_summary`` prints for ``r``, as plain text (400 columns)."""
    console = Console(record=True, width=400)
    print_summary(r, console)
    return console.export_text()
