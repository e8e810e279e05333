"""The ``synthetic`` dataset: ``evoharness.tasks.synthetic.build_synthetic`` loaded on demand."""

from __future__ import annotations

import importlib

from evoharness.tasks.builders.rows import BuildError
from evoharness.tasks.models import Task


def load_synthetic(seed: int, count: int) -> list[Task]:
    """``count`` synthetic tasks from ``seed`` (``evoharness.tasks.synthetic``); ``BuildError``
    when that module or its ``build_synthetic`` is missing."""
    try:
        mod = importlib.import_module("evoharness.tasks.synthetic")
    except ModuleNotFoundError as exc:
        if exc.name == "evoharness.tasks.synthetic":
            raise BuildError(
                "dataset 'synthetic' needs evoharness.tasks.synthetic.build_synthetic, "
                "which is not installed in this checkout"
            ) from None
        raise
    fn = getattr(mod, "build_synthetic", None)
    if fn is None:
        raise BuildError("evoharness.tasks.synthetic has no build_synthetic(seed, count)")
    return list(fn(seed=seed, count=count))


__all__ = ["load_synthetic"]
