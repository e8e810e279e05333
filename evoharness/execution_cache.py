"""The execution cache: one content-addressed record per execution, over any ``ArtifactStore``.

Owns the layout of executions in the store and the single-flight lock per execution key; it
never imports services or workflows (the generation service and the worker's in-process
generator both use it, so there is one cache and one record layout, docs/architecture.md).

Layout, for execution key ``k`` (``evoharness.program.execution_key``) under ``prefix``
(``executions`` by default):

- ``<prefix>/<k[:2]>/<k>.png``: the image (the two-character folder spreads keys over an S3
  bucket's partitions);
- ``<prefix>/<k[:2]>/<k>.json``: the execution's one metadata record (``ExecutionRecord``),
  written *after* the image: its existence marks a complete execution, so a writer killed
  between the two leaves a miss, never a record without its image.

A record that does not parse as an ``ExecutionRecord`` (e.g. the scene manifest the generation
service stored at that key before records existed) is a miss: the execution is generated again
and the record overwrites it.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from evoharness.canonical import canonical_json
from evoharness.ports import ArtifactStore

#: Default prefix of execution objects in the artifact store.
EXECUTIONS_PREFIX = "executions"


def execution_object_key(key: str, suffix: str = ".png", prefix: str = EXECUTIONS_PREFIX) -> str:
    """Store key of execution ``key``'s image (``suffix=".png"``) or record (``".json"``):
    ``<prefix>/<key[:2]>/<key><suffix>``."""
    return f"{prefix.strip('/')}/{key[:2]}/{key}{suffix}"


class ExecutionRecord(BaseModel):
    """The one metadata record of an execution.

    ``execution_key``: its content address (64 hex). ``key``: the image's store key.
    ``sha256``: the image bytes' sha256 (hex). ``generator_id``: the frozen generator that made
    it. ``seconds``: generator-seconds the execution cost when it was generated (what a cache
    hit reports as its nominal cost). ``width``, ``height``: the image's size in pixels.
    ``manifest``: the scene the simulator drew (sim only; None otherwise). ``program``: the
    program that was run (canonical JSON form), for audits.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    execution_key: str
    key: str
    sha256: str
    generator_id: str
    seconds: float
    width: int = 0
    height: int = 0
    manifest: dict[str, Any] | None = None
    program: dict[str, Any] | None = None


class ExecutionCache:
    """Looks up and writes execution records in ``store`` under ``prefix``.

    Thread-safe. ``single_flight(key)`` serialises work on one key inside this process: two
    threads asking for the same program at once make one generator call, the second then finds
    the record (two *processes* can still race on one key; the second write is identical and
    overwrites the first).
    """

    def __init__(self, store: ArtifactStore, prefix: str = EXECUTIONS_PREFIX) -> None:
        self.store = store
        self.prefix = prefix
        # a store whose put can skip its existence check (S3ArtifactStore: one round trip less
        # per object) is told to, since ``record`` follows a lookup that found nothing
        self._put_kw = (
            {"skip_if_present": False}
            if "skip_if_present" in inspect.signature(store.put).parameters
            else {}
        )
        self._inflight_lock = threading.Lock()
        self._inflight: dict[str, list[Any]] = {}  # execution key -> [lock, waiters]

    def image_key(self, key: str) -> str:
        """Store key of execution ``key``'s image."""
        return execution_object_key(key, ".png", self.prefix)

    def record_key(self, key: str) -> str:
        """Store key of execution ``key``'s record."""
        return execution_object_key(key, ".json", self.prefix)

    @contextlib.contextmanager
    def single_flight(self, key: str) -> Iterator[None]:
        """Hold the lock of execution ``key`` in this process (see the class docstring). Two
        attempts of one activity run at once when Temporal retries an attempt it lost track of
        while the first still runs; without this both made the same call (found by
        tests/chaos)."""
        with self._inflight_lock:
            entry = self._inflight.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._inflight_lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._inflight[key]

    def lookup(self, key: str) -> ExecutionRecord | None:
        """The record of execution ``key``, or None when the execution is not stored (or its
        record is not an ``ExecutionRecord``: see the module docstring). One store read.
        Store errors other than a missing key propagate."""
        try:
            raw = self.store.get(self.record_key(key))
        except KeyError:  # LocalArtifactStore's and S3's ArtifactNotFound
            return None
        try:
            return ExecutionRecord.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            return None

    def record(
        self,
        key: str,
        png: bytes,
        *,
        generator_id: str,
        seconds: float,
        width: int = 0,
        height: int = 0,
        manifest: dict[str, Any] | None = None,
        program: dict[str, Any] | None = None,
    ) -> ExecutionRecord:
        """Store execution ``key``: its image ``png``, then its record (fields as in
        ``ExecutionRecord``). Returns the record written. Call it after ``lookup`` found
        nothing, holding ``single_flight(key)``: both objects are written without first
        checking for them. Store errors propagate (nothing is recorded then)."""
        image_key = self.image_key(key)
        sha = self.store.put(image_key, png, "image/png", **self._put_kw)
        return self.write_record(
            ExecutionRecord(
                execution_key=key,
                key=image_key,
                sha256=sha,
                generator_id=generator_id,
                seconds=seconds,
                width=width,
                height=height,
                manifest=manifest,
                program=program,
            )
        )

    def write_record(self, rec: ExecutionRecord) -> ExecutionRecord:
        """Write ``rec`` at its execution's record key (its image must already be stored at
        ``rec.key``); returns it."""
        self.store.put(
            self.record_key(rec.execution_key),
            canonical_json(rec.model_dump(mode="json", exclude_none=True)),
            "application/json",
            **self._put_kw,
        )
        return rec
