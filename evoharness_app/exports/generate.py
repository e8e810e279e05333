"""Generating the images an export needs, instead of reading a run's (issue 33):
``evoharness export-eval --harness DIR --tasks FILE.jsonl`` runs a harness on every
(task, seed) with the worker's ports and stores each execution's record and image as a run
would, in a folder store, then the benchmark export reads them like a run's test split
(``exports.benchmarks.export_eval``).

The folder it builds (``generated_run``) is a small run folder: ``params.json`` (run id,
seeds), ``splits/test.jsonl`` (the tasks), ``store/`` (records under
``runs/<run_id>/executions/...`` and the images), so ``evoharness export-eval <folder>``
reads it again later. A (task, seed) whose execution fails is not stored: the export lists
it as missing, and ``GeneratedRun.failed`` says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.harness import Harness, harness_id
from evoharness.tasks.io import write_jsonl
from evoharness.tasks.models import Task
from evoharness_app.exports.run import RunFolder, open_run, store_test_records


@dataclass
class GeneratedRun:
    """A run folder made by ``generated_run``: the run to export, the harness id its images
    are of, and the (task id, seed, error) of every execution that failed."""

    run: RunFolder
    harness_id: str
    stored: int
    failed: list[tuple[str, int, str]] = field(default_factory=list)


def execute_and_store(
    ports: Any, run_id: str, harness: Harness, tasks: Sequence[Task], seeds: Sequence[int]
) -> tuple[int, list[tuple[str, int, str]]]:
    """Run ``harness`` on every (task, seed) through ``ports.execute`` (a ``TracePorts``)
    and store each record under run ``run_id``'s execution keys in ``ports.store``
    (``store_test_records``). Returns (records stored, [(task id, seed, error)] of the
    executions that raised)."""
    execs, failed = [], []
    for t in tasks:
        for seed in seeds:
            try:
                execs.append(ports.execute(harness, t, seed))
            except Exception as exc:  # noqa: BLE001 - listed, never skipped silently
                failed.append((t.task_id, seed, f"{type(exc).__name__}: {exc}"))
    return store_test_records(ports.store, run_id, execs), failed


def generated_run(
    harness: Harness,
    tasks: Sequence[Task],
    seeds: Sequence[int],
    folder: str | Path,
    *,
    generator: str = "sim",
    profile: str = "",
    settings: Any = None,
) -> GeneratedRun:
    """Generate ``harness``'s images of every (task, seed) into the run folder ``folder``
    (module docstring; new or empty, or one it made before: records are overwritten and the
    execution cache makes a repeated generation free). ``generator``: ``sim`` (the embedded
    world, ``profile``: its generator profile, default sdxl-like) or ``grpc`` (the
    generation service of ``settings``, the worker's settings; default: loaded from
    ``EVOHARNESS_CONFIG`` / the environment). The verifier is the worker's default
    (``sim-detector`` with ``sim``, the verification service with ``grpc``). Raises
    ``ValueError`` for an unknown generator, no seeds, or a ``folder`` holding anything
    else."""
    from workflows.backends import TracePorts, load_worker_settings

    if generator not in ("sim", "grpc"):
        raise ValueError(f"--generator {generator!r}: expected sim or grpc")
    if not seeds:
        raise ValueError("--seeds: give at least one seed")
    root = Path(folder)
    if root.exists() and any(root.iterdir()) and not _generated(root):
        raise ValueError(f"{root}: exists and is neither empty nor a folder made by --harness")
    base = settings if settings is not None else load_worker_settings()
    update: dict[str, Any] = {"store": "local", "local_dir": str(root / "store")}
    if profile:
        update["sim_profile"] = profile
    worker = base.worker.model_copy(update=update)
    verifier = "sim-detector" if generator == "sim" else "grpc"
    ports = TracePorts(base.model_copy(update={"worker": worker}), generator, verifier, "rule")
    hid = harness_id(harness)
    run_id = f"generated-{hid[:12]}"
    (root / "splits").mkdir(parents=True, exist_ok=True)
    write_jsonl(tasks, root / "splits" / "test.jsonl")
    (root / "params.json").write_text(
        json.dumps({"run_id": run_id, "seeds": list(seeds)}, indent=2), encoding="utf-8"
    )
    stored, failed = execute_and_store(ports, run_id, harness, tasks, seeds)
    (root / "result.json").write_text(
        json.dumps({"best_harness_id": hid, "generated": True}, indent=2), encoding="utf-8"
    )
    return GeneratedRun(open_run(root), hid, stored, failed)


def _generated(root: Path) -> bool:
    """True when ``root`` is a folder ``generated_run`` made (its result.json says so)."""
    try:
        doc = json.loads((root / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("generated") is True
