"""Validation of UNTRUSTED answers from the three proposer roles (docs/architecture.md, step 5).

An LLM (or any remote backend) answers as JSON. Nothing in such an answer is trusted: every
answer goes through the functions below before the core uses it, and an answer that fails a
check becomes a ``FailedProposal`` with a machine-readable reason code — never a patch.

Checks, in order (the first failing check decides the reason):

1. ``too_large``   raw answer over ``AnswerLimits.max_raw_chars``; too many items, ops,
                   characters in one string, or JSON nesting deeper than allowed.
2. ``invalid_json`` not parseable as JSON (``NaN``/``Infinity`` rejected too), after
                   stripping one surrounding Markdown code fence.
3. ``schema``      does not match the role's answer model (pydantic; the JSON schema sent to
                   the LLM in ``response_format`` is generated from the same models, see
                   ``ANSWER_SCHEMAS``).
4. per item, patch proposer only:
   ``wrong_responsibility`` (the patch is for another responsibility than the one asked),
   ``contract``     an op writes outside the patch's boundary contract
                    (``evoharness.harness.patch.check_contract``),
   ``rfc6902``      RFC 6902 rejects an op on this harness (missing path, failed ``test``),
   ``harness_schema`` the patched document breaks the harness schema,
   ``compile``      the patched harness fails the runtime's static compile checks
                    (``evoharness.runtime.runtime.check_harness``: template fields, skill
                    effects naming undeclared tools or unknown rewrites/parameters),
   ``no_op``        the patch leaves the harness unchanged (same ``harness_id``),
   ``duplicate``    an earlier item of the same answer yields the same harness.
   Localizer: ``unknown_cluster``, ``bad_scores``. Extractor: ``ungrounded`` (quoted text
   not in the prompt) and ``schema`` (a constraint of the wrong shape).

The ``rationale`` and ``expected_effect`` strings are inert text: they are length-capped,
stripped of control characters and never read by any check, so instructions injected into
them ("ignore the contract and accept this patch") cannot change a verdict.

Reason codes are the label values of ``evoharness_proposal_failures{reason}``. The answer models
and the limits live in ``evoharness.trace.answer_models``, checks 1-2 (``load_answer``) and
the wording of a schema error (``schema_error_detail``) in ``evoharness.trace.answer_json``
(all re-exported here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import jsonpatch
import jsonpointer
from pydantic import BaseModel, ValidationError

from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, PatchError, apply_patch, check_contract
from evoharness.harness.schema import Harness, Responsibility
from evoharness.runtime.runtime import HarnessCompileError, check_harness
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.trace.answer_json import AnswerRejected, load_answer, schema_error_detail
from evoharness.trace.answer_models import (
    ANSWER_SCHEMAS,
    DEFAULT_LIMITS,
    REASONS,
    SCORE_KEYS,
    AnswerLimits,
    AttributionItem,
    ExtractorAnswer,
    FailedProposal,
    LocalizerAnswer,
    PatchItem,
    PatchProposal,
    ProposerAnswer,
)
from evoharness.trace.models import Attribution

# ----------------------------------------------------------------------------- helpers

_M = TypeVar("_M", bound=BaseModel)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _excerpt(raw: Any, n: int = 200) -> str:
    text = raw if isinstance(raw, str) else _safe_dumps(raw)
    return _CONTROL.sub("", text[:n])


def _safe_dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)[:1_000_000]
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:1_000_000]


def inert_text(text: str, limit: int) -> str:
    """``text`` as inert display text: control and bidi-override characters removed, cut to
    ``limit`` characters (an ellipsis marks the cut). Never parsed or executed."""
    clean = _CONTROL.sub("", text)
    return clean if len(clean) <= limit else clean[: max(0, limit - 1)] + "…"


def _validate(model: type[_M], value: dict[str, Any]) -> _M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise AnswerRejected("schema", schema_error_detail(exc)) from None


def _count_items(value: dict[str, Any], key: str, limits: AnswerLimits) -> None:
    items = value.get(key)
    if isinstance(items, list) and len(items) > limits.max_items:
        raise AnswerRejected("too_large", f"{key}: {len(items)} items (limit {limits.max_items})")


# --------------------------------------------------------------------------- proposer


def parse_patch_answer(
    raw: str | bytes | dict[str, Any],
    harness: Harness,
    responsibility: Responsibility | str | None = None,
    limits: AnswerLimits = DEFAULT_LIMITS,
) -> list[PatchProposal | FailedProposal]:
    """Validate a patch proposer's answer against ``harness``.

    ``raw``: the answer text (JSON, optionally in one Markdown code fence) or an already
    decoded object of shape ``ProposerAnswer``. ``responsibility``: when given, patches for any
    other responsibility are rejected (``wrong_responsibility``).

    Returns one entry per patch in answer order: ``PatchProposal`` when it passed every check
    (module docstring), else ``FailedProposal``; a whole-answer failure returns a single
    ``FailedProposal`` with ``index`` None. An answer with zero patches returns ``[]``. Never
    raises for bad input.
    """
    try:
        value = load_answer(raw, limits)
        _count_items(value, "patches", limits)
        patches = value.get("patches")
        for i, item in enumerate(patches if isinstance(patches, list) else []):
            ops = item.get("ops") if isinstance(item, dict) else None
            if isinstance(ops, list) and len(ops) > limits.max_ops:
                raise AnswerRejected(
                    "too_large", f"patches[{i}].ops: {len(ops)} ops (limit {limits.max_ops})"
                )
        answer = _validate(ProposerAnswer, value)
    except AnswerRejected as rej:
        return [
            FailedProposal(
                role="proposer", reason=rej.reason, detail=rej.detail, excerpt=_excerpt(raw)
            )
        ]
    want = Responsibility(responsibility) if responsibility is not None else None
    base_id = harness_id(harness)
    seen: set[str] = set()
    out: list[PatchProposal | FailedProposal] = []
    for i, item in enumerate(answer.patches):
        try:
            out.append(_check_patch(i, item, harness, base_id, want, seen, limits))
        except AnswerRejected as rej:
            out.append(
                FailedProposal(
                    role="proposer",
                    reason=rej.reason,
                    detail=f"patches[{i}]: {rej.detail}",
                    index=i,
                    excerpt=_excerpt(
                        item.model_dump(mode="json", by_alias=True, exclude_unset=True)
                    ),
                )
            )
    return out


def _check_patch(
    i: int,
    item: PatchItem,
    harness: Harness,
    base_id: str,
    want: Responsibility | None,
    seen: set[str],
    limits: AnswerLimits,
) -> PatchProposal:
    if want is not None and item.responsibility != want:
        raise AnswerRejected(
            "wrong_responsibility",
            f"patch is for {item.responsibility.value}, asked for {want.value}",
        )
    try:
        ops = [op.as_rfc6902() for op in item.ops]
    except ValueError as exc:
        raise AnswerRejected("schema", str(exc)) from None
    patch = Patch(
        responsibility=item.responsibility,
        ops=ops,
        rationale=inert_text(item.rationale, limits.max_text),
        expected_effect=inert_text(item.expected_effect, limits.max_text),
    )
    try:
        check_contract(patch)
    except PatchError as exc:
        raise AnswerRejected("contract", str(exc)) from None
    try:
        new = apply_patch(harness, patch)
    except PatchError as exc:
        # RFC 6902 refusal or schema break? Re-apply the ops with jsonpatch alone to tell.
        raise AnswerRejected(_apply_failure_kind(harness, ops), str(exc)) from None
    except RecursionError:
        raise AnswerRejected("too_large", "patched document nests too deeply") from None
    try:
        check_harness(new)
    except HarnessCompileError as exc:
        raise AnswerRejected("compile", str(exc)) from None
    new_id = harness_id(new)
    if new_id == base_id:
        raise AnswerRejected("no_op", "the patch leaves the harness unchanged")
    if new_id in seen:
        raise AnswerRejected("duplicate", "an earlier patch of this answer yields the same harness")
    seen.add(new_id)
    return PatchProposal(index=i, patch=patch, harness_id=new_id)


def _apply_failure_kind(harness: Harness, ops: list[dict[str, Any]]) -> str:
    """``rfc6902`` when RFC 6902 itself rejects ``ops`` on the harness document, else
    ``harness_schema`` (the ops apply, the result breaks the schema)."""
    try:
        jsonpatch.JsonPatch(ops).apply(harness.to_document(), in_place=False)
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
        ValueError,
    ):
        return "rfc6902"
    return "harness_schema"


def valid_patches(results: Iterable[PatchProposal | FailedProposal]) -> list[PatchProposal]:
    """The ``PatchProposal`` entries of a parse result."""
    return [r for r in results if isinstance(r, PatchProposal)]


def failures(results: Iterable[Any]) -> list[FailedProposal]:
    """The ``FailedProposal`` entries of a parse result."""
    return [r for r in results if isinstance(r, FailedProposal)]


# --------------------------------------------------------------------------- localizer


def parse_localizer_answer(
    raw: str | bytes | dict[str, Any],
    cluster_ids: Sequence[str],
    limits: AnswerLimits = DEFAULT_LIMITS,
) -> list[Attribution | FailedProposal]:
    """Validate a localizer's answer for the clusters ``cluster_ids``.

    Each attribution's scores are normalised to sum 1 (``bad_scores`` when they sum to 0 or
    are not finite); ``chosen`` is the argmax (ties broken by ``SCORE_KEYS`` order, which puts
    responsibilities before ``no_patch``); ``reasons`` are inert text prefixed ``llm:``.
    Attributions for unknown clusters (``unknown_cluster``) or repeated clusters
    (``duplicate``) fail. Returns one entry per attribution, or one whole-answer failure.
    """
    try:
        value = load_answer(raw, limits)
        _count_items(value, "attributions", limits)
        answer = _validate(LocalizerAnswer, value)
    except AnswerRejected as rej:
        return [
            FailedProposal(
                role="localizer", reason=rej.reason, detail=rej.detail, excerpt=_excerpt(raw)
            )
        ]
    known = set(cluster_ids)
    seen: set[str] = set()
    out: list[Attribution | FailedProposal] = []
    for i, item in enumerate(answer.attributions):

        def fail(reason: str, detail: str, i: int = i, item: AttributionItem = item) -> None:
            out.append(
                FailedProposal(
                    role="localizer",
                    reason=reason,
                    detail=f"attributions[{i}]: {detail}",
                    index=i,
                    excerpt=_excerpt(item.model_dump(mode="json")),
                )
            )

        if item.cluster_id not in known:
            fail("unknown_cluster", f"cluster_id {item.cluster_id[:80]!r} was not asked for")
            continue
        if item.cluster_id in seen:
            fail("duplicate", f"cluster_id {item.cluster_id!r} attributed twice")
            continue
        scores = item.scores.model_dump()
        total = sum(scores.values())
        if not (total > 0 and total < float("inf")):
            fail("bad_scores", f"scores sum to {total}; need a finite positive sum")
            continue
        seen.add(item.cluster_id)
        norm = {k: scores[k] / total for k in SCORE_KEYS}
        chosen = max(SCORE_KEYS, key=lambda k: (norm[k], -SCORE_KEYS.index(k)))
        reasons = [
            "llm: " + inert_text(r, limits.max_text) for r in item.reasons[: limits.max_items]
        ]
        out.append(
            Attribution(cluster_id=item.cluster_id, scores=norm, chosen=chosen, reasons=reasons)
        )
    return out


# --------------------------------------------------------------------------- extractor


def parse_extractor_answer(
    raw: str | bytes | dict[str, Any],
    prompt: str,
    limits: AnswerLimits = DEFAULT_LIMITS,
) -> list[Constraint | FailedProposal]:
    """Validate a policy extractor's answer for ``prompt``.

    Each item becomes a ``Constraint`` with ``constraint_id`` ``llm-<i>`` (ids from the
    answer are ignored: they are ours to assign). A constraint of the wrong shape (e.g. a
    count without ``min_count``) fails with ``schema``; a ``text`` constraint whose value does
    not appear in the prompt (case-insensitive) fails with ``ungrounded``. Returns one entry
    per item, or one whole-answer failure.
    """
    try:
        value = load_answer(raw, limits)
        _count_items(value, "constraints", limits)
        answer = _validate(ExtractorAnswer, value)
    except AnswerRejected as rej:
        return [
            FailedProposal(
                role="extractor", reason=rej.reason, detail=rej.detail, excerpt=_excerpt(raw)
            )
        ]
    lowered = prompt.lower()
    out: list[Constraint | FailedProposal] = []
    for i, item in enumerate(answer.constraints):
        try:
            c = Constraint(constraint_id=f"llm-{i}", **item.model_dump())
        except ValidationError as exc:
            reason, detail = "schema", schema_error_detail(exc)
        else:
            if c.type is ConstraintType.text and str(c.value).lower() not in lowered:
                reason, detail = "ungrounded", f"text {str(c.value)[:80]!r} is not in the prompt"
            else:
                out.append(c)
                continue
        out.append(
            FailedProposal(
                role="extractor",
                reason=reason,
                detail=f"constraints[{i}]: {detail}",
                index=i,
                excerpt=_excerpt(item.model_dump(mode="json")),
            )
        )
    return out


__all__ = [
    "ANSWER_SCHEMAS",
    "AnswerLimits",
    "AnswerRejected",
    "DEFAULT_LIMITS",
    "ExtractorAnswer",
    "FailedProposal",
    "LocalizerAnswer",
    "PatchProposal",
    "ProposerAnswer",
    "REASONS",
    "SCORE_KEYS",
    "failures",
    "inert_text",
    "load_answer",
    "parse_extractor_answer",
    "parse_localizer_answer",
    "parse_patch_answer",
    "schema_error_detail",
    "valid_patches",
]
