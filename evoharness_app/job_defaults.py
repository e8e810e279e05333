"""The main job's own defaults (``evoharness evolve main``, ``make evolve``), read by the
command's options and by ``evoharness_app.main_job.MainJobOptions`` alike. Kept apart from
``main_job`` so that the CLI reads them without importing the job. The run's other defaults
live with what they configure: seeds and rounds in ``evoharness.trace.models``
(``DEFAULT_SEEDS``, ``DEFAULT_MAX_ROUNDS``), the largest split sizes in
``evoharness.tasks.splits.DEFAULT_SIZES``."""

from __future__ import annotations

from typing import Final

#: Split sizes (target, held-out, preservation, test): the 5:1:1:1 proportion of
#: ``DEFAULT_SIZES`` at a size one CPU runs in minutes.
MAIN_JOB_SIZES: Final[tuple[int, ...]] = (60, 20, 20, 20)
#: Synthetic tasks added to the GenEval prompts (``evoharness.tasks.synthetic``).
MAIN_JOB_SYNTHETIC: Final = 150
#: Transfer tasks (half T2I-CompBench training prompts, half PartiPrompts) evaluated before
#: and after, never evolved on (``evoharness_app.transfer``; 0: none).
MAIN_JOB_TRANSFER: Final = 60

__all__ = ["MAIN_JOB_SIZES", "MAIN_JOB_SYNTHETIC", "MAIN_JOB_TRANSFER"]
