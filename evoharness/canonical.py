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


#: RFC 8785 numbers are IEEE 754 doubles; integers beyond +-(2**53 - 1) are not all exact.
_INT_LIMIT = 2**53 - 1


def _prepare(value: Any, path: str) -> Any:
    """Check ``value`` and return it ready for ``rfc8785``: NaN/Infinity and non-string keys
    raise; an integer beyond +-(2**53 - 1) whose digits are exactly the canonical text of a
    double (e.g. 9007199254740992 or 29923679924710090, what Python's JSON parser returns
    for the canonical text of those floats) becomes that double, so canonical text always
    loads back to the same canonical text; any other such integer would change when parsed
    and raises (RFC 8785 section 3.2.2.3, I-JSON)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if -_INT_LIMIT <= value <= _INT_LIMIT:
            return value
        as_float = float(value) if abs(value) < 2**1024 else math.inf
        if math.isfinite(as_float) and rfc8785.dumps(as_float) == str(value).encode("ascii"):
            return as_float
        raise CanonicalJSONError(
            f"{path or '/'}: integer {value} is not the canonical form of an IEEE 754 double "
            "(RFC 8785 numbers); it would change when parsed"
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJSONError(f"{path or '/'}: {value!r} is not allowed in canonical JSON")
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise CanonicalJSONError(f"{path or '/'}: object key {k!r} is not a string")
            out[k] = _prepare(v, f"{path}/{k}")
        return out
    if isinstance(value, list | tuple):
        return [_prepare(v, f"{path}/{i}") for i, v in enumerate(value)]
    raise CanonicalJSONError(f"{path or '/'}: {type(value).__name__} is not a JSON type")


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of ``value``.

    Raises ``CanonicalJSONError`` naming the JSON pointer of a NaN/Infinity, a non-string key,
    a non-JSON type, or an integer no IEEE 754 double holds exactly.
    """
    prepared = _prepare(value, "")
    try:
        return rfc8785.dumps(prepared)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:  # pragma: no cover
        raise CanonicalJSONError(str(exc)) from exc


def sha256_hex(data: bytes) -> str:
    """Lowercase hex sha256 of ``data`` (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """sha256 hex of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))
