"""Where a run's objects live in the artifact store (S3): executions, analyses, round
reports. One place for each key, read by the activities, the workflow (the report key it
hands on) and the application (exports, reports). Pure functions: safe in workflow code."""

from __future__ import annotations

from typing import Any


def _beam_suffix(beam_index: int) -> str:
    return f"-b{beam_index}" if beam_index else ""


def execution_record_key(run_id: str, e: Any) -> str:
    """Key of the full record of execution ``e`` (anything with ``harness_id``, ``task_id``
    and ``seed``; with its trace) in run ``run_id``."""
    return f"runs/{run_id}/executions/{e.harness_id}/{e.task_id}/{e.seed}.json"


def analysis_key(run_id: str, round_: int, beam_index: int = 0) -> str:
    """Key of a round's full ``Analysis`` (with the per-constraint stats); a beam parent
    other than the head gets ``-b<i>``."""
    return f"runs/{run_id}/analysis-{round_:03d}{_beam_suffix(beam_index)}.json"


def report_key(run_id: str, round_: int, beam_index: int = 0) -> str:
    """Key of a round report (``round-NNN.json``; ``round-NNN-b<i>.json`` for the i-th beam
    parent other than the head)."""
    return f"runs/{run_id}/round-{round_:03d}{_beam_suffix(beam_index)}.json"


def search_report_key(run_id: str) -> str:
    """Key of a non-TRACE run's search report (``SearchRun`` JSON, rewritten after every
    step)."""
    return f"runs/{run_id}/search.json"
