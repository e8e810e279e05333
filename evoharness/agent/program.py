"""The agent's final answer: a prompt-reference program, and its validation.

A program is ``{gen_prompt, reference_images: [{img_id, role}], selected_skills, rationale}``
(GenEvolve's prompt-reference program): the text the generator gets, the reference images
it is conditioned on (by the transient ids the agent saw, ``IMG_001`` …), the skill documents
the agent relied on, and why. The answer is untrusted: ``validate_final`` turns every defect
into a list of ``ProgramFailure`` (never an exception), one per defect found:

- ``unparseable``: not JSON (after stripping one surrounding Markdown code fence), or JSON
  that is not an object;
- ``too_large``: over ``FINAL_ANSWER_LIMITS`` (characters of the answer, of one string,
  nesting depth); read by ``evoharness.trace.answer_json.load_answer`` like the proposers'
  answers;
- ``invalid_program``: the object does not fit the model (a field missing, of the wrong type,
  or unknown; an empty ``gen_prompt``);
- ``unknown_skill``: a selected skill the harness does not have;
- ``too_many_references``: more references than allowed per render (``max_references``,
  2 in GenEvolve);
- ``unknown_reference``: an ``img_id`` the agent was never shown;
- ``raw_id_in_prompt`` / ``url_in_prompt``: ``gen_prompt`` carries a transient image id or a
  URL (the generator reads neither);
- ``unmentioned_reference``: a reference ``gen_prompt`` never mentions. Reference *i* (1-based,
  in list order) is mentioned when ``gen_prompt`` says ``image i``, ``reference i`` or
  ``reference image i`` (case-insensitive), the convention of reference-conditioned
  generators' prompts ("the dog from image 1").
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evoharness.tasks.models import MAX_PROMPT_CHARS
from evoharness.trace.answer_json import AnswerRejected, load_answer, schema_error_detail
from evoharness.trace.answer_models import DEFAULT_LIMITS, AnswerLimits
from evoharness.vocab import REFERENCE_MENTION

#: A transient image id as the agent sees it.
IMG_ID = re.compile(r"\bIMG_\d{3,}\b", re.IGNORECASE)
#: A mention of reference *i* in ``gen_prompt`` (``vocab.REFERENCE_MENTION``).
_MENTION = re.compile(REFERENCE_MENTION, re.IGNORECASE)
#: A URL or storage address (http(s), s3, gs, file, www.).
URL = re.compile(r"\b(?:https?|s3|gs|file)://\S+|\bwww\.\S+", re.IGNORECASE)

#: The size limits of a final answer: the proposers' (``evoharness.trace.answers``).
FINAL_ANSWER_LIMITS: AnswerLimits = DEFAULT_LIMITS

FailureKind = Literal[
    "unparseable",
    "too_large",
    "invalid_program",
    "unknown_skill",
    "too_many_references",
    "unknown_reference",
    "raw_id_in_prompt",
    "url_in_prompt",
    "unmentioned_reference",
    "unknown_tool",
    "bad_tool_arguments",
    "tool_error",
    "backend_error",
    "turn_budget",
    "cost_budget",
]


class ReferenceImage(BaseModel):
    """One reference of a program: the transient ``img_id`` and its ``role`` (e.g.
    ``subject``, ``style``, ``pose``)."""

    model_config = ConfigDict(extra="forbid")

    img_id: str = Field(min_length=1)
    role: str = Field(min_length=1, max_length=64)


class PromptReferenceProgram(BaseModel):
    """The agent's final answer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    gen_prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    reference_images: list[ReferenceImage] = Field(default_factory=list)
    selected_skills: list[str] = Field(default_factory=list)
    rationale: str = ""

    @field_validator("gen_prompt")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("gen_prompt is blank")
        return v.strip()


@dataclass(frozen=True)
class ProgramFailure:
    """One recorded trajectory failure: its ``kind`` and a human-readable ``detail``."""

    kind: FailureKind
    detail: str

    def as_record(self) -> dict[str, str]:
        """The JSON shape in the trace."""
        return {"kind": self.kind, "detail": self.detail}


def mentions_reference(gen_prompt: str, index: int) -> bool:
    """True when ``gen_prompt`` mentions reference ``index`` (1-based) as ``image i``,
    ``reference i`` or ``reference image i``."""
    return any(int(m.group(2)) == index for m in _MENTION.finditer(gen_prompt))


def validate_final(
    answer: Any,
    *,
    skills: Collection[str],
    image_ids: Collection[str],
    max_references: int,
) -> tuple[PromptReferenceProgram | None, list[ProgramFailure]]:
    """Parse and check a final answer. ``answer``: the JSON text (optionally in one Markdown
    code fence) or an already decoded object; ``skills``: the harness's skill names;
    ``image_ids``: the ids the agent was shown; ``max_references``: references allowed per
    render. Returns ``(program, [])`` when valid, else ``(None, failures)``. Never raises."""
    try:
        value = load_answer(answer, FINAL_ANSWER_LIMITS)
    except AnswerRejected as rej:
        kind: FailureKind = "too_large" if rej.reason == "too_large" else "unparseable"
        return None, [ProgramFailure(kind, f"final answer: {rej.detail}")]
    try:
        program = PromptReferenceProgram.model_validate(value)
    except ValidationError as exc:
        return None, [ProgramFailure("invalid_program", schema_error_detail(exc))]
    failures: list[ProgramFailure] = []
    unknown = [s for s in program.selected_skills if s not in skills]
    if unknown:
        failures.append(
            ProgramFailure(
                "unknown_skill", f"selected skills {unknown} not in the harness {sorted(skills)}"
            )
        )
    refs = program.reference_images
    if len(refs) > max_references:
        failures.append(
            ProgramFailure(
                "too_many_references",
                f"{len(refs)} references; at most {max_references} per render",
            )
        )
    known = {i.upper() for i in image_ids}
    bad = [r.img_id for r in refs if r.img_id.upper() not in known]
    if bad:
        failures.append(
            ProgramFailure("unknown_reference", f"img_id {bad} was never shown to the agent")
        )
    if IMG_ID.search(program.gen_prompt):
        failures.append(
            ProgramFailure(
                "raw_id_in_prompt",
                f"gen_prompt carries the raw id {IMG_ID.search(program.gen_prompt).group(0)!r}",  # type: ignore[union-attr]
            )
        )
    if URL.search(program.gen_prompt):
        failures.append(ProgramFailure("url_in_prompt", "gen_prompt carries a URL"))
    for i, r in enumerate(refs, start=1):
        if not mentions_reference(program.gen_prompt, i):
            failures.append(
                ProgramFailure(
                    "unmentioned_reference",
                    f"reference {i} ({r.img_id}, {r.role}) is never mentioned as 'image {i}'",
                )
            )
    return (None, failures) if failures else (program, [])


__all__ = [
    "FINAL_ANSWER_LIMITS",
    "FailureKind",
    "ProgramFailure",
    "PromptReferenceProgram",
    "ReferenceImage",
    "mentions_reference",
    "validate_final",
]
