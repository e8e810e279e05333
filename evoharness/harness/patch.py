"""Patches and boundary contracts.

A patch is ``{responsibility, ops (RFC 6902 JSON Patch), rationale, expected_effect}``. Each
responsibility owns the JSON paths under its own section of the harness document (its
*boundary contract*); a patch may only write inside the contract of its own responsibility.
RFC 6902 semantics come from the ``jsonpatch`` library.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoharness.harness.io import first_non_json, got
from evoharness.harness.schema import Harness, Responsibility

#: Boundary contracts: the JSON pointer prefixes each responsibility owns and may write.
CONTRACTS: dict[Responsibility, tuple[str, ...]] = {
    Responsibility.policy: ("/policy",),
    Responsibility.tools: ("/tools",),
    Responsibility.skills: ("/skills",),
    Responsibility.middleware: ("/middleware",),
    Responsibility.memory: ("/memory",),
}

_WRITE_OPS = {"add", "remove", "replace", "move", "copy", "test"}

#: Discriminator tags pydantic inserts into error locations of tagged unions (tools, stages).
_UNION_TAGS = {
    "layout_planner",
    "reference_retrieval",
    "knowledge_lookup",
    "search",
    "image_search",
    "query_knowledge",
    "agent",
    "skill_routing",
    "verify_and_repair",
    "best_of_n",
}


class PatchError(ValueError):
    """A patch that cannot be applied. ``op_index`` and ``path`` name the offending op."""

    def __init__(self, message: str, op_index: int | None = None, path: str | None = None):
        super().__init__(message)
        self.op_index = op_index
        self.path = path


class Patch(BaseModel):
    """A targeted change to one responsibility of a harness."""

    model_config = ConfigDict(extra="forbid")

    responsibility: Responsibility
    ops: list[dict[str, Any]] = Field(min_length=1)
    rationale: str = ""
    expected_effect: str = ""


def owner_of(path: str) -> Responsibility | None:
    """The responsibility whose contract contains JSON pointer ``path``, or None."""
    for resp, prefixes in CONTRACTS.items():
        for prefix in prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return resp
    return None


def check_contract(patch: Patch) -> None:
    """Raise ``PatchError`` for the first op that is malformed, writes outside
    ``patch.responsibility``'s boundary contract (``path`` and, for move/copy, ``from``), or
    removes a responsibility root (``remove /policy``, ``move`` from it): that would reset the
    whole section to its defaults."""
    allowed = CONTRACTS[patch.responsibility]
    for i, op in enumerate(patch.ops):
        name = op.get("op")
        if name not in _WRITE_OPS:
            raise PatchError(f"op {i}: unknown op {name!r}", i, op.get("path"))
        for field in ("path", "from") if name in ("move", "copy") else ("path",):
            p = op.get(field)
            if not isinstance(p, str):
                raise PatchError(f"op {i} ({name}): {field!r} must be a JSON pointer string", i)
            try:
                jsonpointer.JsonPointer(p)
            except jsonpointer.JsonPointerException as exc:
                raise PatchError(
                    f"op {i} ({name}): {field} {p!r} is not a JSON pointer: {exc}", i, p
                ) from None
            # 'from' of copy only reads; reading another section is allowed.
            if name == "copy" and field == "from":
                continue
            if owner_of(p) != patch.responsibility:
                what = p if field == "path" else f"from {p}"
                raise PatchError(
                    f"op {i} ({name} {what}) is outside the boundary contract of "
                    f"{patch.responsibility.value} (may write only {', '.join(allowed)}/...)",
                    i,
                    p,
                )
            removes = (name == "remove" and field == "path") or (name == "move" and field == "from")
            if removes and p in allowed:
                what = p if field == "path" else f"from {p}"
                raise PatchError(
                    f"op {i} ({name} {what}): removes a responsibility root, which would reset "
                    f"the whole {patch.responsibility.value} section to its defaults; change "
                    f"or remove fields under {p}/... instead",
                    i,
                    p,
                )


def apply_patch(harness: Harness, patch: Patch | dict[str, Any] | list[Any]) -> Harness:
    """Apply ``patch`` to ``harness`` and return a new, validated ``Harness``.

    The input is never mutated. Raises ``PatchError`` when an op is outside the patch's
    responsibility contract, when RFC 6902 rejects an op (missing path, failed ``test``), or
    when the result breaks the harness schema (the message names each invalid field and the
    op(s) whose path leads there).
    """
    if isinstance(patch, list):
        raise PatchError(
            "a bare RFC 6902 list of ops is not a patch: expected "
            '{"responsibility": "policy|tools|skills|middleware|memory", "ops": [...], '
            '"rationale": "...", "expected_effect": "..."}'
        )
    if not isinstance(patch, Patch):
        try:
            patch = Patch.model_validate(patch)
        except ValidationError as exc:
            raise PatchError(
                f"invalid patch: {exc.errors()[0]['msg']} at "
                f"{'.'.join(map(str, exc.errors()[0]['loc']))}"
            ) from None
    check_contract(patch)
    doc = harness.to_document()  # a fresh document (model_dump): the input is never touched
    for i, op in enumerate(patch.ops):
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc)  # returns a patched copy
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise PatchError(
                f"op {i} ({op.get('op')} {op.get('path')}) rejected by RFC 6902: {exc}",
                i,
                op.get("path"),
            ) from None
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise PatchError(
                f"op {i} ({op.get('op')} {op.get('path')}) is malformed: {exc}", i, op.get("path")
            ) from None
    try:
        return Harness.from_json_document(doc)  # strict: a bool is not an int, "30" not a number
    except ValidationError as exc:
        raise _schema_error(patch, exc) from None
    except ValueError as exc:
        found = first_non_json(doc)
        if found is None:
            raise PatchError(f"patch ({patch.responsibility.value}): {exc}") from None
        loc, why = found
        culprits = _culprits(patch, [str(p) for p in loc])
        who = ", ".join(f"op {i} ({op.get('op')} {op.get('path')})" for i, op in culprits)
        raise PatchError(
            f"patch ({patch.responsibility.value}): {'.'.join(map(str, loc)) or '<root>'}: {why}"
            + (f" [{who}]" if who else ""),
            culprits[0][0] if culprits else None,
            culprits[0][1].get("path") if culprits else None,
        ) from None


def _segments_match(op_path: list[str], loc: list[str]) -> bool:
    """True when one path is a prefix of the other (``-`` matches any array index).
    ``op_path``: an op's JSON pointer as unescaped tokens (RFC 6901: ``~1`` is ``/``, ``~0``
    is ``~``); ``loc``: a pydantic error location as strings."""
    for a, b in zip(op_path, loc, strict=False):
        if a != b and not (a == "-" and b.isdigit()):
            return False
    return True


def _culprits(patch: Patch, loc: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """``(index, op)`` of the ops whose path leads to or lies under the field at ``loc``."""
    return [
        (i, op)
        for i, op in enumerate(patch.ops)
        if op.get("op") != "test"  # a test op writes nothing
        and _segments_match(jsonpointer.JsonPointer(op["path"]).parts, loc)
    ]


def _schema_error(patch: Patch, exc: ValidationError) -> PatchError:
    """A ``PatchError`` naming each invalid field and the op(s) that wrote there."""
    lines = []
    first_index: int | None = None
    for err in exc.errors():
        # Discriminated unions add the tag to the location; it is not a JSON path element.
        loc = [str(p) for p in err["loc"] if p not in _UNION_TAGS]
        culprits = _culprits(patch, loc)
        if culprits and first_index is None:
            first_index = culprits[0][0]
        who = ", ".join(f"op {i} ({op.get('op')} {op.get('path')})" for i, op in culprits)
        lines.append(
            f"{'.'.join(loc) or '<root>'}: {err['msg']}{got(err)}" + (f" [{who}]" if who else "")
        )
    path = patch.ops[first_index].get("path") if first_index is not None else None
    return PatchError(
        f"patch ({patch.responsibility.value}) breaks the harness schema: " + "; ".join(lines),
        first_index,
        path,
    )


def diff(a: Harness, b: Harness) -> dict[str, list[dict[str, Any]]]:
    """The RFC 6902 patch from ``a`` to ``b``, grouped by responsibility.

    Returns ``{responsibility: [ops]}`` with only the responsibilities that changed; changes
    to the header (name, description) appear under ``"header"``.
    """
    ops = jsonpatch.make_patch(a.to_document(), b.to_document()).patch
    grouped: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        owner = owner_of(op["path"])
        key = owner.value if owner is not None else "header"
        grouped.setdefault(key, []).append(op)
    return grouped


def patches_from_diff(a: Harness, b: Harness) -> list[Patch]:
    """One ``Patch`` per changed responsibility that turns ``a`` into ``b``."""
    return [
        Patch(responsibility=Responsibility(k), ops=v)
        for k, v in diff(a, b).items()
        if k != "header"
    ]
