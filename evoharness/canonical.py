"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme) and content hashes.

Key order, number formatting and unicode handling follow RFC 8785 via the ``rfc8785``
library; NaN and Infinity are rejected (they are not JSON).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import rfc8785


class CanonicalJSONError(ValueError):
    """Raised when a value cannot be canonicalised (NaN, Infinity, non-JSON types)."""


def _check(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise CanonicalJSONError(f"{path or '/'}: {value!r} is not allowed in canonical JSON")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise CanonicalJSONError(f"{path or '/'}: object key {k!r} is not a string")
            _check(v, f"{path}/{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check(v, f"{path}/{i}")


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of ``value``.

    Raises ``CanonicalJSONError`` naming the JSON pointer of a NaN/Infinity or non-string key.
    """
    _check(value, "")
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:  # pragma: no cover
        raise CanonicalJSONError(str(exc)) from exc


def sha256_hex(data: bytes) -> str:
    """Lowercase hex sha256 of ``data`` (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """sha256 hex of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
