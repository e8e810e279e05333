"""Keyed random numbers for the embedded world's simulator (common random numbers): every
draw of ``evoharness.sim.generator`` is fixed by (profile name, seed, failure mode, key) alone,
so two programs that differ in one part draw the same numbers for everything else.

Imports only numpy and the standard library (the simulator also runs in a numpy<2 venv).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


class Draws:
    """Keyed random numbers (common random numbers across programs).

    ``Draws(profile, seed)``; ``u(mode, *key)`` is a uniform in [0, 1) and
    ``rng(mode, *key)`` a ``numpy.random.Generator``, both fixed by (profile name, seed, mode,
    key) alone — blake2b over those, so a draw never depends on the rest of the program.

    The key holds the profile's *name*, not the generator id (which carries a digest of every
    parameter): changing one rate of a profile changes only the outcomes whose draw crosses
    the moved threshold, so calibration converges instead of re-drawing all noise. Caching is
    unaffected — execution keys hold the generator id, so a changed profile never reuses an
    old execution.
    """

    def __init__(self, profile: str, seed: int) -> None:
        self._base = hashlib.sha256(f"sim/{profile}|{seed}".encode()).digest()

    def _h(self, parts: tuple[Any, ...]) -> int:
        h = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8, key=self._base[:32])
        return int.from_bytes(h.digest(), "little")

    def u(self, *key: Any) -> float:
        """A uniform draw in [0, 1) keyed by ``key`` (mode first)."""
        return (self._h(key) >> 11) / float(1 << 53)

    def rng(self, *key: Any) -> np.random.Generator:
        """A numpy generator keyed by ``key`` (for a sequence of draws: placement, pixels)."""
        return np.random.default_rng(self._h(key))
