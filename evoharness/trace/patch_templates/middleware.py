"""Middleware templates: verify-and-repair (re-generate with the failing evidence and a new
seed) and best-of-N with a verifier (Karthik et al. 2023), added or widened.
"""

from __future__ import annotations

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    _add,
    _patch,
    _replace,
    _stage,
)


def _mw_repair(h: Harness, c: FailureCluster) -> list[Patch]:
    found = _stage(h, "verify_and_repair")
    why = (
        "failures that differ between samples are caught by checking the image and "
        "re-generating with the failing evidence and a new seed"
    )
    if found is None:
        return [
            _patch(
                "middleware",
                [_add("/middleware/stages/-", {"kind": "verify_and_repair", "repair_budget": 2})],
                why,
                "failures that flip with the seed are repaired",
            )
        ]
    i, s = found
    if s.repair_budget >= 4:
        return []
    return [
        _patch(
            "middleware",
            [_replace(f"/middleware/stages/{i}/repair_budget", min(8, s.repair_budget + 2))],
            why + "; the current budget is spent",
            "more failing executions repaired",
        )
    ]


def _mw_best_of_n(h: Harness, c: FailureCluster) -> list[Patch]:
    found = _stage(h, "best_of_n")
    why = (
        "samples differ in which objects they miss; generating several and keeping the one "
        "the verifier scores best reduces random misses"
    )
    if found is None:
        return [
            _patch(
                "middleware",
                [_add("/middleware/stages/-", {"kind": "best_of_n", "n": 2})],
                why,
                "random misses drop, at n× generator-seconds",
            )
        ]
    i, s = found
    if s.n >= 4:
        return []
    return [
        _patch(
            "middleware",
            [_replace(f"/middleware/stages/{i}/n", s.n + 1)],
            why,
            "random misses drop further",
        )
    ]
