"""Reading a finished run for the exports: its folder, its store, its splits, its harness ids
and its execution records.

A run folder (``runs/<run_id>/``, written by ``evoharness evolve main`` or ``evolve local``)
holds ``params.json`` (the seeds), ``splits/<split>.jsonl`` (the tasks, the untouched
``test`` split included) and ``summary.json`` (``evolve main``: ``final_harness_id``,
``baseline_harness_id``) or ``result.json`` (``evolve local``: ``best_harness_id``). The
execution records are in the run's store at ``runs/<run_id>/executions/<harness>/<task>/
<seed>.json`` (``workflows.store_keys.execution_record_key``) and the images at their
``ImageRef.key`` in the same store: ``<run>/store/`` for ``evolve local``, the stack's S3
bucket for ``evolve main`` (``services.common.settings``), or any folder given as
``store_dir``.

Both jobs store the records of the test split's evaluation there too
(``store_test_records``), so an export reads the images a run produced for its test split.
Owns nothing of the benchmarks' layouts (``exports.benchmarks``) or of the pairs
(``exports.trajectories``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoharness.local_store import LocalArtifactStore
from evoharness.tasks.io import TaskFileError, load_tasks
from evoharness.tasks.models import Task
from evoharness.trace.models import Execution
from evoharness_app.stores import stack_store
from workflows.store_keys import execution_record_key


class RunReadError(Exception):
    """A run folder or store that cannot be read as a run; the message names the file."""


@dataclass(frozen=True)
class RunFolder:
    """A finished run, opened for reading (``open_run``).

    ``store``: the run's artifact store (``get``, ``exists``, ``list_keys``); ``seeds``: the
    run's matched seeds from ``params.json``; ``final_harness_id``: the run's result (None
    when the run wrote neither ``summary.json`` nor ``result.json``);
    ``baseline_harness_id``: the starting harness when the run says which (``summary.json``).
    """

    run_id: str
    folder: Path
    store: Any
    seeds: tuple[int, ...]
    final_harness_id: str | None
    baseline_harness_id: str | None

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``split`` (``splits/<split>.jsonl``); ``RunReadError`` naming the file
        when it is missing or unreadable."""
        path = self.folder / "splits" / f"{split}.jsonl"
        if not path.is_file():
            raise RunReadError(f"{path}: no {split!r} split in this run")
        try:
            return load_tasks(path)
        except TaskFileError as exc:
            raise RunReadError(str(exc)) from None

    def record_key(self, harness_id: str, task_id: str, seed: int) -> str:
        """Store key of the execution record of (harness, task, seed) in this run."""
        return execution_record_key(
            self.run_id, _Ref(harness_id=harness_id, task_id=task_id, seed=seed)
        )

    def record(self, harness_id: str, task_id: str, seed: int) -> Execution | None:
        """The stored execution of (harness, task, seed); None when there is none.
        ``RunReadError`` naming the key when the record is not a valid ``Execution``."""
        key = self.record_key(harness_id, task_id, seed)
        try:
            raw = self.store.get(key)
        except KeyError:
            return None
        return _parse_record(key, raw)

    def records(self) -> list[Execution]:
        """Every execution record of the run (every harness, split and seed), in key order."""
        prefix = f"runs/{self.run_id}/executions/"
        return [
            _parse_record(k, self.store.get(k))
            for k in self.store.list_keys(prefix)
            if k.endswith(".json")
        ]


@dataclass(frozen=True)
class _Ref:
    harness_id: str
    task_id: str
    seed: int


def _parse_record(key: str, raw: bytes) -> Execution:
    try:
        return Execution.model_validate_json(raw)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise RunReadError(f"execution record {key}: not a valid execution ({first})") from None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunReadError(f"{path}: cannot read as JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RunReadError(f"{path}: expected a JSON object")
    return doc


def open_run(folder: str | Path, store_dir: str | Path | None = None) -> RunFolder:
    """Open the run folder ``folder`` (``runs/<run_id>``) for reading.

    The store is ``store_dir`` when given, else ``<folder>/store`` when it exists (``evolve
    local``), else the stack's S3 bucket from the service settings (``evolve main``).
    Raises ``RunReadError`` naming the folder or file when the folder is not a run (no
    ``params.json``) or a file is unreadable."""
    run = Path(folder)
    if not run.is_dir():
        raise RunReadError(f"{run}: not a run folder (no such folder)")
    params_path = run / "params.json"
    if not params_path.is_file():
        raise RunReadError(f"{run}: not a run folder (no params.json)")
    params = _read_json(params_path)
    seeds = params.get("seeds") or [0]
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise RunReadError(f"{params_path}: field 'seeds' must be a list of integers")
    run_id = str(params.get("run_id") or run.name)
    final = baseline = None
    if (run / "summary.json").is_file():
        summary = _read_json(run / "summary.json")
        final = summary.get("final_harness_id")
        baseline = summary.get("baseline_harness_id")
    elif (run / "result.json").is_file():
        final = _read_json(run / "result.json").get("best_harness_id")
    if store_dir is not None:
        if not Path(store_dir).is_dir():
            raise RunReadError(f"--store {store_dir}: no such folder")
        store: Any = LocalArtifactStore(store_dir)
    elif (run / "store").is_dir():
        store = LocalArtifactStore(run / "store")
    else:  # the stack's S3 (evolve main)
        store = stack_store()
    return RunFolder(
        run_id=run_id,
        folder=run,
        store=store,
        seeds=tuple(seeds),
        final_harness_id=str(final) if final else None,
        baseline_harness_id=str(baseline) if baseline else None,
    )


def store_test_records(store: Any, run_id: str, executions: Iterable[Execution]) -> int:
    """Store the full record of each execution of the test split's evaluation under the
    run's execution keys (``execution_record_key``), as the round's activities store
    theirs; returns how many were stored. The exports read them back (``RunFolder.record``)."""
    n = 0
    for e in executions:
        store.put(execution_record_key(run_id, e), e.model_dump_json().encode(), "application/json")
        n += 1
    return n
