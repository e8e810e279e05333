"""Conversions between the evoharness pydantic models and their protobuf messages.

Every ``*_from_proto`` validates through the pydantic model and raises
``services.common.errors.InvalidField`` (a ``ValueError``; gRPC INVALID_ARGUMENT) whose
message names the offending field path, e.g. ``program.params.steps: ... outside bounds``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evoharness.capabilities import GeneratorCapabilities
from evoharness.evidence import Evidence
from evoharness.ports import Cost
from evoharness.program import ImageRef, Program
from evoharness.tasks.models import Constraint
from services.common.errors import InvalidField
from services.protos.evoharness.v1 import common_pb2 as pb


def _raise_invalid(exc: ValidationError, prefix: str) -> InvalidField:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    field = f"{prefix}.{loc}" if loc else prefix
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return InvalidField(field, msg)


def image_ref_to_proto(ref: ImageRef) -> pb.ImageRef:
    """``ImageRef`` -> ``evoharness.v1.ImageRef``."""
    return pb.ImageRef(bucket=ref.bucket, key=ref.key, sha256=ref.sha256)


def image_ref_from_proto(msg: pb.ImageRef, field: str = "image") -> ImageRef:
    """``evoharness.v1.ImageRef`` -> ``ImageRef``; raises ``InvalidField`` when the key is
    empty."""
    if not msg.key:
        raise InvalidField(f"{field}.key", "is empty")
    return ImageRef(bucket=msg.bucket, key=msg.key, sha256=msg.sha256)


def program_to_proto(program: Program) -> pb.Program:
    """``Program`` -> ``evoharness.v1.Program`` (absent layout/references stay absent)."""
    p = program.params
    msg = pb.Program(
        prompt=program.prompt,
        negative_prompt=program.negative_prompt,
        params=pb.GenerationParams(
            steps=p.steps, guidance_scale=p.guidance_scale, width=p.width, height=p.height
        ),
        seed=program.seed,
    )
    if program.layout is not None:
        items = []
        for it in program.layout:
            li = pb.LayoutItem(label=it.label, box=list(it.box))
            if it.color is not None:
                li.color = it.color
            if it.text is not None:
                li.text = it.text
            li.attributes.extend(it.attributes)
            items.append(li)
        msg.layout.CopyFrom(pb.Layout(items=items))
    if program.references is not None:
        msg.references.CopyFrom(
            pb.ImageRefList(items=[image_ref_to_proto(r) for r in program.references])
        )
    return msg


def program_dict_from_proto(msg: pb.Program) -> dict[str, Any]:
    """The JSON-shaped dict of a ``Program`` message (not validated)."""
    d: dict[str, Any] = {
        "prompt": msg.prompt,
        "negative_prompt": msg.negative_prompt,
        "seed": msg.seed,
    }
    if msg.HasField("params"):
        d["params"] = {
            "steps": msg.params.steps,
            "guidance_scale": msg.params.guidance_scale,
            "width": msg.params.width,
            "height": msg.params.height,
        }
    if msg.HasField("layout"):
        d["layout"] = [
            {
                "label": it.label,
                "box": list(it.box),
                **({"color": it.color} if it.HasField("color") else {}),
                **({"text": it.text} if it.HasField("text") else {}),
                **({"attributes": list(it.attributes)} if it.attributes else {}),
            }
            for it in msg.layout.items
        ]
    if msg.HasField("references"):
        d["references"] = [
            {"bucket": r.bucket, "key": r.key, "sha256": r.sha256} for r in msg.references.items
        ]
    return d


def program_from_proto(msg: pb.Program, field: str = "program") -> Program:
    """``evoharness.v1.Program`` -> validated ``Program``. Raises ``InvalidField`` naming the
    field (``program.prompt``, ``program.params.steps``, ``program.layout.0.box``, ...)."""
    d = program_dict_from_proto(msg)
    for i, item in enumerate(d.get("layout") or []):
        if len(item["box"]) != 4:
            raise InvalidField(f"{field}.layout.{i}.box", f"has {len(item['box'])} numbers, not 4")
    try:
        return Program.model_validate(d)
    except ValidationError as exc:
        raise _raise_invalid(exc, field) from exc


def constraint_to_proto(c: Constraint) -> pb.Constraint:
    """``Constraint`` -> ``evoharness.v1.Constraint``."""
    msg = pb.Constraint(constraint_id=c.constraint_id, type=c.type.value, subject=c.subject)
    if isinstance(c.value, bool):  # pragma: no cover - bool is not a declared value type
        raise InvalidField("constraint.value", "must be a string, an integer or a number")
    if isinstance(c.value, int):
        msg.value_int = c.value
    elif isinstance(c.value, float):
        msg.value_float = c.value
    elif isinstance(c.value, str):
        msg.value_str = c.value
    for name in ("relation", "min_count", "max_count", "ref"):
        v = getattr(c, name)
        if v is not None:
            setattr(msg, name, v)
    return msg


def constraint_from_proto(msg: pb.Constraint, field: str = "constraints") -> Constraint:
    """``evoharness.v1.Constraint`` -> ``Constraint``; raises ``InvalidField``."""
    kind = msg.WhichOneof("value")
    d: dict[str, Any] = {
        "constraint_id": msg.constraint_id,
        "type": msg.type,
        "subject": msg.subject,
        "value": getattr(msg, kind) if kind else None,
    }
    for name in ("relation", "min_count", "max_count", "ref"):
        if msg.HasField(name):
            d[name] = getattr(msg, name)
    try:
        return Constraint.model_validate(d)
    except ValidationError as exc:
        raise _raise_invalid(exc, field) from exc


def constraints_from_proto(
    msgs: Sequence[pb.Constraint], field: str = "constraints"
) -> list[Constraint]:
    """A list of constraints; field names carry the index (``constraints.2.type``)."""
    return [constraint_from_proto(m, f"{field}.{i}") for i, m in enumerate(msgs)]


def evidence_to_proto(e: Evidence) -> pb.Evidence:
    """``Evidence`` -> ``evoharness.v1.Evidence`` (``observed`` as JSON)."""
    return pb.Evidence(
        constraint_id=e.constraint_id,
        status=e.status.value,
        confidence=e.confidence,
        boxes=[pb.Box(x0=b[0], y0=b[1], x1=b[2], y1=b[3]) for b in e.boxes],
        observed_json="" if e.observed is None else json.dumps(e.observed, sort_keys=True),
        note=e.note,
        decided_by=e.decided_by,
    )


def evidence_from_proto(msg: pb.Evidence, field: str = "evidence") -> Evidence:
    """``evoharness.v1.Evidence`` -> ``Evidence``; raises ``InvalidField``."""
    try:
        observed = json.loads(msg.observed_json) if msg.observed_json else None
    except json.JSONDecodeError as exc:
        raise InvalidField(f"{field}.observed_json", f"is not JSON: {exc}") from exc
    try:
        return Evidence(
            constraint_id=msg.constraint_id,
            status=msg.status,  # type: ignore[arg-type]
            confidence=msg.confidence,
            boxes=[(b.x0, b.y0, b.x1, b.y1) for b in msg.boxes],
            observed=observed,
            note=msg.note,
            decided_by=msg.decided_by,
        )
    except ValidationError as exc:
        raise _raise_invalid(exc, field) from exc


def cost_to_proto(c: Cost) -> pb.Cost:
    """``Cost`` -> ``evoharness.v1.Cost``."""
    return pb.Cost(
        generator_seconds=c.generator_seconds,
        generator_calls=c.generator_calls,
        verifier_calls=c.verifier_calls,
        llm_calls=c.llm_calls,
        llm_prompt_tokens=c.llm_prompt_tokens,
        llm_completion_tokens=c.llm_completion_tokens,
        extra=dict(c.extra),
    )


def cost_from_proto(msg: pb.Cost) -> Cost:
    """``evoharness.v1.Cost`` -> ``Cost``."""
    return Cost(
        generator_seconds=msg.generator_seconds,
        generator_calls=msg.generator_calls,
        verifier_calls=msg.verifier_calls,
        llm_calls=msg.llm_calls,
        llm_prompt_tokens=msg.llm_prompt_tokens,
        llm_completion_tokens=msg.llm_completion_tokens,
        extra=dict(msg.extra),
    )


def lineage_to_proto_fields(lineage: Any) -> dict[str, Any]:
    """The registry messages' lineage fields (``PutRequest`` and ``HarnessVersion`` share
    them) of a ``harness_registry.Lineage`` or ``Registration``: parent, patch (JSON), report
    reference, run (``run_id`` ← ``workflow_id``), who, note (``message``), name, description
    and generator id. The generator's capabilities are a message of their own
    (``capabilities_to_proto``)."""
    return {
        "parent_id": lineage.parent_id or "",
        "message": lineage.note,
        "run_id": lineage.workflow_id,
        "patch_json": json.dumps(lineage.patch) if lineage.patch is not None else "",
        "round_report_ref": lineage.round_report_ref,
        "registered_by": lineage.registered_by,
        "name": lineage.name,
        "generator_id": lineage.generator_id,
        "description": lineage.description,
    }


def capabilities_to_proto(c: GeneratorCapabilities) -> pb.GeneratorCapabilities:
    """``GeneratorCapabilities`` -> ``evoharness.v1.GeneratorCapabilities``."""
    return pb.GeneratorCapabilities(
        layout=c.layout,
        layout_attributes=list(c.layout_attributes),
        max_references=c.max_references,
        reference_roles=list(c.reference_roles),
        negative_prompt=c.negative_prompt,
        max_prompt_tokens=c.max_prompt_tokens,
        seedable=c.seedable,
        resolutions=[pb.Resolution(width=w, height=h) for w, h in c.resolutions],
    )


def capabilities_from_proto(
    msg: pb.GeneratorCapabilities, field: str = "capabilities"
) -> GeneratorCapabilities:
    """``evoharness.v1.GeneratorCapabilities`` -> validated ``GeneratorCapabilities``; raises
    ``InvalidField`` naming the field (``capabilities.layout``, ...)."""
    try:
        return GeneratorCapabilities(
            layout=msg.layout,  # type: ignore[arg-type]
            layout_attributes=tuple(msg.layout_attributes),
            max_references=msg.max_references,
            reference_roles=tuple(msg.reference_roles),
            negative_prompt=msg.negative_prompt,
            max_prompt_tokens=msg.max_prompt_tokens,
            seedable=msg.seedable,
            resolutions=tuple((r.width, r.height) for r in msg.resolutions),
        )
    except ValidationError as exc:
        raise _raise_invalid(exc, field) from exc
