"""The evoharness application: the composition root outside the domain core.

``evoharness_app`` wires the layers together: the ``evoharness`` command (``cli.py`` and one
module per area in ``commands/``), the main job (``main_job.py``: local stack, registry, S3,
evaluation, HTML report) and the report of a run started by hand (``run_report.py``). It may
import every layer (``evoharness``, ``services``, ``workflows``, ``harness_registry``); no layer
imports it (contracts in ``.importlinter``; map in ``docs/architecture.md``, "Layout").
"""
