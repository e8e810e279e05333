"""Reading an untrusted JSON answer of an LLM (or any remote backend): the first checks of
``evoharness.trace.answers`` (size, JSON, "is an object"), shared by every reader of such
answers — the proposer roles (``evoharness.trace.answers``, which re-exports these names),
the agent's final answer (``evoharness.agent.program.validate_final``) and the VLM verifier's
and KScore judge's answers (``services.verification.backends.vlm.read_answer``).

A module of its own, below ``answers``, because ``answers`` imports the runtime (its compile
check), and the runtime imports the agent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from evoharness.trace.answer_models import DEFAULT_LIMITS, AnswerLimits

#: One Markdown code fence around a whole answer, with or without a language tag (``json``,
#: ``JSON`` …), the answer on its own lines or on the fence's line (```` ```{"a": 1}``` ````).
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*(.*?)\s*```\s*$", re.DOTALL)


class AnswerRejected(Exception):
    """An untrusted answer failed a check: ``reason`` is one of ``REASONS`` (``too_large``,
    ``invalid_json``, ``schema`` …; see ``evoharness.trace.answers``), ``detail`` a
    human-readable message naming the field or limit."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_shape(value: Any, limits: AnswerLimits, where: str = "$", depth: int = 0) -> None:
    """Reject strings over ``max_string`` and nesting over ``max_depth`` (iterative bound on
    recursion: depth is checked before descending)."""
    if depth > limits.max_depth:
        raise AnswerRejected("too_large", f"{where}: JSON nesting deeper than {limits.max_depth}")
    if isinstance(value, str):
        if len(value) > limits.max_string:
            raise AnswerRejected(
                "too_large",
                f"{where}: string of {len(value)} characters (limit {limits.max_string})",
            )
    elif isinstance(value, dict):
        if len(value) > 10_000:
            raise AnswerRejected("too_large", f"{where}: object with {len(value)} members")
        for k, v in value.items():
            if not isinstance(k, str):
                raise AnswerRejected("schema", f"{where}: object key {k!r} is not a string")
            if len(k) > limits.max_string:
                raise AnswerRejected("too_large", f"{where}: object key of {len(k)} characters")
            _check_shape(v, limits, f"{where}.{k[:40]}", depth + 1)
    elif isinstance(value, list):
        if len(value) > 10_000:
            raise AnswerRejected("too_large", f"{where}: array with {len(value)} elements")
        for i, v in enumerate(value):
            _check_shape(v, limits, f"{where}[{i}]", depth + 1)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise AnswerRejected("invalid_json", f"{where}: NaN/Infinity is not JSON")
    elif value is None or isinstance(value, bool | int):
        pass
    else:
        raise AnswerRejected("schema", f"{where}: {type(value).__name__} is not a JSON value")


def load_answer(
    raw: str | bytes | dict[str, Any] | Any, limits: AnswerLimits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """An untrusted LLM answer parsed and size-checked into a JSON object (checks 1-2 of
    ``evoharness.trace.answers``, and "is an object" of 3).

    ``raw``: the answer text (``str``, or UTF-8 ``bytes``), optionally inside one Markdown
    code fence, or an already decoded value. ``limits``: ``max_raw_chars`` on the text (or on
    the value's JSON encoding), ``max_string`` on every string, ``max_depth`` on nesting.

    Returns the decoded object. Raises ``AnswerRejected`` with reason ``too_large`` (over a
    limit), ``invalid_json`` (not UTF-8, not JSON, ``NaN``/``Infinity``, not a JSON value) or
    ``schema`` (not an object, a non-string key). Validating the object against a model is the
    caller's (``schema_error_detail`` words a pydantic error).
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnswerRejected("invalid_json", f"answer is not UTF-8: {exc}") from None
    if isinstance(raw, str):
        if len(raw) > limits.max_raw_chars:
            raise AnswerRejected(
                "too_large", f"answer has {len(raw)} characters (limit {limits.max_raw_chars})"
            )
        text = raw
        m = _FENCE.match(text)
        if m:
            text = m.group(1)
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise AnswerRejected("too_large", "JSON nesting too deep to parse") from None
        except (json.JSONDecodeError, ValueError) as exc:
            raise AnswerRejected("invalid_json", f"answer is not valid JSON: {exc}") from None
    else:
        value = raw
        try:
            size = len(json.dumps(value, allow_nan=False, default=_reject_constant))
        except RecursionError:
            raise AnswerRejected("too_large", "answer nesting too deep") from None
        except (TypeError, ValueError) as exc:
            raise AnswerRejected("invalid_json", f"answer is not a JSON value: {exc}") from None
        if size > limits.max_raw_chars:
            raise AnswerRejected(
                "too_large", f"answer has {size} characters as JSON (limit {limits.max_raw_chars})"
            )
    _check_shape(value, limits)
    if not isinstance(value, dict):
        raise AnswerRejected("schema", f"answer must be a JSON object, got {type(value).__name__}")
    return value


def schema_error_detail(exc: ValidationError) -> str:
    """A pydantic ``ValidationError`` of an answer in one line: the first error's location
    (dotted, ``<root>`` for the whole object) and message, and how many more there are
    (``"patches.0.ops: Field required (+2 more)"``)."""
    errs = exc.errors()
    first = errs[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<root>"
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{loc}: {first['msg']}{more}"


__all__ = ["AnswerRejected", "load_answer", "schema_error_detail"]
