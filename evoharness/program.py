"""The program: what a harness compiles a prompt into, i.e. the generator's whole input.

Shape (docs/architecture.md, vocabulary "program")::

    {prompt, negative_prompt, params: {steps, guidance_scale, width, height}, seed,
     layout?: [{label, box [x0, y0, x1, y1] in 0..1, color?, text?, attributes?}],
     references?: [image ref]}

Programs are hashed into execution keys (``execution_key``), so their canonical JSON form is
part of the cache contract: sha256(canonical(program) + generator id + seed).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from evoharness.canonical import canonical_json
from evoharness.vocab import SHAPES, TEXTURES

#: Declared bounds for generation parameters (inclusive). A harness may set parameters only
#: inside these; the generator deployment may narrow them further.
PARAM_BOUNDS: dict[str, tuple[float, float]] = {
    "steps": (1, 150),
    "guidance_scale": (0.0, 30.0),
    "width": (64, 2048),
    "height": (64, 2048),
}


#: Largest seed: programs are hashed as RFC 8785 JSON, whose numbers are IEEE 754 doubles, so
#: integers are exact only up to 2**53 - 1.
MAX_SEED = 2**53 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class GenerationParams(_Strict):
    """Generation parameters the harness may set, each inside ``PARAM_BOUNDS``.

    ``width`` and ``height`` are pixels and must be multiples of 8 (latent-diffusion VAEs
    downsample by 8). ``guidance_scale`` is classifier-free guidance scale (Ho & Salimans 2022).
    """

    steps: int = 30
    guidance_scale: float = 5.0
    width: int = 512
    height: int = 512

    @model_validator(mode="after")
    def _within_bounds(self) -> GenerationParams:
        for name, (lo, hi) in PARAM_BOUNDS.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"params.{name}={v} is outside the declared bounds [{lo}, {hi}]")
        for name in ("width", "height"):
            if getattr(self, name) % 8:
                raise ValueError(f"params.{name}={getattr(self, name)} must be a multiple of 8")
        return self


class LayoutItem(_Strict):
    """One box of a layout: ``box`` is ``[x0, y0, x1, y1]`` as fractions of the image (0..1),
    with ``x0 < x1`` and ``y0 < y1``; ``label`` is an object class; ``color`` and ``text`` optional.

    ``attributes``: the box's other adjectives, canonical names of textures/materials
    (``vocab.TEXTURES``, e.g. ``"wooden"``) and shapes (``vocab.SHAPES``, e.g. ``"round"``), in
    order; a layout-to-image model grounds each box with a phrase such as "a wooden chair"
    (GLIGEN, Li et al. 2023; InstanceDiffusion; MIGC), so the attribute travels with the box
    (``phrase``). Empty attributes are left out of the serialised form, so the canonical JSON and
    execution key of a program without attributes are what they were before the field existed.
    Raises ``ValueError`` naming the value and the allowed names for any other value.
    """

    label: str = Field(min_length=1)
    box: tuple[float, float, float, float]
    color: str | None = None
    text: str | None = None
    attributes: tuple[str, ...] = ()

    @field_validator("box")
    @classmethod
    def _box_in_unit_square(cls, box: tuple[float, float, float, float]) -> tuple[float, ...]:
        x0, y0, x1, y1 = box
        if not all(0.0 <= v <= 1.0 for v in box):
            raise ValueError(f"layout box {list(box)} has a coordinate outside 0..1")
        if not (x0 < x1 and y0 < y1):
            raise ValueError(f"layout box {list(box)} must satisfy x0 < x1 and y0 < y1")
        return box

    @field_validator("attributes")
    @classmethod
    def _known_attributes(cls, attributes: tuple[str, ...]) -> tuple[str, ...]:
        for a in attributes:
            if a not in TEXTURES and a not in SHAPES:
                raise ValueError(
                    f"layout attribute {a!r} is neither a texture/material {sorted(TEXTURES)} "
                    f"nor a shape {sorted(SHAPES)} (canonical names, evoharness.vocab)"
                )
        return attributes

    @model_serializer(mode="wrap")
    def _omit_empty_attributes(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        d: dict[str, Any] = handler(self)
        if not self.attributes:
            d.pop("attributes", None)
        return d

    @property
    def textures(self) -> tuple[str, ...]:
        """The attributes that are textures/materials (``vocab.TEXTURES``), in order."""
        return tuple(a for a in self.attributes if a in TEXTURES)

    @property
    def shapes(self) -> tuple[str, ...]:
        """The attributes that are shapes (``vocab.SHAPES``), in order."""
        return tuple(a for a in self.attributes if a in SHAPES)

    def phrase(self) -> str:
        """The box's grounding phrase for a layout-to-image model: shapes, colour, materials,
        then the label (English adjective order), e.g. ``"round red wooden table"``; the bare
        label without attributes or colour."""
        return " ".join(
            [*self.shapes, *([self.color] if self.color else []), *self.textures, self.label]
        )


class ImageRef(_Strict):
    """A reference to an image in the artifact store: S3 ``bucket``/``key`` and its ``sha256``."""

    bucket: str = ""
    key: str
    sha256: str = ""


class Program(_Strict):
    """The generator's whole input. ``seed`` is the generator's RNG seed, 0..``MAX_SEED``."""

    prompt: str
    negative_prompt: str = ""
    params: GenerationParams = Field(default_factory=GenerationParams)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    layout: list[LayoutItem] | None = None
    references: list[ImageRef] | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("prompt is empty")
        return v

    def canonical(self) -> bytes:
        """Canonical JSON bytes (RFC 8785) of the program, ``None`` fields omitted."""
        return canonical_json(self.model_dump(mode="json", exclude_none=True))


def execution_key(
    program: Program | dict[str, Any], generator_id: str, seed: int | None = None
) -> str:
    """Content address of one execution: ``sha256(canonical(program) | generator_id | seed)``.

    ``seed`` defaults to ``program.seed``. Returns 64 lowercase hex characters. An execution
    whose key already exists in storage is never generated again (docs/architecture.md).
    """
    prog = program if isinstance(program, Program) else Program.model_validate(program)
    s = prog.seed if seed is None else seed
    h = hashlib.sha256()
    h.update(prog.canonical())
    h.update(b"\x00")
    h.update(generator_id.encode("utf-8"))
    h.update(b"\x00")
    h.update(str(int(s)).encode("ascii"))
    return h.hexdigest()
