"""Official scoring: images scored by the exact inspector with GenEval's rules.

One place for what "official" means, used by the main job (``evoharness_app.evaluation``: the
before/after images of a run, scored again beside the internal verifier) and by
``evoharness eval geneval`` (``evoharness_app.commands.sim``: a folder of images).

- ``exact_inspector``: the scorer, the simulator's pixel-level inspector
  (``evoharness.sim.SimInspector``), which applies GenEval's rules to the embedded world's
  images; built without changing the caller's environment.
- ``verify_images``: every image of a batch scored against its task's constraints, in a
  thread pool, each failure named by its key.
- ``OFFICIAL_RULES``: the words the report and the summary put after the scorer's id.

Per-tag and overall accuracy from the evidence are ``evoharness.tasks.geneval_score``'s.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from evoharness.tasks.models import Task

#: What follows the official scorer's id in the report and the summary.
OFFICIAL_RULES = "(exact, GenEval rules)"

K = TypeVar("K", bound=Hashable)


def exact_inspector() -> Any:
    """A ``SimInspector`` (the official scorer) built without changing ``os.environ``:
    importing OpenCV sets ``LD_LIBRARY_PATH`` and Qt variables, and the inspector sets
    default BLAS thread counts; the main job must leave its caller's environment alone."""
    before = dict(os.environ)
    try:
        from evoharness.sim import SimInspector

        return SimInspector()
    finally:
        for k in set(os.environ) - set(before):
            del os.environ[k]
        os.environ.update(before)


def verify_images(
    scorer: Any,
    work: Mapping[K, tuple[Callable[[], bytes], Task]],
    *,
    concurrency: int = 1,
    progress: Callable[[int], None] = lambda k: None,
) -> dict[K, list[Any]]:
    """Score each image of ``work`` (key → (a function returning the PNG bytes, its task))
    with ``scorer.verify(image, task.constraints, task.prompt)`` on ``concurrency`` threads;
    ``progress(1)`` after each. Returns key → the evidence list, one per constraint of the
    task. Raises ``ValueError("<key>: <error>")`` when an image cannot be read or scored
    (the first such key, as completed)."""
    if concurrency < 1:
        raise ValueError(f"verify_images: concurrency must be at least 1, got {concurrency}")

    def one(key: K) -> list[Any]:
        read, task = work[key]
        try:
            return list(scorer.verify(read(), task.constraints, task.prompt))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from exc

    out: dict[K, list[Any]] = {}
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futs = {pool.submit(one, key): key for key in work}
        for fut in concurrent.futures.as_completed(futs):
            out[futs[fut]] = fut.result()
            progress(1)
    return out
