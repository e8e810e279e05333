"""``evoharness export-trajectories``: best-vs-worst execution pairs of a run as JSON Lines,
for supervised fine-tuning or GRPO-style training of a policy model that writes programs.

One line per task (``TrajectoryPair``): the prompt; the best and the worst of the task's
executions in the run (every harness the run executed — parents and candidates — and every
seed), each with its program, the programs it generated on the way (repairs, best-of-N),
its trajectory (the runtime's decision trace), its image key, its verdicts and its reward;
and the reward gap. The reward of an execution is its pass rate over its verdicts (passed /
verdicts, 0..1): the verifier's verdicts on the constraints the run checked — in label-free
runs what the frozen extractor read from the prompt, never the benchmark's labels. It is the
reward ``evoharness.memory.bundles.summarise`` compares best and worst by.

Protocol failures (``evoharness.memory.bundles.is_protocol_failure``: no image, no verdict,
every verdict uncertain, or an error in the trace) are left out before the pair is chosen;
a task keeps a pair only when two executions remain and the gap is positive and at least
``min_reward_gap``. Ties go to the first execution in (harness id, seed) order. Tasks of the
untouched ``test`` split (whose executions both jobs store for ``export-eval``) are left out:
training on them would contaminate the figures the run reports on that split.

The JSON Schema of a line is ``docs/exports-trajectory.schema.json``, generated from
``TrajectoryPair`` (``trajectory_schema``); every line is validated against the model before
it is written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import EvidenceStatus
from evoharness.memory.bundles import is_protocol_failure
from evoharness.program import Program
from evoharness.tasks.models import Task
from evoharness.tasks.splits import TEST_SPLIT  # never exported as training data
from evoharness.trace.models import Execution
from evoharness_app.exports.run import RunFolder, RunReadError

SCHEMA_VERSION: Literal[1] = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageKey(_Strict):
    """Where the execution's image is: the store's ``bucket`` (``local`` for a folder
    store), ``key`` and ``sha256`` of the PNG bytes."""

    bucket: str
    key: str
    sha256: str


class Verdict(_Strict):
    """The verifier's verdict on one constraint: ``pass``, ``fail`` or ``uncertain``, with a
    confidence in 0..1."""

    constraint_id: str
    status: Literal["pass", "fail", "uncertain"]
    confidence: float = Field(ge=0.0, le=1.0)


class ExecutionSide(_Strict):
    """One execution of the pair: which harness and seed made it, its content address
    (``execution_key`` = sha256(program, generator id, seed)), its reward (pass rate, 0..1),
    the final program, every program generated (``programs``), the trajectory (the runtime's
    decision trace: rules, skills, tools, repair steps, one object per entry), the image key
    and the verdicts."""

    harness_id: str
    seed: int
    execution_key: str
    reward: float = Field(ge=0.0, le=1.0)
    program: Program
    programs: list[Program]
    trajectory: list[dict[str, Any]]
    image: ImageKey
    verdicts: list[Verdict]
    generator_calls: int = Field(ge=0)


class TrajectoryPair(_Strict):
    """One JSONL line of ``export-trajectories``: a task's best and worst executions in a
    run. ``reward_gap`` = best.reward − worst.reward (> 0); ``split``: the run split the
    task belongs to; ``n_executions``: the task's executions the pair was chosen from
    (protocol failures excluded)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    task_id: str
    split: str
    prompt: str
    best: ExecutionSide
    worst: ExecutionSide
    reward_gap: float = Field(gt=0.0, le=1.0)
    n_executions: int = Field(ge=2)


def trajectory_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, pydantic's ``model_json_schema``) of one line; what
    ``docs/exports-trajectory.schema.json`` holds."""
    schema = TrajectoryPair.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://evoharness/docs/exports-trajectory.schema.json",
        **schema,
    }


def reward(execution: Execution) -> float:
    """Pass rate over the execution's verdicts (0..1; 0.0 with no verdict)."""
    if not execution.evidence:
        return 0.0
    passed = sum(ev.status is EvidenceStatus.passed for ev in execution.evidence)
    return passed / len(execution.evidence)


@dataclass
class TrajectoryStats:
    """Counts of an export: ``tasks`` with executions, ``pairs`` written,
    ``protocol_failures`` left out, tasks with fewer than two usable executions
    (``too_few``), tasks whose gap was not above ``min_reward_gap`` (``below_gap``), and
    executions of tasks in none of the run's splits (``unknown_task``, listed), and tasks
    of the untouched test split left out (``test_split``)."""

    tasks: int = 0
    pairs: int = 0
    protocol_failures: int = 0
    too_few: int = 0
    below_gap: int = 0
    unknown_task: list[str] = field(default_factory=list)
    test_split: int = 0


def _side(e: Execution, r: float) -> ExecutionSide:
    assert e.image is not None  # protocol failures (no image) are left out before
    return ExecutionSide(
        harness_id=e.harness_id,
        seed=e.seed,
        execution_key=e.execution_key,
        reward=r,
        program=e.program,
        programs=list(e.programs),
        trajectory=list(e.trace),
        image=ImageKey(bucket=e.image.bucket, key=e.image.key, sha256=e.image.sha256),
        verdicts=[
            Verdict(
                constraint_id=ev.constraint_id, status=ev.status.value, confidence=ev.confidence
            )
            for ev in e.evidence
        ],
        generator_calls=e.generator_calls,
    )


def _split_tasks(run: RunFolder) -> dict[str, tuple[str, Task]]:
    """task id → (split, task) over every split file of the run."""
    out: dict[str, tuple[str, Task]] = {}
    for path in sorted((run.folder / "splits").glob("*.jsonl")):
        for t in run.tasks(path.stem):
            out.setdefault(t.task_id, (path.stem, t))
    return out


def build_pairs(
    run: RunFolder, min_reward_gap: float = 0.0
) -> tuple[list[TrajectoryPair], TrajectoryStats]:
    """The run's best-vs-worst pairs (see the module docstring) and the counts. Raises
    ``ValueError`` for a ``min_reward_gap`` outside 0..1 and ``RunReadError`` for an
    unreadable record or split."""
    if not 0.0 <= min_reward_gap <= 1.0:
        raise ValueError(f"--min-reward-gap {min_reward_gap}: expected a number in 0..1")
    tasks = _split_tasks(run)
    if not tasks:
        raise RunReadError(f"{run.folder}/splits: no split files in this run")
    by_task: dict[str, list[Execution]] = {}
    for e in run.records():
        by_task.setdefault(e.task_id, []).append(e)
    stats = TrajectoryStats(tasks=len(by_task))
    pairs: list[TrajectoryPair] = []
    for tid in sorted(by_task):
        if tid not in tasks:
            stats.unknown_task.append(tid)
            continue
        if tasks[tid][0] == TEST_SPLIT:
            stats.test_split += 1
            continue
        execs = sorted(by_task[tid], key=lambda e: (e.harness_id, e.seed))
        usable = [e for e in execs if not is_protocol_failure(e)]
        stats.protocol_failures += len(execs) - len(usable)
        if len(usable) < 2:
            stats.too_few += 1
            continue
        scored = [(e, reward(e)) for e in usable]
        best_i = max(range(len(scored)), key=lambda i: (scored[i][1], -i))
        worst_i = min(range(len(scored)), key=lambda i: (scored[i][1], i))
        (best, rb), (worst, rw) = scored[best_i], scored[worst_i]
        gap = rb - rw
        if gap <= 0.0 or gap < min_reward_gap:
            stats.below_gap += 1
            continue
        split, task = tasks[tid]
        pairs.append(
            TrajectoryPair(
                run_id=run.run_id,
                task_id=tid,
                split=split,
                prompt=task.prompt,
                best=_side(best, rb),
                worst=_side(worst, rw),
                reward_gap=gap,
                n_executions=len(usable),
            )
        )
    stats.pairs = len(pairs)
    return pairs, stats


def export_trajectories(
    run: RunFolder, out: str | os.PathLike[str], min_reward_gap: float = 0.0
) -> TrajectoryStats:
    """Write the run's pairs to ``out`` (JSON Lines, one ``TrajectoryPair`` a line, each
    validated against the model); returns the counts. Errors as ``build_pairs``, and
    ``OSError`` when ``out`` cannot be written."""
    pairs, stats = build_pairs(run, min_reward_gap)
    lines = []
    for p in pairs:
        doc = json.loads(p.model_dump_json())
        TrajectoryPair.model_validate(doc)  # the line as read back is a valid pair
        lines.append(json.dumps(doc, ensure_ascii=False, sort_keys=True))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return stats


if __name__ == "__main__":  # regenerate docs/exports-trajectory.schema.json
    _DOC = Path(__file__).resolve().parents[2] / "docs" / "exports-trajectory.schema.json"
    _DOC.write_text(json.dumps(trajectory_schema(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {_DOC}")
