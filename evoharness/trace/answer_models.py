"""The answer models of the three proposer roles (moved from ``answers.py``, issue 28): the
reason codes, the limits an answer must stay within, a failed and a valid proposal, and the
strict pydantic models each role's JSON answer must match — from which ``ANSWER_SCHEMAS``, the
JSON schema sent to the LLM in ``response_format``, is generated. ``evoharness.trace.answers``
validates answers against them (its docstring gives every check and reason code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Responsibility
from evoharness.tasks.models import ConstraintType

#: Every reason code a failed answer can carry.
REASONS: Final = (
    "too_large",
    "invalid_json",
    "schema",
    "wrong_responsibility",
    "contract",
    "rfc6902",
    "harness_schema",
    "compile",
    "no_op",
    "duplicate",
    "unknown_cluster",
    "bad_scores",
    "ungrounded",
    "backend_error",  # the backend gave no answer at all (HTTP 429/500, timeout); set by callers
)

#: The score keys of a localizer answer: the five responsibilities plus ``no_patch``.
SCORE_KEYS: Final = (*(r.value for r in Responsibility), "no_patch")


@dataclass(frozen=True)
class AnswerLimits:
    """Size limits for one answer. Defaults are generous for a real proposer (a patch of a
    few ops with a paragraph of rationale is ~2 KB) and small enough that a runaway or
    hostile answer is cut off before it costs anything.

    ``max_raw_chars``: characters of the raw answer (or of its JSON encoding when a dict is
    given). ``max_items``: patches / attributions / constraints per answer. ``max_ops``: ops
    per patch. ``max_string``: characters of any single string value (skill bodies included).
    ``max_text``: characters kept of rationale / expected effect / reasons (longer text is cut,
    not rejected — it is inert). ``max_depth``: JSON nesting depth.
    """

    max_raw_chars: int = 200_000
    max_items: int = 16
    max_ops: int = 32
    max_string: int = 8_000
    max_text: int = 2_000
    max_depth: int = 12


DEFAULT_LIMITS: Final = AnswerLimits()


class FailedProposal(BaseModel):
    """An answer (``index`` None) or one item of it (``index`` = position) that failed a
    check. ``role``: ``extractor``, ``localizer``, ``proposer`` (or a caller's role, e.g. the
    VLM verifier's ``verifier``). ``reason`` is one of ``REASONS``; ``detail`` is a human-readable message naming
    the field or op; ``excerpt`` is at most 200 characters of the offending raw text."""

    model_config = ConfigDict(extra="forbid")

    role: str
    reason: str
    detail: str
    index: int | None = None
    excerpt: str = ""


class PatchProposal(BaseModel):
    """A patch that passed every check, with the harness it produces."""

    model_config = ConfigDict(extra="forbid")

    index: int
    patch: Patch
    harness_id: str


# ------------------------------------------------------------------ answer models (schemas)

_Text = Annotated[str, StringConstraints(max_length=100_000)]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JsonPatchOp(_Strict):
    """One RFC 6902 operation. ``value`` is required for add/replace/test; ``from`` for
    move/copy."""

    op: Literal["add", "remove", "replace", "move", "copy", "test"]
    path: Annotated[str, StringConstraints(pattern=r"^(/.*)?$", max_length=500)]
    from_: Annotated[str, StringConstraints(pattern=r"^(/.*)?$", max_length=500)] | None = Field(
        default=None, alias="from"
    )
    value: Any = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def as_rfc6902(self) -> dict[str, Any]:
        """The op as an RFC 6902 dict with exactly the members it needs; raises
        ``ValueError`` when a required member is missing."""
        out: dict[str, Any] = {"op": self.op, "path": self.path}
        if self.op in ("add", "replace", "test"):
            if "value" not in self.model_fields_set:
                raise ValueError(f"{self.op} op at {self.path!r} needs 'value'")
            out["value"] = self.value
        if self.op in ("move", "copy"):
            if self.from_ is None:
                raise ValueError(f"{self.op} op at {self.path!r} needs 'from'")
            out["from"] = self.from_
        return out


class PatchItem(_Strict):
    """One candidate patch in a proposer answer."""

    responsibility: Responsibility
    ops: list[JsonPatchOp] = Field(min_length=1)
    rationale: _Text = ""
    expected_effect: _Text = ""


class ProposerAnswer(_Strict):
    """The patch proposer's answer: candidate patches (possibly none)."""

    patches: list[PatchItem]


class Scores(_Strict):
    """Non-negative scores over the five responsibilities and ``no_patch`` (normalised to sum
    1 by the validator)."""

    policy: float = Field(ge=0.0)
    tools: float = Field(ge=0.0)
    skills: float = Field(ge=0.0)
    middleware: float = Field(ge=0.0)
    memory: float = Field(ge=0.0)
    no_patch: float = Field(ge=0.0)


class AttributionItem(_Strict):
    """One cluster's attribution in a localizer answer."""

    cluster_id: _Name
    scores: Scores
    reasons: list[_Text] = Field(default_factory=list)


class LocalizerAnswer(_Strict):
    """The harness localizer's answer."""

    attributions: list[AttributionItem]


class ConstraintItem(_Strict):
    """One constraint in a policy-extractor answer (``Constraint`` without the id, which the
    validator assigns)."""

    type: ConstraintType
    subject: _Name
    value: str | int | None = None
    relation: str | None = None
    min_count: int | None = Field(default=None, ge=0, le=1000)
    max_count: int | None = Field(default=None, ge=0, le=1000)
    ref: int | None = None


class ExtractorAnswer(_Strict):
    """The policy extractor's answer: the constraints the prompt states."""

    constraints: list[ConstraintItem]


#: The JSON schema of each role's answer (what ``response_format`` sends to the LLM).
ANSWER_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "extractor": ExtractorAnswer.model_json_schema(by_alias=True),
    "localizer": LocalizerAnswer.model_json_schema(by_alias=True),
    "proposer": ProposerAnswer.model_json_schema(by_alias=True),
}
