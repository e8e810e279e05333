"""Progress of the long jobs (``evolve main``, ``evolve local``): rich's live bar on a terminal,
plain lines elsewhere.

A live bar redraws one line in place; written to a file, a pipe or CI's log (``nohup``,
``| tee``) it shows nothing until the job ends. ``progress_for`` asks the console
(``rich.console.Console.is_terminal``) and, when it is not a terminal, returns a
``LineProgress``: the same calls (``add_task``, ``advance``, ``update``, a context manager),
one plain line per task every ``STEP_PCT`` percent, at a change of total (a new phase) and at
least every ``INTERVAL_S`` seconds while the job polls it, changed or not (it is alive).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: A line at least every this many percent of a task ...
STEP_PCT = 5.0
#: ... or after this many seconds since the task's last line, whichever comes first.
INTERVAL_S = 30.0


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0
    started: float = 0.0
    last_line: float = -math.inf
    last_step: int = -1
    printed: tuple[str, float, float | None] | None = None


class LineProgress:
    """Plain-line progress for a console that is not a terminal (the interface of
    ``rich.progress.Progress`` the jobs use). ``step_pct``: a line each time a task crosses a
    multiple of this percentage; ``interval_s``: a line when this many seconds passed since
    the task's last one; ``clock``: seconds, monotonic (tests pass their own). Lines read
    ``<description>: <done>/<total> (<pct>%), <elapsed>`` (``<done> done`` without a total);
    leaving the context prints each task's final state once more if it changed."""

    def __init__(
        self,
        console: Any,
        *,
        step_pct: float = STEP_PCT,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if step_pct <= 0 or interval_s <= 0:
            raise ValueError(f"step_pct {step_pct} and interval_s {interval_s} must be > 0")
        self.console = console
        self.step_pct = step_pct
        self.interval_s = interval_s
        self.clock = clock
        self.tasks: list[_Task] = []

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for t in self.tasks:
            if t.printed != (t.description, t.completed, t.total):
                self._line(t)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        """A new task (its id); prints its first line."""
        now = self.clock()
        self.tasks.append(_Task(description, total, started=now))
        self._maybe(len(self.tasks) - 1, force=True)
        return len(self.tasks) - 1

    def advance(self, task_id: int, advance: float = 1) -> None:
        """``advance`` more of ``task_id`` done."""
        self.tasks[task_id].completed += advance
        self._maybe(task_id)

    def update(
        self,
        task_id: int,
        *,
        description: str | None = None,
        completed: float | None = None,
        total: float | None = None,
        **_: Any,
    ) -> None:
        """Set what rich's ``Progress.update`` sets; a new phase (a new total, or a count that
        went back) gets a line."""
        t = self.tasks[task_id]
        # a new total, or a count that went back, is a new phase
        new_total = total != t.total or (completed is not None and completed < t.completed)
        if description is not None:
            t.description = description
        if completed is not None:
            t.completed = completed
        t.total = total
        if new_total:
            t.last_step = -1
        self._maybe(task_id, force=new_total)

    def _maybe(self, task_id: int, force: bool = False) -> None:
        t = self.tasks[task_id]
        step = -1
        if t.total:
            step = int(min(100.0, 100.0 * t.completed / t.total) // self.step_pct)
        due = self.clock() - t.last_line >= self.interval_s
        if (
            force
            or step > t.last_step
            or due  # unchanged after 30 s: still a line, the job is alive
        ):
            t.last_step = max(step, t.last_step)
            self._line(t)

    def _line(self, t: _Task) -> None:
        now = self.clock()
        secs = int(now - t.started)
        elapsed = f"{secs // 60}m{secs % 60:02d}s"
        if t.total:
            pct = 100.0 * t.completed / t.total
            done = f"{t.completed:.0f}/{t.total:.0f} ({pct:.0f}%)"
        else:
            done = f"{t.completed:.0f} done"
        self.console.print(f"{t.description}: {done}, {elapsed}", highlight=False, markup=False)
        t.last_line = now
        t.printed = (t.description, t.completed, t.total)


def progress_for(console: Any, *columns: Any) -> Any:
    """rich's live ``Progress`` (with ``columns``, or rich's default ones) on ``console`` when
    it is a terminal, else a ``LineProgress`` printing plain lines to it."""
    if console.is_terminal:
        from rich.progress import Progress

        return Progress(*columns, console=console)
    return LineProgress(console)


__all__ = ["INTERVAL_S", "STEP_PCT", "LineProgress", "progress_for"]
