"""Task and Constraint models (docs/architecture.md vocabulary).

A task is one prompt with its checkable constraints::

    {task_id, prompt, task_family, constraints[], references{}, metadata{split, source, ...}}

A constraint is one checkable requirement::

    {constraint_id, type, subject, value, relation, min_count?, max_count?, ref?}

Conventions (from GenEval's ``evaluation_metadata.jsonl``, Ghosh et al. 2023):

- ``object``: ``subject`` (a class) is present, i.e. count >= 1.
- ``count``: ``subject`` appears between ``min_count`` and ``max_count`` times (inclusive;
  ``max_count`` None means unbounded; both at most ``MAX_COUNT``). GenEval's ``include.count`` is a minimum and its
  ``exclude`` entry at n+1 caps it, so "two clocks" is min 2, max 2.
- ``color``: the ``subject`` object has colour ``value`` (one of GenEval's colour names).
- ``position``: ``subject`` is ``relation`` the object ``value`` (``RELATIONS``: GenEval's
  "left of", "right of", "above", "below"; T2I-CompBench's "next to", "near", "behind",
  "in front of"); ``ref`` is the include index of that other object.
- ``text``: the quoted string ``value`` is rendered legibly.
- ``negative``: ``subject`` is absent ("no X", "without X").
- ``attribute``: a free attribute ``value`` of ``subject`` (shape, texture, ...).
- ``vqa``: a yes/no question ``subject`` with expected answer ``value`` (GenEval2, VQA lists).
- ``quality``: the image's pixel-level quality score (``evoharness.sim.quality``: noise,
  clipping, pasted-object seams; 0..1) is at least ``value`` (a threshold in 0..1);
  ``subject`` is ``"image"``. Not a GenEval requirement: GenEval scoring ignores it, and it
  is never in a prompt (split preparation adds it to preservation tasks so that side effects
  of a harness change are regressions the gates see).
"""

from __future__ import annotations

import enum
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class ConstraintType(enum.StrEnum):
    """The kinds of checkable requirement a constraint may express."""

    object = "object"
    count = "count"  # type: ignore[assignment]  # shadows str.count
    color = "color"
    position = "position"
    text = "text"
    negative = "negative"
    attribute = "attribute"
    vqa = "vqa"
    quality = "quality"


class Split(enum.StrEnum):
    """The three disjoint task splits evolution reads (every gate sees them), in this order:
    the one source of their names (``tasks.splits.EVOLUTION_SPLITS`` lists them; the untouched
    ``test`` split is no evolution split)."""

    target = "target"
    heldout = "heldout"
    preservation = "preservation"


#: GenEval's relative-position words (geneval/evaluation/evaluate_images.py).
POSITION_RELATIONS = ("left of", "right of", "above", "below")

#: Proximity words of T2I-CompBench's 2D-spatial category ("next to" and "near" share one
#: pixel rule in its evaluation, ``determine_position``).
PROXIMITY_RELATIONS = ("next to", "near")

#: Depth words of T2I-CompBench's 3D-spatial category.
DEPTH_RELATIONS = ("behind", "in front of")

#: Every relation a ``position`` constraint may carry.
RELATIONS = POSITION_RELATIONS + PROXIMITY_RELATIONS + DEPTH_RELATIONS

#: GenEval's ten colour names (geneval/evaluation/evaluate_images.py, COLORS).
GENEVAL_COLORS = (
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
    "black",
    "white",
)


#: Largest ``min_count`` / ``max_count`` (and ``ref``) a constraint may hold. GenEval's
#: counts are at most 4 and T2I-CompBench's numeracy prompts stay below 10; no detector can
#: check a thousand objects in one image, so a larger count is a typo. It also keeps every
#: count far below 2**53 - 1, the largest integer canonical JSON (RFC 8785, IEEE 754
#: doubles) holds exactly, past which hashing a task fails inside a workflow.
MAX_COUNT = 1_000

#: Largest magnitude of an integer ``value``: 2**53 - 1, the canonical-JSON limit
#: (``evoharness.canonical``).
MAX_JSON_INT = 2**53 - 1


class Constraint(BaseModel):
    """One checkable requirement. See the module docstring for each type's fields."""

    model_config = ConfigDict(extra="forbid")

    constraint_id: str = Field(min_length=1)
    type: ConstraintType
    subject: str = Field(min_length=1)
    value: str | int | float | None = None
    relation: str | None = None
    min_count: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    max_count: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    ref: int | None = Field(default=None, ge=0, le=MAX_COUNT)

    @field_validator("value")
    @classmethod
    def _value_int_in_json_range(cls, v: str | int | float | None) -> str | int | float | None:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_JSON_INT:
            raise ValueError(
                f"integer {v} is beyond 2**53 - 1, the largest canonical JSON holds exactly"
            )
        return v

    @model_validator(mode="after")
    def _check_shape(self) -> Constraint:
        t = self.type
        if t is ConstraintType.count:
            if self.min_count is None:
                raise ValueError(f"count constraint {self.constraint_id!r} needs min_count")
            if self.max_count is not None and self.max_count < self.min_count:
                raise ValueError(
                    f"count constraint {self.constraint_id!r}: max_count {self.max_count} "
                    f"< min_count {self.min_count}"
                )
        if t is ConstraintType.position:
            if self.relation not in RELATIONS:
                raise ValueError(
                    f"position constraint {self.constraint_id!r}: relation {self.relation!r} "
                    f"is not one of {RELATIONS}"
                )
            if not isinstance(self.value, str) or not self.value:
                raise ValueError(
                    f"position constraint {self.constraint_id!r} needs value = the other object"
                )
        if t is ConstraintType.quality and (
            isinstance(self.value, bool)
            or not isinstance(self.value, int | float)
            or not 0.0 <= self.value <= 1.0
        ):
            raise ValueError(
                f"quality constraint {self.constraint_id!r}: value {self.value!r} must be a "
                "threshold in 0..1"
            )
        if t in (ConstraintType.color, ConstraintType.text, ConstraintType.attribute) and (
            self.value is None or self.value == ""
        ):
            raise ValueError(f"{t.value} constraint {self.constraint_id!r} needs a value")
        return self


#: The longest prompt a task (or ``evoharness run`` / ``extract``) may carry, in characters:
#: 20 times the longest benchmark prompt here (435 characters, a PartiPrompts line), about
#: 1,700 words; the reading is linear in the prompt, so this bounds its time and output,
#: not a grammar limit. The one place this limit is defined.
MAX_PROMPT_CHARS = 10_000


def check_prompt_length(prompt: str) -> str:
    """``prompt`` when it has at most ``MAX_PROMPT_CHARS`` characters; else ``ValueError``
    saying how many it has and the limit (callers prefix where: file:line, argument)."""
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(
            f"the prompt has {len(prompt)} characters, over the limit of {MAX_PROMPT_CHARS}"
        )
    return prompt


class Task(BaseModel):
    """One prompt with its constraints. ``task_id`` is stable: source, file stem and row.
    The prompt is not blank and has at most ``MAX_PROMPT_CHARS`` characters."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1)
    prompt: str
    task_family: str = Field(min_length=1)
    constraints: list[Constraint] = Field(default_factory=list)
    references: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("prompt is empty")
        return check_prompt_length(v)

    @field_validator("references")
    @classmethod
    def _references_are_image_refs(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Each value is an image ref document ``{key, bucket?, sha256?}`` (``ImageRef``:
        a non-empty key) or a list of them; anything else would be dropped silently at render
        time while the prompt still says "image 1"."""
        from evoharness.program import ImageRef

        for k, val in v.items():
            items = val if isinstance(val, list) else [val]
            for j, item in enumerate(items):
                where = f"references.{k}" + (f"[{j}]" if isinstance(val, list) else "")
                if not isinstance(item, dict):
                    raise ValueError(
                        f"{where}: an image reference is an object {{key, bucket?, sha256?}}, "
                        f"not {type(item).__name__}"
                    )
                try:
                    ref = ImageRef.model_validate(item)
                except ValueError as exc:
                    raise ValueError(f"{where}: not an image reference: {exc}") from None
                if not ref.key:
                    raise ValueError(f"{where}.key: empty")
                if ref.sha256 and not re.fullmatch(r"[0-9a-f]{64}", ref.sha256):
                    raise ValueError(f"{where}.sha256: not 64 lower-case hex digits")
        return v

    def reference_keys(self) -> list[str]:
        """The keys of ``references`` in request order: natural order, so ``image_2``
        comes before ``image_10``."""
        return sorted(
            self.references,
            key=lambda k: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", k)],
        )

    @model_validator(mode="after")
    def _unique_constraint_ids(self) -> Task:
        seen: set[str] = set()
        for c in self.constraints:
            if c.constraint_id in seen:
                raise ValueError(
                    f"task {self.task_id!r}: duplicate constraint_id {c.constraint_id!r}"
                )
            seen.add(c.constraint_id)
        return self


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_WS = re.compile(r"\s+")


def normalize_prompt(prompt: str) -> str:
    """Normalise a prompt for duplicate detection: lower case, punctuation removed,
    whitespace collapsed. ``"A photo of a Dog."`` → ``"a photo of a dog"``."""
    return _WS.sub(" ", _PUNCT.sub(" ", prompt.lower())).strip()
