"""A liveness heartbeat for long synchronous activities (``heartbeating``)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import activity


@contextmanager
def heartbeating(details: Callable[[], Any]) -> Iterator[None]:
    """Heartbeat ``details()`` from a background thread every third of the activity's heartbeat
    timeout while the body runs; a no-op when the activity has no heartbeat timeout.

    The heartbeat timeout says how soon a *dead* worker's activity is retried. Heartbeating only
    after each finished execution made a slow execution on a loaded machine (or the first
    set-up of a worker's backends) read as a dead worker, and the attempt was cancelled and
    retried. The thread lives in the worker process, so a killed worker still stops
    heartbeating and is retried after the timeout (the liveness ticker of Temporal's
    long-running-activity samples). Temporal's SDK throttles heartbeats to 80% of the timeout.
    """
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = max(0.05, timeout.total_seconds() / 3)
    stop = threading.Event()
    ctx = contextvars.copy_context()  # the activity context, for activity.heartbeat

    def tick() -> None:
        while not stop.wait(interval):
            ctx.run(activity.heartbeat, details())

    thread = threading.Thread(target=tick, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
