"""Exports of a finished run for other tools: benchmark layouts (``benchmarks``) and
training pairs (``trajectories``), read through ``run``."""
