"""The small fixed split the workflow tests and ``bench/trace_bench.py`` use: GenEval counting
prompts (counts >= 3) plus synthetic counting tasks as the target, other GenEval counting
prompts as held-out, GenEval single objects as preservation. Built from ``../shared`` data by
the project's own builders; nothing is hard-coded but the selection."""

from __future__ import annotations

from pathlib import Path

from evoharness.tasks.builders import build_geneval
from evoharness.tasks.models import Task
from evoharness.tasks.synthetic import build_synthetic


def small_split(shared: Path, n_target: int = 10, n_synthetic: int = 2) -> dict[str, list[Task]]:
    """``{"target", "heldout", "preservation"}`` → tasks (disjoint)."""
    tasks = build_geneval(shared / "data" / "geneval" / "evaluation_metadata.jsonl")
    counting = [
        t for t in tasks if t.task_family == "counting" and (t.constraints[0].min_count or 0) >= 3
    ]
    single = [t for t in tasks if t.task_family == "single_object"]
    synthetic = [
        t for t in build_synthetic(seed=0, count=60) if t.task_family == "synthetic_counting"
    ]
    return {
        "target": counting[:n_target] + synthetic[:n_synthetic],
        "heldout": counting[30:33],
        "preservation": single[:6],
    }
