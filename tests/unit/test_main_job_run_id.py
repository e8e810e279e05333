"""``evoharness evolve main --run-id`` (issue newuser27): a run id that names a finished run
is refused before the stack starts and before any of the run's files is rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness_app.main_job import MainJob, MainJobInputError, MainJobOptions
from tests.conftest import SHARED


class _StackStarted(Exception):
    """Raised instead of starting the stack: the job got past its checks."""


def _no_stack(self: MainJob) -> None:
    raise _StackStarted


def _finished_run(runs: Path) -> dict[Path, bytes]:
    """A run folder as a finished run leaves it; its files' bytes by path."""
    run = runs / "done"
    (run / "splits").mkdir(parents=True)
    (run / "params.json").write_text('{"run_id": "done"}')
    (run / "summary.json").write_text('{"scores": {}}')
    (run / "splits" / "target.jsonl").write_text('{"id": "t1"}\n')
    (run / "splits" / "manifest.json").write_text('{"files": {}}')
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


def test_a_used_run_folder_is_refused_before_the_stack_and_left_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    before = _finished_run(runs)
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    opts = MainJobOptions(shared_dir=SHARED, runs_dir=runs, stack_dir=runs / "stack", run_id="done")
    with pytest.raises(MainJobInputError) as exc:
        MainJob(opts).run()
    line = str(exc.value)
    assert "\n" not in line and str((runs / "done").resolve()) in line, line
    after = {p: p.read_bytes() for p in (runs / "done").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("marker", ["params.json", "summary.json", "splits"])
def test_each_marker_of_a_run_is_enough_to_refuse(tmp_path: Path, marker: str) -> None:
    from evoharness_app.main_job import refuse_used_run_dir

    run = tmp_path / "r"
    run.mkdir()
    refuse_used_run_dir(run)  # an empty folder holds no run
    (run / "report.html").write_text("x")
    refuse_used_run_dir(run)  # nor one without a run's files
    (run / marker).mkdir() if marker == "splits" else (run / marker).write_text("{}")
    with pytest.raises(MainJobInputError, match=marker):
        refuse_used_run_dir(run)
