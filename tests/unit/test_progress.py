"""Progress of ``evolve main`` when stdout is not a terminal (issue 27 item 9): nohup, CI or a
log file saw nothing for the whole evolution; now a plain line every few percent or 30 s."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

from rich.console import Console

from evoharness_app.main_job import MainJob, MainJobOptions
from evoharness_app.progress import LineProgress


def test_piped_stdout_gets_plain_progress_lines(tmp_path: Path) -> None:
    """The main job's progress in a real child process whose stdout is a pipe."""
    code = textwrap.dedent(
        """
        from evoharness_app.main_job import MainJob, MainJobOptions
        job = MainJob(MainJobOptions())
        with job.progress_bar() as bar:
            t = bar.add_task("evaluate baseline", total=200)
            for _ in range(200):
                bar.advance(t, 1)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith("evaluate baseline:")]
    # a line at the start and at every 5%: 0, 10/200 (5%), …, 200/200 (100%)
    assert len(lines) == 21, out
    assert "evaluate baseline: 100/200 (50%)" in out
    assert lines[-1].startswith("evaluate baseline: 200/200 (100%)")
    assert "\x1b[" not in out and "\r" not in out  # no live-bar redraws in the log


def test_a_slow_task_gets_a_line_every_30_seconds() -> None:
    now = [0.0]
    buf = io.StringIO()
    bar = LineProgress(Console(file=buf, width=200), clock=lambda: now[0])
    with bar:
        t = bar.add_task("evolution", total=None)  # no total yet: time alone says when
        for i in range(1, 121):
            now[0] = float(i)  # one second per poll, two minutes
            bar.update(t, description=f"round 1 execute calls {i}", completed=i)
    lines = buf.getvalue().splitlines()
    # at 0 s, then 30, 60, 90 and 120 s (the last also the final state)
    assert [ln.rsplit(", ", 1)[1] for ln in lines] == ["0m00s", "0m30s", "1m00s", "1m30s", "2m00s"]
    assert lines[-1] == "round 1 execute calls 120: 120 done, 2m00s"


def test_a_phase_that_reports_nothing_still_gets_a_line_every_30_seconds() -> None:
    """The workflow's validate phase can sit at 0/1992 for minutes: a line every 30 s says
    the job is alive (a default-size run printed nothing for 3 minutes)."""
    now = [0.0]
    buf = io.StringIO()
    bar = LineProgress(Console(file=buf, width=200), clock=lambda: now[0])
    t = bar.add_task("round 1 validate", total=1992)
    for i in range(1, 91):
        now[0] = float(i)
        bar.update(t, description="round 1 validate", completed=0, total=1992)
    assert [ln.rsplit(", ", 1)[1] for ln in buf.getvalue().splitlines()] == [
        "0m00s",
        "0m30s",
        "1m00s",
        "1m30s",
    ]


def test_a_new_phase_gets_a_line() -> None:
    buf = io.StringIO()
    bar = LineProgress(Console(file=buf, width=200), clock=lambda: 0.0)
    t = bar.add_task("evolution", total=None)
    bar.update(t, description="round 1 execute", completed=40, total=40)
    bar.update(t, description="round 1 validate", completed=0, total=40)
    bar.update(t, description="round 1 validate", completed=1, total=40)
    assert buf.getvalue().splitlines()[-2:] == [
        "round 1 execute: 40/40 (100%), 0m00s",
        "round 1 validate: 0/40 (0%), 0m00s",
    ]


def test_a_terminal_keeps_the_live_bar() -> None:
    from rich.progress import Progress

    job = MainJob(MainJobOptions(), console=Console(file=io.StringIO(), force_terminal=True))
    assert isinstance(job.progress_bar(), Progress)
