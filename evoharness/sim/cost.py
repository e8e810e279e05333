"""Deterministic cost model of the embedded world: generator-seconds per image.

The simulator paints a picture in milliseconds of CPU; what a harness's choices would cost on
the real model it stands for is modelled instead, so Δcost in the gates is a property of the
program (never of machine load) and two identical runs make identical decisions::

    seconds = cost_fixed_seconds
            + steps * cost_seconds_per_step * (width * height / cost_native_side**2)
                    * (cost_layout_factor if the program carries layout boxes else 1)
            + cost_reference_seconds * len(references)

Best-of-N costs N× (N programs), a repair costs per attempt, and more steps cost linearly.

Sources of the profile numbers (``evoharness/sim/profiles/*.yaml``, "cost" group): per-image
GPU seconds of fp16 inference on an A100-class GPU as commonly reported for the diffusers
pipelines — SD 1.5 at 512², 50 steps ≈ 2.5 s; SDXL base at 1024², 50 steps ≈ 6.5 s; FLUX.1-dev
at 1024², 28 steps ≈ 15 s — and for layout-to-image on SD 1.5 ≈ 7.3 s per image for
GLIGEN/MIGC-class adapters (the MIGC paper's inference-time comparison, the figure the
embedded-world issue cites beside the base model's), i.e. ≈ 3× the base model's step time;
training-free layout guidance (BoxDiff class) back-propagates through the attention maps at
every step, ≈ 2.5× on SDXL. These are order-of-magnitude figures from published tables, not
measurements on this machine; they fix *relative* costs, which is what the gates compare.
"""

from __future__ import annotations

from evoharness.program import Program
from evoharness.sim.params import SimParams


def generator_seconds(params: SimParams, program: Program) -> float:
    """Modelled GPU seconds for one generation of ``program`` under profile ``params``.

    Inputs: ``program.params.steps`` (denoising steps), ``width``/``height`` (pixels),
    ``program.layout`` (layout conditioning on/off), ``program.references`` (count). Returns
    seconds (float > 0), rounded to microseconds so the value is exact in canonical JSON.
    Deterministic: the same profile and program always cost the same.
    """
    pp = program.params
    pixels = (pp.width * pp.height) / float(params.cost_native_side**2)
    step = params.cost_seconds_per_step * pixels
    if program.layout:
        step *= params.cost_layout_factor
    seconds = (
        params.cost_fixed_seconds
        + pp.steps * step
        + params.cost_reference_seconds * len(program.references or [])
    )
    return round(max(seconds, 1e-6), 6)
