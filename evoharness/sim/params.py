"""``SimParams``: every number of the simulator's behavioural model, in one frozen dataclass.

The harness cannot change these (they are part of the generator's identity:
``generator_id`` carries a hash of them). See ``evoharness.sim.generator`` for how each is
used and ``/work/sim_contract.md`` ("behaviour contract") for the rationale. Rates are
probabilities per object (or per relation), before the adherence multiplier.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from evoharness.canonical import sha256_hex


@dataclass(frozen=True)
class SimParams:
    """The frozen behavioural model.

    Prompt reading: ``max_tokens`` CLIP-style tokens incl. start/end (so ``max_tokens - 2``
    content tokens) are read.

    Failure rates (each multiplied by the adherence multiplier ``f >= 1``, see below):

    - ``miss_base + miss_per_object * (k - 1)``: an object phrase is not drawn, with ``k``
      distinct objects read from the prompt (capped at ``miss_cap``).
    - ``count_correct[n]``: probability that an exact count ``n`` is drawn right (n >= 2;
      ``count_correct[-1]`` for larger n); ``digit_penalty`` is subtracted for digits ("3
      cats"); otherwise off by ±1 (±2 with probability ``count_far`` when n >= 5).
    - ``leak_per_object * (m - 1)`` (cap ``leak_cap``): with ``m >= 2`` coloured objects in one
      clause, each takes another's colour.
    - ``color_drift``: a single coloured object is drawn in its natural colour instead.
    - ``relation_honoured``: a spatial relation is placed on purpose; otherwise positions are
      random (GenEval's rule then holds by chance ≈ 0.3).
    - ``negation_draws``: "no X" / "without X" in the prompt draws X anyway.
    - ``char_base + char_per_char * len`` (cap ``char_cap``): each character of quoted text is
      corrupted; ×``unquoted_factor`` for unquoted text after "saying" / "that says".

    Adherence multiplier ``f``: ``1 + guidance_low * (1 - g / guidance_best)`` for
    ``g < guidance_best``, 1 up to ``guidance_saturate``, then ``+ guidance_high * (g -
    guidance_saturate)``; plus ``steps_low * (steps_min - steps)`` below ``steps_min``.
    Defaults (steps 30, guidance 5.0) give f = 1.2. Over-saturation above ``guidance_saturate``
    also raises chroma by ``saturation_gain`` per guidance unit; noise σ is ``noise_sigma``
    (+``noise_per_step`` per missing step below ``steps_min``, +``noise_per_guidance`` above
    ``guidance_saturate``).
    """

    version: str = "behavioural-v1"
    max_tokens: int = 77
    miss_base: float = 0.03
    miss_per_object: float = 0.12
    miss_cap: float = 0.5
    count_correct: tuple[float, ...] = (1.0, 1.0, 0.80, 0.65, 0.50, 0.44, 0.38, 0.34, 0.30)
    digit_penalty: float = 0.15
    count_far: float = 0.3
    leak_per_object: float = 0.25
    leak_cap: float = 0.6
    color_drift: float = 0.12
    relation_honoured: float = 0.25
    negation_draws: float = 0.7
    char_base: float = 0.02
    char_per_char: float = 0.01
    char_cap: float = 0.4
    unquoted_factor: float = 2.0
    guidance_best: float = 7.5
    guidance_saturate: float = 10.0
    guidance_low: float = 0.6
    guidance_high: float = 0.06
    steps_min: int = 20
    steps_low: float = 0.03
    saturation_gain: float = 0.08
    noise_sigma: float = 3.0
    noise_per_step: float = 0.4
    noise_per_guidance: float = 1.0
    min_object_frac: float = 0.12
    max_object_frac: float = 0.30
    gap_px: int = 8

    def adherence(self, guidance_scale: float, steps: int) -> float:
        """The failure-rate multiplier f >= 1 for these generation parameters (see class doc)."""
        g = float(guidance_scale)
        f = 1.0
        if g < self.guidance_best:
            f += self.guidance_low * (1.0 - g / self.guidance_best)
        elif g > self.guidance_saturate:
            f += self.guidance_high * (g - self.guidance_saturate)
        if steps < self.steps_min:
            f += self.steps_low * (self.steps_min - steps)
        return f

    def digest(self) -> str:
        """First 12 hex chars of sha256 over the canonical JSON of all fields."""
        return sha256_hex(json.dumps(dataclasses.asdict(self), sort_keys=True).encode("utf-8"))[:12]
