"""Where a run's objects live in the artifact store (S3): executions, analyses, round
reports. One place for each key, read by the activities, the workflow (the report key it
hands on) and the application (exports, reports). Pure functions: safe in workflow code."""

from __future__ import annotations

import re
from typing import Any

#: A run id: a letter or digit, then letters, digits, '.', '_' or '-'. It names the run's
#: folder (``runs/<run_id>``), its S3 prefix (``runs/<run_id>/``) and its workflow id, so
#: '.', '..' and anything with '/' are refused (they would name another folder). The one
#: rule: ``EvolutionParams.run_id`` and every CLI verb taking a run id use it.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def check_run_id(run_id: str) -> str:
    """``run_id`` when it matches ``RUN_ID_PATTERN``; else ``ValueError`` saying why."""
    if not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise ValueError(
            f"{run_id!r} is not a run id: it must start with a letter or digit and hold only "
            "letters, digits, '.', '_' and '-'"
        )
    return run_id


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
