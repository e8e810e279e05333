"""Sampled production traffic (issue 34): what one served Render leaves behind, where it is
stored, and the filter that keeps personal data out.

A ``TrafficRecord`` is one sampled Render: the prompt, the constraints the serving harness read
from it, the verdict per constraint, the generations it used and the harness version that
served it — never the client's identity (the runtime has none to give: no peer address, token
or metadata is read). Records are written in JSON Lines batches under::

    <prefix>/<channel>/<YYYY-MM-DD>/<HHMMSS.ffffff>-<8 hex>.jsonl     (UTC day of the record)

so a reader lists one channel's days with a key prefix (``day_prefix``) and a retention rule can
expire whole days.

``PromptFilter`` drops a prompt that is longer than a limit or matches a redaction pattern
(default: e-mail addresses and phone numbers); a dropped prompt is counted by the caller with
its reason (``too_long``, ``redacted``), never stored.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoharness.tasks.models import Constraint

#: Default redaction patterns: an e-mail address (RFC 5322's common form, simplified as in
#: most log scrubbers) and a phone number (7 or more digits with the usual separators, an
#: optional leading ``+``; E.164 numbers have at most 15 digits).
DEFAULT_REDACT_PATTERNS: tuple[str, ...] = (
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
    r"(?<!\w)\+?\d(?:[\s().-]*\d){6,14}(?!\w)",
)


class TrafficVerdict(BaseModel):
    """One constraint's verdict on the served image (``pass``, ``fail`` or ``uncertain``)."""

    model_config = ConfigDict(extra="forbid")

    constraint_id: str
    type: str
    status: Literal["pass", "fail", "uncertain"]


class TrafficRecord(BaseModel):
    """One sampled Render. ``time`` is UTC; ``generations`` counts generator calls the request
    made (best-of-N and repairs included), ``generator_seconds`` their time."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    time: dt.datetime
    channel: str = Field(min_length=1)
    registration_id: str
    harness_id: str
    prompt: str = Field(min_length=1)
    constraints: list[Constraint] = Field(default_factory=list)
    verdicts: list[TrafficVerdict] = Field(default_factory=list)
    generations: int = Field(default=0, ge=0)
    generator_seconds: float = Field(default=0.0, ge=0)

    @property
    def day(self) -> str:
        """The record's UTC day, ``YYYY-MM-DD``."""
        return self.time.astimezone(dt.UTC).strftime("%Y-%m-%d")


class TrafficReadError(ValueError):
    """A stored traffic batch that cannot be read (names the key and line)."""


class PromptFilter:
    """Decides whether a prompt may be stored: ``reason(prompt)`` is None (keep), ``"too_long"``
    (more than ``max_chars`` characters) or ``"redacted"`` (a pattern matched). Patterns are
    Python regular expressions; a bad one raises ``ValueError`` naming it."""

    def __init__(self, max_chars: int, patterns: Sequence[str] = DEFAULT_REDACT_PATTERNS) -> None:
        self.max_chars = max_chars
        compiled = []
        for i, p in enumerate(patterns):
            try:
                compiled.append(re.compile(p))
            except re.error as exc:
                raise ValueError(
                    f"redact_patterns[{i}] {p!r}: not a regular expression: {exc}"
                ) from None
        self._patterns = compiled

    def reason(self, prompt: str) -> str | None:
        """Why ``prompt`` must not be stored, or None."""
        if len(prompt) > self.max_chars:
            return "too_long"
        if any(p.search(prompt) for p in self._patterns):
            return "redacted"
        return None


def day_prefix(prefix: str, channel: str, day: str) -> str:
    """The key prefix of one channel's records of one UTC day (``YYYY-MM-DD``)."""
    return f"{prefix}/{channel}/{day}/"


def batch_key(prefix: str, channel: str, when: dt.datetime) -> str:
    """A fresh key for a batch of ``channel``'s records of ``when``'s UTC day."""
    t = when.astimezone(dt.UTC)
    return f"{day_prefix(prefix, channel, t.strftime('%Y-%m-%d'))}{t.strftime('%H%M%S.%f')}-{secrets.token_hex(4)}.jsonl"


def dump_batch(records: Iterable[TrafficRecord]) -> bytes:
    """Records as JSON Lines (UTF-8, one record per line)."""
    return "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8")


def load_batch(data: bytes, key: str) -> list[TrafficRecord]:
    """The records of one stored batch. Raises ``TrafficReadError`` naming ``key`` and the
    line of the first record that is not valid JSON or not a ``TrafficRecord``."""
    out: list[TrafficRecord] = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(TrafficRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TrafficReadError(f"{key}:{n}: not a traffic record: {first}") from None
    return out


class ListingStore(Protocol):
    """The part of an artifact store traffic reading needs (S3 or local)."""

    def list_keys(self, prefix: str = "") -> list[str]: ...

    def get(self, key: str) -> bytes: ...


def reference_key(prefix: str, channel: str) -> str:
    """Where the profile of the tasks ``channel``'s serving harness was evolved on is kept
    (``evoharness.traffic.drift.TrafficProfile`` as JSON)."""
    return f"{prefix}/{channel}/reference.json"


def read_window(
    store: ListingStore, prefix: str, channel: str, since: dt.date, until: dt.date
) -> tuple[list[TrafficRecord], int]:
    """Every record of ``channel`` stored for the UTC days ``since`` .. ``until`` (inclusive)
    and the number of batches read. Raises ``ValueError`` when ``until`` is before ``since`` and
    ``TrafficReadError`` for a batch that cannot be read."""
    if until < since:
        raise ValueError(f"--until {until} is before --since {since}")
    records: list[TrafficRecord] = []
    batches = 0
    day = since
    while day <= until:
        for key in store.list_keys(day_prefix(prefix, channel, day.isoformat())):
            if key.endswith(".jsonl"):
                records.extend(load_batch(store.get(key), key))
                batches += 1
        day += dt.timedelta(days=1)
    records.sort(key=lambda r: r.time)
    return records, batches
