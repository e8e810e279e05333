"""The run's inputs: the harness and the task splits resolved from their references
(``file://`` or ``s3://`` URIs, or inline), read label-free unless the run uses benchmark
labels (every task's constraints replaced by the frozen extractor's reading of its prompt),
the splits checked disjoint and against ``scored_on`` (``evoharness.tasks.overlap``).

``InputLoader.load`` is the ``load_inputs`` activity's body. Bad input raises
``workflows.errors.bad_input`` naming the split, the URI and the line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from evoharness.canonical import canonical_json
from evoharness.harness.io import HarnessError, from_document, harness_id, load_dir, loads
from evoharness.tasks.io import load_tasks
from evoharness.tasks.labelfree import LabelFreeError, extractor_id, label_free
from evoharness.tasks.models import Task
from evoharness.tasks.overlap import OverlapError, refuse_overlap
from evoharness.tasks.splits import EVOLUTION_SPLITS
from services.common.metrics import BUDGET_USD, RUN_NOTHING_CHECKABLE, WORKFLOW_LAST_PROGRESS
from workflows.backends import WorkerSettings
from workflows.errors import bad_input
from workflows.params import EvolutionMode, EvolutionParams, LoadedInputs, run_mode_key


class InputLoader:
    """Reads a run's inputs with one worker's ``settings`` (S3 for ``s3://`` URIs) and writes
    the run's mode and starting document to ``store``."""

    def __init__(self, settings: WorkerSettings, store: Any) -> None:
        self.settings = settings
        self.store = store

    def read_uri(self, uri: str, what: str) -> tuple[bytes | None, Path | None]:
        u = urlparse(uri)
        if u.scheme == "file":
            p = Path(u.path)
            if not p.exists():
                raise bad_input(f"{what}: {uri} does not exist")
            return None, p
        if u.scheme == "s3":
            from services.storage.s3 import S3ArtifactStore

            store = S3ArtifactStore.from_settings(self.settings.s3, bucket=u.netloc)
            key = u.path.lstrip("/")
            if not store.exists(key):
                raise bad_input(f"{what}: {uri} does not exist")
            return store.get(key), None
        raise bad_input(f"{what}: unsupported URI scheme in {uri!r} (file:// or s3://)")

    def split_tasks(self, name: str, src: Any) -> list[Task]:
        """The tasks of one split source: ``src.tasks`` when inline, else the JSONL at
        ``src.uri`` (a ``file:`` or ``s3:`` URI, the latter read through S3). ``name``
        (e.g. ``"preservation"``, ``"scored_on[0]"``) names the split in errors. Raises a
        non-retryable bad-input error naming the split, the URI and the line of an invalid
        task."""
        if src.tasks is not None:
            return list(src.tasks)
        data, path = self.read_uri(src.uri, f"split {name}")
        try:
            if path is not None:
                return load_tasks(path)
            tasks = []
            for i, line in enumerate((data or b"").decode("utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        tasks.append(Task.model_validate_json(line))
                    except ValidationError as exc:
                        raise ValueError(f"{src.uri}:{i}: {exc.errors()[0]['msg']}") from None
            return tasks
        except ValueError as exc:
            raise bad_input(f"split {name}: {exc}") from None

    def load(self, params: EvolutionParams) -> LoadedInputs:
        """Resolve the harness and the three splits; check the splits are disjoint and the
        target split non-empty (bad input otherwise)."""
        ref = params.harness
        try:
            if ref.document is not None:  # strict types, as a harness file (issue 14 item 15)
                harness = from_document(ref.document, "harness.document")
            else:
                assert ref.uri is not None
                data, path = self.read_uri(ref.uri, "harness")
                if path is not None:
                    harness = (
                        load_dir(path) if path.is_dir() else loads(path.read_bytes(), str(path))
                    )
                else:
                    harness = loads(data or b"", ref.uri)
        except (HarnessError, ValidationError, ValueError) as exc:
            raise bad_input(f"harness: {exc}") from None
        splits = {
            name: self.split_tasks(name, getattr(params.splits, name)) for name in EVOLUTION_SPLITS
        }
        if not splits["target"]:
            raise bad_input("split target is empty")
        mode = self._mode(params, splits)
        if not params.benchmark_labels:
            dropped: list[str] = []
            for name in list(splits):
                mode.read += len(splits[name])
                splits[name], summary = label_free(splits[name], params.extractor)
                dropped += summary.dropped
            mode.dropped = dropped
            RUN_NOTHING_CHECKABLE.labels(run_id=params.run_id).set(len(dropped))
            if not splits["target"]:
                raise bad_input(
                    f"split target: the extractor {mode.extractor} reads no constraint from "
                    "any of its prompts (label-free mode)"
                )
        seen: dict[str, str] = {}
        for name, tasks in splits.items():
            for t in tasks:
                if t.task_id in seen and seen[t.task_id] != name:
                    raise bad_input(
                        f"task {t.task_id} is in both {seen[t.task_id]} and {name}: splits must be disjoint"
                    )
                seen[t.task_id] = name
        if params.budget_usd is not None:
            BUDGET_USD.labels(run_id=params.run_id).set(params.budget_usd)
        WORKFLOW_LAST_PROGRESS.labels(run_id=params.run_id).set(time.time())
        # the mode beside the round reports, for a report rendered from the bucket alone
        # (``evoharness evolve report``: the extractor, the nothing-checkable count)
        self.store.put(
            run_mode_key(params.run_id), mode.model_dump_json(indent=2).encode(), "application/json"
        )
        # the starting document, so that registrations can link to it (lineage, item 6)
        self.store.put(
            f"harnesses/{harness_id(harness)}.json",
            canonical_json(harness.to_document()),
            "application/json",
        )
        return LoadedInputs(harness=harness, splits=splits, mode=mode)

    def _mode(self, params: EvolutionParams, splits: dict[str, list[Task]]) -> EvolutionMode:
        """The run's mode: the frozen extractor id (bad input if a continuation finds another)
        and the overlap check of the evolution splits against ``params.scored_on`` (bad input,
        listing the prompts, when any overlaps)."""
        try:
            eid = "" if params.benchmark_labels else extractor_id(params.extractor)
        except LabelFreeError as exc:
            raise bad_input(f"extractor: {exc}") from None
        before = params.state.mode if params.state is not None else None
        if before is not None and before.extractor and eid and before.extractor != eid:
            raise bad_input(
                f"extractor changed during the run: it started with {before.extractor}, the "
                f"worker now has {eid} (the extractor is frozen for a run)"
            )
        scored = [
            t
            for i, src in enumerate(params.scored_on)
            for t in self.split_tasks(f"scored_on[{i}]", src)
        ]
        method = ""
        if scored:
            try:
                method = refuse_overlap(splits, scored, params.overlap)
            except OverlapError as exc:
                raise bad_input(str(exc)) from None
        return EvolutionMode(
            benchmark_labels=params.benchmark_labels,
            extractor=eid,
            overlap=method,
            scored_on=len(scored),
        )
