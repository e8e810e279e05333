"""Temporal workflows of TRACE evolution: ``EvolutionWorkflow``, ``RoundWorkflow``, their
activities, the worker (``python -m workflows.worker``) and client helpers."""
