"""``SimParams``: every number of the simulator's behavioural model, in one frozen model.

The harness cannot change these: they are part of the generator's *deployment* (a profile,
``evoharness.sim.profiles``), and ``generator_id`` = ``sim/<profile>@<sha256(params)[:12]>``
carries a hash of all of them, so any change gives a new id and old cached executions are not
reused. See ``evoharness.sim.generator`` for how each number is used. Rates are probabilities
per object (or per relation, per character, per layout box), before the adherence multiplier.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from evoharness.canonical import canonical_json, sha256_hex
from evoharness.capabilities import GeneratorCapabilities

#: A probability (0..1); a profile value outside fails at load naming file and field.
Prob = Annotated[float, Field(ge=0.0, le=1.0)]
#: A non-negative number (a rate multiplier, a slope, seconds).
NonNeg = Annotated[float, Field(ge=0.0)]


#: The simulator's behaviour version, part of every generator id (``SimParams.digest``). Bump it
#: in the commit that changes what the simulator draws for unchanged parameters. 2: draws keyed
#: by profile and seed (2026-12-02); 447 drawable classes (2026-12-02). 3: every lever a harness
#: fault can move has an effect (issue 29, 2026-12-05): guidance collapse below
#: ``guidance_floor``, small objects lost and blur below ``steps_min``, the adherence multiplier
#: on layout boxes, palette / style words, layout guidance bound to the prompt's tokens.
#: 4: reference-conditioned generation (issue 32, 2026-12-07): an object bound to a reference
#: ("the mug from image 1") is drawn from the reference's subject, read from its pixels, with
#: omission, duplication, a pasted look and unmentioned references mostly ignored.
WORLD_VERSION = 4


class SimParams(BaseModel):
    """The frozen behavioural model of one simulated generator (one profile).

    Identity: ``profile`` (name, e.g. ``sdxl-like``), ``version`` of the behaviour code,
    ``capabilities`` (what conditioning the deployment honours; ``GeneratorCapabilities``).

    Prompt reading: ``capabilities.max_prompt_tokens`` tokens incl. start/end (so two fewer
    content tokens) are read (77 for CLIP, 512 for T5).

    Failure rates (each multiplied by the adherence multiplier ``f >= 1``, see below):

    - ``miss_base + miss_per_object * (k - 1)`` (cap ``miss_cap``): an object phrase is not
      drawn, with ``k`` distinct objects read from the prompt.
    - ``count_correct[n]``: probability that an exact count ``n`` is drawn right (n >= 2;
      ``count_correct[-1]`` for larger n); ``digit_penalty`` is subtracted for digits; otherwise
      off by ±1 (±2 with probability ``count_far`` when n >= 5).
    - ``leak_per_object * (m - 1)`` (cap ``leak_cap``): with ``m >= 2`` coloured objects in one
      clause, each takes another's colour; across clauses ×``leak_cross_factor``.
    - ``color_drift``: a single coloured object is drawn in another colour.
    - ``attr_drop_per_token`` per content token beyond ``attr_drop_start`` (cap
      ``attr_drop_cap``): a colour attribute of a long prompt is dropped (natural colour).
    - ``relation_honoured``: a spatial relation is placed on purpose; otherwise, with
      probability ``composition_default``, the pair is drawn in the model's default composition
      (``composition_swap`` of those swapped, the rest stacked on the other axis so that no
      relation holds), and placed at random otherwise (GenEval's rule then holds ≈ 0.3).
    - ``negation_draws``: "no X" / "without X" in the prompt draws X anyway. A class named in
      ``negative_prompt`` is drawn with its probability ×``negative_keep`` (every phrase of
      that class, asked for or not: a negative prompt is global).
    - ``char_base + char_per_char * len`` (cap ``char_cap``): each character of quoted text is
      corrupted; ×``unquoted_factor`` for unquoted text after "saying" / "that says";
      ×(1 + ``text_guidance_gain`` per guidance unit above ``guidance_best``).

    Layout (only when ``capabilities.layout`` is not ``none``): a box's object lands in its box
    with probability ``layout_in_box - layout_in_box_per_box * (n - 1)`` for ``n`` boxes, less
    ``layout_small_penalty`` when the box covers under ``layout_small_box`` of the image; an
    object that misses its box is not drawn (``layout_miss_share`` of misses) or drawn at a
    random place. Its colour holds with probability ``layout_color_holds`` (else another box's
    colour or the picture's own). Two boxes with IoU above ``layout_overlap_iou`` merge: one is
    dropped with probability ``layout_merge``. Layout text is corrupted at the prompt-text rate
    ×``layout_text_factor``. Layout objects look pasted: scaled nearest-neighbour to
    ``layout_paste_scale`` of the box (scale mismatch, hard aliased seams) and without the
    image's grain (``layout_paste_flatness`` of the noise removed inside the object).

    Adherence multiplier ``f``: ``1 + guidance_low * (1 - g / guidance_best)`` for
    ``g < guidance_best``, 1 up to ``guidance_saturate``, then ``+ guidance_high * (g -
    guidance_saturate)``; plus ``guidance_collapse * (1 - g / guidance_floor)`` below
    ``guidance_floor`` (classifier-free guidance near 1 is close to the unguided model: Ho &
    Salimans 2022, Fig. 1 and Table 1, precision and prompt alignment fall steeply as w → 0;
    FLUX.1-dev's model card recommends 3.5, SD's diffusers default is 7.5); plus ``steps_low *
    (steps_min - steps)`` below ``steps_min``. Above ``guidance_best`` chroma rises by
    ``saturation_gain`` per guidance unit (over-saturation, Saharia et al. 2022 "Imagen" §2.3,
    Lin et al. 2024 "Common diffusion noise schedules…" §3.4); noise σ is ``noise_sigma``
    (+``noise_per_step`` per missing step below ``steps_min``, +``noise_per_guidance`` per unit
    above ``guidance_saturate``). Layout boxes take ``layout_adherence`` (the guidance-collapse
    and too-few-steps terms only, so 1 at every guidance above ``guidance_floor``): a box
    lands outside its box w.p. ``(1 - p_in) · f_layout``: layout guidance and adapters act
    through the same guided denoising steps.

    Too few steps (below ``steps_min``; large-scale structure is denoised first and fine
    detail last, Ho et al. 2020 §4.4 "progressive generation"; DDIM / DPM-Solver sample
    quality falls steeply below ~20 steps, Song et al. 2021 Table 1, Lu et al. 2022 Fig. 4):
    an object drawn smaller than ``steps_small_frac`` of the image side is lost w.p.
    ``steps_small_miss`` per missing step (cap 0.9), and the image is blurred with a Gaussian
    of ``steps_blur`` px per missing step (at 512 px).

    Palette / style words (``evoharness.sim.reader.palette_of``: "black and white",
    "monochrome", "sepia", "shades of blue", "in red tones", …, anywhere in the read part of
    the prompt, e.g. from a template): each drawn object, prompt or layout, takes a palette
    colour instead of its own w.p. ``palette_override · f`` (cap 0.95): a global style
    competes with per-object colour words in the text encoder (the style prompt steers the
    whole image; colour leakage, Feng et al. 2023 "StructureDiffusion", Chefer et al. 2023
    "Attend-and-Excite").

    Layout bound to tokens: with ``capabilities.layout == "guidance"`` (training-free layout
    guidance steers the cross-attention maps of the prompt's own object tokens: BoxDiff, Xie et
    al. 2023; Chen et al. 2024 "Training-free layout control with cross-attention guidance"),
    a box whose label is not among the objects read from the prompt (never named, or past the
    token limit) is not drawn w.p. ``layout_needs_token``. GLIGEN-class adapters carry their
    own grounding tokens (``sd15-like``: 0).

    Cost (``evoharness.sim.cost``): ``cost_seconds_per_step`` GPU seconds per denoising step at
    ``cost_native_side``² pixels, ``cost_fixed_seconds`` per image (text encoder + VAE),
    ``cost_layout_factor`` × the step time with layout conditioning, ``cost_reference_seconds``
    per reference image.

    References (issue 32; ``evoharness.sim.planning.plan_references``): an object phrase the
    prompt binds to reference *i* ("the mug from image 1", "image 2's cat", "the car
    (reference 3)"; ``evoharness.sim.reader``) is drawn as the reference's subject — class,
    colour and texture read from the reference's pixels (``evoharness.sim.subject``), not
    the phrase's glyph — with the failure modes multi-reference benchmarks report
    (MultiBanana, Oshima et al. 2025: success falls as references are added; subjects
    dropped, duplicated or copy-pasted; AutoRef, 2025: unreferenced or weakly referenced
    subjects ignored). The rates are **assumptions** shaped after those reports, not fitted
    to a published table:

    - ``ref_omit_base + ref_omit_per_ref · (n − 1)`` (cap ``ref_omit_cap``), ×f: a bound
      reference's subject is not drawn at all, with ``n`` references in the program;
    - ``ref_duplicate``: the subject is drawn twice; else ``ref_glyph_beside``: the phrase's
      own glyph (its class, colour and texture as written) is drawn beside the subject;
    - ``ref_pasted``: the subject is copy-pasted — hard aliased edges and without the
      image's grain (``layout_paste_flatness`` of the noise removed), so the quality score
      (``evoharness.sim.quality``) sees seams;
    - ``ref_unmentioned_ignored``: a reference no phrase binds is not drawn at all; else its
      subject is drawn as a bound one is (with the same omission, duplication and pasting).

    A reference whose pixels show no subject the world knows is pasted whole, as a white
    card (the world before issue 32). Every reference draw has its own key (``ref_*``), so
    programs without references draw nothing new.

    Placement: objects get boxes of ``min_object_frac``..``max_object_frac`` of the image side,
    at least ``gap_px`` apart.

    Construct from keywords (``SimParams(miss_base=0.5)``; defaults are a generic model) or load
    a profile with ``evoharness.sim.profiles.load_profile``. Raises
    ``pydantic.ValidationError`` naming the field for an unknown field or a value out of range.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(default="custom", pattern=r"^[a-z0-9][a-z0-9._-]*$")
    version: str = "behavioural-v2"
    capabilities: GeneratorCapabilities = Field(
        default_factory=lambda: GeneratorCapabilities(
            layout="adapter", layout_attributes=("color", "text")
        )
    )
    # presence
    miss_base: Prob = 0.03
    miss_per_object: Prob = 0.12
    miss_cap: Prob = 0.5
    # counting
    count_correct: tuple[Prob, ...] = Field(
        default=(1.0, 1.0, 0.80, 0.65, 0.50, 0.44, 0.38, 0.34, 0.30), min_length=3
    )
    digit_penalty: Prob = 0.15
    count_far: Prob = 0.3
    # colour
    leak_per_object: Prob = 0.25
    leak_cap: Prob = 0.6
    leak_cross_factor: Prob = 0.3
    color_drift: Prob = 0.12
    attr_drop_start: int = Field(default=40, ge=0)
    attr_drop_per_token: Prob = 0.01
    attr_drop_cap: Prob = 0.5
    # position
    relation_honoured: Prob = 0.25
    composition_default: Prob = 0.0
    composition_swap: Prob = 0.5
    # negation
    negation_draws: Prob = 0.7
    negative_keep: Prob = 0.15
    # text
    char_base: Prob = 0.02
    char_per_char: Prob = 0.01
    char_cap: Prob = 0.4
    unquoted_factor: NonNeg = 2.0
    text_guidance_gain: NonNeg = 0.15
    # guidance / steps
    guidance_best: float = Field(default=7.5, gt=0.0)
    guidance_saturate: float = Field(default=10.0, gt=0.0)
    guidance_low: NonNeg = 0.6
    guidance_high: NonNeg = 0.06
    guidance_floor: NonNeg = 0.0
    guidance_collapse: NonNeg = 0.0
    steps_min: int = Field(default=20, ge=1)
    steps_low: NonNeg = 0.03
    steps_small_frac: Prob = 0.0
    steps_small_miss: Prob = 0.0
    steps_blur: NonNeg = 0.0
    palette_override: Prob = 0.0
    saturation_gain: NonNeg = 0.08
    noise_sigma: NonNeg = 3.0
    noise_per_step: NonNeg = 0.4
    noise_per_guidance: NonNeg = 1.0
    # layout
    layout_in_box: Prob = 0.9
    layout_in_box_per_box: Prob = 0.04
    layout_small_box: Prob = 0.02
    layout_small_penalty: Prob = 0.15
    layout_miss_share: Prob = 0.5
    layout_color_holds: Prob = 0.7
    layout_overlap_iou: Prob = 0.3
    layout_merge: Prob = 0.5
    layout_text_factor: NonNeg = 0.5
    layout_paste_flatness: Prob = 0.6
    layout_paste_scale: Prob = 0.85
    layout_needs_token: Prob = 0.0
    # references (issue 32; assumptions, see the class doc)
    ref_omit_base: Prob = 0.04
    ref_omit_per_ref: Prob = 0.06
    ref_omit_cap: Prob = 0.5
    ref_duplicate: Prob = 0.05
    ref_glyph_beside: Prob = 0.08
    ref_pasted: Prob = 0.15
    ref_unmentioned_ignored: Prob = 0.8
    # cost
    cost_seconds_per_step: NonNeg = 0.05
    cost_native_side: int = Field(default=512, ge=64)
    cost_fixed_seconds: NonNeg = 0.2
    cost_layout_factor: NonNeg = 1.0
    cost_reference_seconds: NonNeg = 0.1
    # placement
    min_object_frac: Prob = 0.12
    max_object_frac: Prob = 0.30
    gap_px: int = Field(default=8, ge=0)

    def adherence(self, guidance_scale: float, steps: int) -> float:
        """The failure-rate multiplier f >= 1 for these generation parameters (see class doc)."""
        g = float(guidance_scale)
        f = 1.0
        if g < self.guidance_best:
            f += self.guidance_low * (1.0 - g / self.guidance_best)
        if g < self.guidance_floor:
            f += self.guidance_collapse * (1.0 - g / self.guidance_floor)
        elif g > self.guidance_saturate:
            f += self.guidance_high * (g - self.guidance_saturate)
        if steps < self.steps_min:
            f += self.steps_low * (self.steps_min - steps)
        return f

    def layout_adherence(self, guidance_scale: float, steps: int) -> float:
        """The failure-rate multiplier (>= 1) of layout boxes: ``1 + guidance_collapse · (1 −
        g / guidance_floor)`` below ``guidance_floor``, plus ``steps_low · (steps_min − steps)``
        below ``steps_min``; exactly 1 otherwise (so layouts keep their calibrated rates at
        every usual guidance, e.g. the baseline's 5.0)."""
        g = float(guidance_scale)
        f = 1.0
        if g < self.guidance_floor:
            f += self.guidance_collapse * (1.0 - g / self.guidance_floor)
        if steps < self.steps_min:
            f += self.steps_low * (self.steps_min - steps)
        return f

    def digest(self) -> str:
        """First 12 hex chars of sha256 over the canonical JSON of all fields and
        ``WORLD_VERSION``, so a change of the simulator's code that alters images for the same
        parameters also changes the generator id (and no cached execution is reused)."""
        doc = {"world_version": WORLD_VERSION, **self.model_dump(mode="json")}
        return sha256_hex(canonical_json(doc))[:12]

    @property
    def generator_id(self) -> str:
        """``"sim/<profile>@<12 hex of sha256(params)>"``."""
        return f"sim/{self.profile}@{self.digest()}"
