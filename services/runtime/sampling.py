"""Sampling served Render requests into the artifact store (issue 34), off the request path.

``TrafficSampler.offer`` runs in the Render handler: it draws whether this request is sampled
(opt-in channels only, probability ``rate``), applies the prompt filter, builds the record and
appends it to a bounded buffer without waiting or waking anyone — a full buffer drops the
record and counts it. One writer thread takes the buffer every ``flush_seconds``, writes it in
JSON Lines batches of at most ``batch_size`` (``evoharness.traffic.records`` layout), and keeps a window of each channel's
last ``drift_window`` records from which it sets the drift and failure-rate gauges against the
channel's reference profile (``<prefix>/<channel>/reference.json``, re-read every
``reference_ttl_seconds``; no reference, no drift gauge). A store that fails drops that batch,
counted as ``store_error`` and logged; a Render never waits on or fails because of sampling.

Metrics: ``evoharness_traffic_sampled_total{channel}``, ``evoharness_traffic_stored_total{channel}``,
``evoharness_traffic_dropped_total{channel, reason}`` (``too_long``, ``redacted``,
``queue_full``, ``store_error``), ``evoharness_traffic_drift{channel, distribution}``
(Jensen–Shannon distance, ``kinds`` / ``classes``), ``evoharness_traffic_failure_rate{channel,
feature}`` and ``evoharness_traffic_window_records{channel}``.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.traffic.drift import TrafficProfile, drift, failure_rates
from evoharness.traffic.records import (
    DEFAULT_REDACT_PATTERNS,
    PromptFilter,
    TrafficRecord,
    TrafficVerdict,
    batch_key,
    dump_batch,
    reference_key,
)
from services.common import metrics

log = logging.getLogger("evoharness.runtime.sampling")


class TrafficSection(BaseModel):
    """Traffic sampling (``runtime.traffic`` in ``configs/runtime.yaml``). Off unless a
    channel is listed in ``channels`` and ``rate`` > 0.

    ``rate``: share of the channels' Render requests sampled (0..1); ``seed``: seed of the
    sampling draw (None = OS entropy); ``prefix``: key prefix in the artifact store;
    ``max_prompt_chars`` and ``redact_patterns``: the prompt filter
    (``evoharness.traffic.records.PromptFilter``); ``queue_size``: records waiting for the
    writer before new ones are dropped; ``flush_seconds``: how often the writer takes them;
    ``batch_size``: most records per stored object; ``drift_window``: recent records per channel the gauges are computed over;
    ``reference_ttl_seconds``: how long a channel's reference profile is reused."""

    model_config = ConfigDict(extra="forbid")

    channels: list[str] = Field(default_factory=list)
    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int | None = None
    prefix: str = Field(default="traffic", pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*[A-Za-z0-9]$")
    max_prompt_chars: int = Field(default=1000, ge=1)
    redact_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_REDACT_PATTERNS))
    queue_size: int = Field(default=1000, ge=1)
    batch_size: int = Field(default=100, ge=1)
    flush_seconds: float = Field(default=5.0, gt=0)
    drift_window: int = Field(default=500, ge=10)
    reference_ttl_seconds: float = Field(default=60.0, ge=0)


@dataclass(frozen=True)
class _Pending:
    """A sampled request waiting for the writer (references only; ``record`` builds it)."""

    time: dt.datetime
    channel: str
    prompt: str
    registration_id: str
    harness_id: str
    result: Any

    def record(self) -> TrafficRecord:
        """The stored record: constraints, verdict per constraint, generations used."""
        r = self.result
        types = {c.constraint_id: c.type.value for c in r.constraints}
        return TrafficRecord(
            time=self.time,
            channel=self.channel,
            registration_id=self.registration_id,
            harness_id=self.harness_id,
            prompt=self.prompt,
            constraints=list(r.constraints),
            verdicts=[
                TrafficVerdict(
                    constraint_id=e.constraint_id,
                    type=types.get(e.constraint_id, "unknown"),
                    status=e.status.value,
                )
                for e in r.evidence
            ],
            generations=int(r.cost.generator_calls),
            generator_seconds=float(r.cost.generator_seconds),
        )


class TrafficSampler:
    """Samples Render requests into ``store`` (``put``, ``get``; module docstring). ``start``
    launches the writer thread; ``close`` writes what is queued and stops it."""

    def __init__(
        self,
        cfg: TrafficSection,
        store: Any,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.filter = PromptFilter(cfg.max_prompt_chars, cfg.redact_patterns)
        self._channels = set(cfg.channels)
        self._rng = random.Random(cfg.seed)
        self._rng_lock = threading.Lock()
        # a plain deque, not a queue.Queue: appending wakes no thread, so a Render never
        # hands the GIL to the writer (a woken thread waiting for the GIL makes the running
        # one yield within sys.getswitchinterval(), 5 ms: measured as +7 ms per Render)
        self._buffer: deque[_Pending] = deque()
        self._windows: dict[str, deque[TrafficRecord]] = {}
        self._references: dict[str, tuple[float, TrafficProfile | None]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._count_lock = threading.Lock()
        self._offered = 0  # records appended (under _count_lock)
        self._done = 0  # records written or dropped by the writer (writer thread only)
        self._progress = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """Whether any channel is sampled at all."""
        return bool(self._channels) and self.cfg.rate > 0 and self.store is not None

    def wants(self, channel: str) -> bool:
        """The sampling draw for one request on ``channel`` (False for channels not opted in)."""
        if not self.enabled or channel not in self._channels:
            return False
        with self._rng_lock:
            return self._rng.random() < self.cfg.rate

    def offer(
        self,
        channel: str,
        prompt: str,
        registration_id: str,
        harness_id: str,
        result: Any,
    ) -> bool:
        """Queue the record of one served request (``result``: the runtime's ``RunResult``) if
        the draw, the filter and the queue allow; never blocks. True when queued."""
        if not self.wants(channel):
            return False
        why = self.filter.reason(prompt)
        if why is not None:
            metrics.TRAFFIC_DROPPED.labels(channel, why).inc()
            return False
        if len(self._buffer) >= self.cfg.queue_size:  # the writer is behind: drop, never wait
            metrics.TRAFFIC_DROPPED.labels(channel, "queue_full").inc()
            return False
        # the record is built by the writer: the request path only keeps references
        pending = _Pending(self.clock(), channel, prompt, registration_id, harness_id, result)
        with self._count_lock:
            self._buffer.append(pending)
            self._offered += 1
        metrics.TRAFFIC_SAMPLED.labels(channel).inc()
        return True

    # ------------------------------------------------------------------- writer thread
    def start(self) -> None:
        """Start the writer thread (no-op when sampling is off or already started)."""
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="traffic-writer", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is buffered, then stop the writer (waits up to ``timeout`` seconds)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def flush(self, timeout: float = 10.0) -> bool:
        """Have the writer write everything offered so far now, and wait for it; True when
        done within ``timeout`` seconds."""
        with self._count_lock:
            target = self._offered
        deadline = time.monotonic() + timeout
        self._wake.set()
        with self._progress:
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._progress.wait(left)
        return True

    def _run(self) -> None:
        """The writer: every ``flush_seconds`` (or when woken by ``flush``/``close``) take what
        is buffered and write it in batches of at most ``batch_size``."""
        while True:
            self._wake.wait(self.cfg.flush_seconds)
            self._wake.clear()
            stopping = self._stop.is_set()
            batch: list[TrafficRecord] = []
            while self._buffer:
                batch.append(self._buffer.popleft().record())
            for i in range(0, len(batch), self.cfg.batch_size):
                self._write(batch[i : i + self.cfg.batch_size])
            if stopping and not self._buffer:
                return

    def _write(self, batch: list[TrafficRecord]) -> None:
        by_channel: dict[tuple[str, str], list[TrafficRecord]] = {}
        for r in batch:
            by_channel.setdefault((r.channel, r.day), []).append(r)
        for (channel, _), records in by_channel.items():
            try:
                self.store.put(
                    batch_key(self.cfg.prefix, channel, records[0].time),
                    dump_batch(records),
                    "application/x-ndjson",
                )
                metrics.TRAFFIC_STORED.labels(channel).inc(len(records))
            except Exception as exc:  # noqa: BLE001 - a store error never reaches a Render
                metrics.TRAFFIC_DROPPED.labels(channel, "store_error").inc(len(records))
                log.warning(
                    "traffic batch of %d records for %s not stored: %s", len(records), channel, exc
                )
            window = self._windows.setdefault(channel, deque(maxlen=self.cfg.drift_window))
            window.extend(records)
            self._update_gauges(channel, window)
        with self._progress:
            self._done += len(batch)
            self._progress.notify_all()

    def reference(self, channel: str) -> TrafficProfile | None:
        """``channel``'s reference profile (cached for ``reference_ttl_seconds``); None when
        none is stored or it cannot be read (logged)."""
        now = time.monotonic()
        hit = self._references.get(channel)
        if hit is not None and now - hit[0] < self.cfg.reference_ttl_seconds:
            return hit[1]
        key = reference_key(self.cfg.prefix, channel)
        profile: TrafficProfile | None = None
        try:
            if self.store.exists(key):
                profile = TrafficProfile.model_validate_json(self.store.get(key))
        except Exception as exc:  # noqa: BLE001 - no reference: no drift gauge
            log.warning("reference profile %s unreadable: %s", key, exc)
        self._references[channel] = (now, profile)
        return profile

    def _update_gauges(self, channel: str, window: deque[TrafficRecord]) -> None:
        metrics.TRAFFIC_WINDOW.labels(channel).set(len(window))
        for feature, rate in failure_rates(window).items():
            metrics.TRAFFIC_FAILURE_RATE.labels(channel, feature).set(rate)
        ref = self.reference(channel)
        if ref is None:
            return
        recent = TrafficProfile.of_records(window)
        for name, d in drift(ref, recent).items():
            metrics.TRAFFIC_DRIFT.labels(channel, name).set(d)
