"""The registry's domain API over SQL metadata and an artifact store.

Content: a harness document is stored once, immutable, at ``harnesses/<harness_id>.json``
(``harness_id`` = sha256 of its RFC 8785 canonical JSON, ``evoharness.harness.io``); skills
are part of that document. Reads verify the sha256, so a tampered blob is detected.

Registrations: ``put(harness, lineage)`` records content + lineage. The registration id is
derived from ``lineage_key`` = sha256(canonical JSON of ``{harness_id, parent_id, patch,
round_report_ref, workflow_id, registered_by}``): putting identical content with identical
lineage returns the existing registration (``created=False``, a no-op, safe for Temporal
activity retries); different lineage gives a new registration of the same content.

Channels: ``promote`` is a compare-and-set on the channel row (``expected_registration_id``
and optionally ``expected_version``); a stale promotion raises ``StalePromotion`` and writes
nothing. Every move is appended to ``channel_events`` in the same transaction, with the
channel's new version (unique per channel), so history is complete and never duplicated.
A channel may split traffic with a canary registration by ``canary_weight`` (0..1).
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evoharness.canonical import canonical_json, sha256_hex
from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import HarnessError, canonical_bytes, harness_id, loads
from evoharness.harness.patch import Patch, diff
from evoharness.harness.schema import Harness
from evoharness.ports import ArtifactStore
from harness_registry.errors import InvalidArgument, NotFound, StalePromotion
from harness_registry.models import (
    ChannelEventRow,
    ChannelRow,
    HarnessContent,
    RegistrationRow,
    utcnow,
)

#: Channel names: lowercase letters, digits, ``-``, ``_``, ``.``; 1–64 characters.
CHANNEL_NAME = re.compile(r"^[a-z0-9][a-z0-9._\-]{0,63}$")
#: The channels every deployment knows; others are created by their first promotion.
STANDARD_CHANNELS = ("dev", "staging", "prod")
BLOB_PREFIX = "harnesses/"


class Lineage(BaseModel):
    """Where a registration comes from. All fields are optional; ``note`` is free text and
    not part of the lineage identity, nor are ``name`` and ``description`` (the
    registration's own name and what it is; empty = the document's name, no description).
    ``generator_id`` / ``generator_capabilities``: the generator deployment the harness was
    validated on (part of the identity when set: the same harness validated on another
    generator is another registration)."""

    model_config = ConfigDict(extra="forbid")

    parent_id: str | None = None
    patch: dict[str, Any] | None = None
    round_report_ref: str = ""
    workflow_id: str = ""
    registered_by: str = ""
    note: str = ""
    generator_id: str = ""
    generator_capabilities: GeneratorCapabilities | None = None
    name: str = Field(default="", max_length=200)
    description: str = ""


class Registration(BaseModel):
    """A registration: content address, lineage, the generator it was validated on ("" /
    None when not recorded) and creation time (aware UTC). ``name``: the registration's own
    name, else (rows before migration 0003, or none given) the harness document's;
    ``description``: what the registration is ("" when none was given)."""

    registration_id: str
    harness_id: str
    name: str
    blob_key: str
    parent_id: str | None = None
    patch: dict[str, Any] | None = None
    round_report_ref: str = ""
    workflow_id: str = ""
    registered_by: str = ""
    note: str = ""
    generator_id: str = ""
    generator_capabilities: GeneratorCapabilities | None = None
    description: str = ""
    created_at: dt.datetime


class ChannelState(BaseModel):
    """What a channel serves: ``registration_id``, and ``canary_registration_id`` for a
    share ``canary_weight`` (0..1) of requests. ``version`` counts moves (1 = first)."""

    channel: str
    registration_id: str
    canary_registration_id: str | None = None
    canary_weight: float = 0.0
    version: int
    updated_at: dt.datetime

    def pick(self, u: float) -> str:
        """The registration serving a request with uniform draw ``u`` in [0, 1): the canary
        when ``u < canary_weight``, else the primary."""
        if self.canary_registration_id and u < self.canary_weight:
            return self.canary_registration_id
        return self.registration_id


class ChannelMove(BaseModel):
    """How a move of a channel is recorded in its history: who made it (``actor``), why
    (``reason``) and what kind of move it is (``action``: ``promote`` or ``rollback``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    actor: str = ""
    reason: str = ""
    action: str = "promote"


class HistoryEntry(BaseModel):
    """One move of a channel."""

    channel: str
    version: int
    action: str
    from_registration_id: str | None
    registration_id: str
    canary_registration_id: str | None = None
    canary_weight: float = 0.0
    actor: str = ""
    reason: str = ""
    created_at: dt.datetime


class PutResult(BaseModel):
    """``put``'s answer: the registration and whether this call created it."""

    registration: Registration
    created: bool = Field(description="False when identical content + lineage existed")


def lineage_key(hid: str, lineage: Lineage) -> str:
    """sha256 of the canonical JSON of the content address and the lineage (``note`` left
    out, as are ``name`` and ``description``; the validation generator only when recorded, so
    keys from before migration 0002 are unchanged)."""
    exclude = {"note", "name", "description"}
    if not lineage.generator_id and lineage.generator_capabilities is None:
        exclude |= {"generator_id", "generator_capabilities"}
    doc = lineage.model_dump(mode="json", exclude=exclude)
    doc["harness_id"] = hid
    return sha256_hex(canonical_json(doc))


def _registration(row: RegistrationRow, content: HarnessContent) -> Registration:
    return Registration(
        registration_id=row.registration_id,
        harness_id=row.harness_id,
        name=row.name or content.name,
        description=row.description or "",
        blob_key=content.blob_key,
        parent_id=row.parent_id,
        patch=row.patch,
        round_report_ref=row.round_report_ref,
        workflow_id=row.workflow_id,
        registered_by=row.registered_by,
        note=row.note,
        generator_id=row.generator_id or "",
        generator_capabilities=(
            GeneratorCapabilities.model_validate(row.generator_capabilities)
            if row.generator_capabilities is not None
            else None
        ),
        created_at=row.created_at,
    )


def _channel_state(row: ChannelRow) -> ChannelState:
    return ChannelState(
        channel=row.name,
        registration_id=row.registration_id,
        canary_registration_id=row.canary_registration_id,
        canary_weight=row.canary_weight,
        version=row.version,
        updated_at=row.updated_at,
    )


def check_channel_name(channel: str) -> str:
    """Return ``channel`` or raise ``InvalidArgument`` naming the rule it breaks."""
    if not isinstance(channel, str) or not CHANNEL_NAME.match(channel):
        raise InvalidArgument(f"channel: {channel!r} must match {CHANNEL_NAME.pattern}")
    return channel


class Registry:
    """Registrations and channels over ``engine`` (migrated to head) and ``store``.

    Thread-safe: each call uses its own session/transaction.
    """

    def __init__(self, engine: Engine, store: ArtifactStore) -> None:
        self.engine = engine
        self.store = store

    # ------------------------------------------------------------------------- content
    def put_content(self, harness: Harness) -> HarnessContent:
        """Store the document blob (idempotent) and its content row; return the row."""
        data = canonical_bytes(harness)
        hid = harness_id(harness)
        key = f"{BLOB_PREFIX}{hid}.json"
        if not self.store.exists(key):
            self.store.put(key, data, "application/json")
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(HarnessContent, hid)
            if row is not None:
                return row
            row = HarnessContent(
                harness_id=hid, name=harness.name, blob_key=key, size_bytes=len(data)
            )
            s.add(row)
            try:
                s.commit()
            except IntegrityError:  # a concurrent put stored it first
                s.rollback()
                got = s.get(HarnessContent, hid)
                assert got is not None
                return got
            return row

    def get_harness(self, ref: str) -> Harness:
        """The harness document of a registration id or harness id (sha256 verified).

        Raises ``NotFound`` when neither exists, ``HarnessError`` when the stored blob does
        not hash to its address.
        """
        with Session(self.engine) as s:
            content = s.get(HarnessContent, ref)
            if content is None:
                reg = s.get(RegistrationRow, ref)
                if reg is None:
                    raise NotFound(f"no registration or harness {ref!r}")
                content = s.get(HarnessContent, reg.harness_id)
                assert content is not None
            hid, key = content.harness_id, content.blob_key
        try:
            data = self.store.get(key)
        except KeyError as exc:
            raise NotFound(f"harness {hid}: blob {key!r} is missing from the store") from exc
        if sha256_hex(data) != hid:
            raise HarnessError(f"{key}: content does not hash to {hid} (corrupted blob)")
        return loads(data, source=key)

    # ------------------------------------------------------------------- registrations
    def put(self, harness: Harness, lineage: Lineage | None = None) -> PutResult:
        """Register ``harness`` with ``lineage``.

        Identical content + lineage → the existing registration (``created=False``).
        Raises ``NotFound`` for an unknown parent, ``InvalidArgument`` for a patch that is
        not a valid ``Patch``.
        """
        lineage = lineage or Lineage()
        if lineage.patch is not None:
            try:
                Patch.model_validate(lineage.patch)
            except ValueError as exc:
                raise InvalidArgument(f"lineage.patch: {exc}") from None
        content = self.put_content(harness)
        key = lineage_key(content.harness_id, lineage)
        reg_id = f"reg-{key[:24]}"
        with Session(self.engine, expire_on_commit=False) as s:
            existing = s.scalar(select(RegistrationRow).where(RegistrationRow.lineage_key == key))
            if existing is not None:
                return PutResult(registration=_registration(existing, content), created=False)
            if lineage.parent_id is not None and s.get(RegistrationRow, lineage.parent_id) is None:
                raise NotFound(f"lineage.parent_id: no registration {lineage.parent_id!r}")
            row = RegistrationRow(
                registration_id=reg_id,
                harness_id=content.harness_id,
                parent_id=lineage.parent_id,
                patch=lineage.patch,
                round_report_ref=lineage.round_report_ref,
                workflow_id=lineage.workflow_id,
                registered_by=lineage.registered_by,
                note=lineage.note,
                name=lineage.name or None,
                description=lineage.description or None,
                generator_id=lineage.generator_id,
                generator_capabilities=(
                    lineage.generator_capabilities.model_dump(mode="json")
                    if lineage.generator_capabilities is not None
                    else None
                ),
                lineage_key=key,
                created_at=utcnow(),
            )
            s.add(row)
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                existing = s.scalar(
                    select(RegistrationRow).where(RegistrationRow.lineage_key == key)
                )
                if existing is None:
                    raise
                return PutResult(registration=_registration(existing, content), created=False)
            return PutResult(registration=_registration(row, content), created=True)

    def get(self, registration_id: str) -> Registration:
        """The registration; ``NotFound`` naming the id when missing."""
        with Session(self.engine) as s:
            row = s.get(RegistrationRow, registration_id)
            if row is None:
                raise NotFound(f"no registration {registration_id!r}")
            content = s.get(HarnessContent, row.harness_id)
            assert content is not None
            return _registration(row, content)

    def list(
        self,
        *,
        harness_id: str | None = None,
        parent_id: str | None = None,
        workflow_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Registration]:
        """Registrations, newest first, filtered by the given fields."""
        if limit < 1 or offset < 0:
            raise InvalidArgument(f"limit must be >= 1 and offset >= 0 (got {limit}, {offset})")
        stmt = select(RegistrationRow, HarnessContent).join(
            HarnessContent, HarnessContent.harness_id == RegistrationRow.harness_id
        )
        if harness_id:
            stmt = stmt.where(RegistrationRow.harness_id == harness_id)
        if parent_id:
            stmt = stmt.where(RegistrationRow.parent_id == parent_id)
        if workflow_id:
            stmt = stmt.where(RegistrationRow.workflow_id == workflow_id)
        stmt = stmt.order_by(
            RegistrationRow.created_at.desc(), RegistrationRow.registration_id.desc()
        )
        stmt = stmt.limit(limit).offset(offset)
        with Session(self.engine) as s:
            return [_registration(r, c) for r, c in s.execute(stmt).all()]

    def diff(self, a: str, b: str) -> dict[str, builtins.list[dict[str, Any]]]:
        """RFC 6902 ops from registration (or harness) ``a`` to ``b``, grouped by
        responsibility (``evoharness.harness.patch.diff``)."""
        return diff(self.get_harness(a), self.get_harness(b))

    # ------------------------------------------------------------------------ channels
    def resolve(self, channel: str) -> ChannelState:
        """What ``channel`` serves now; ``NotFound`` when it was never promoted to."""
        check_channel_name(channel)
        with Session(self.engine) as s:
            row = s.get(ChannelRow, channel)
            if row is None:
                raise _never_promoted(s, channel)
            return _channel_state(row)

    def channels(self) -> builtins.list[ChannelState]:
        """Every channel, by name."""
        with Session(self.engine) as s:
            rows = s.scalars(select(ChannelRow).order_by(ChannelRow.name)).all()
            return [_channel_state(r) for r in rows]

    def history(self, channel: str, limit: int = 1000) -> builtins.list[HistoryEntry]:
        """Every move of ``channel``, newest first (at most ``limit``); ``NotFound`` when it
        was never promoted to (as ``resolve``)."""
        check_channel_name(channel)
        stmt = (
            select(ChannelEventRow)
            .where(ChannelEventRow.channel == channel)
            .order_by(ChannelEventRow.version.desc())
            .limit(limit)
        )
        with Session(self.engine) as s:
            events = s.scalars(stmt).all()
            if not events and s.get(ChannelRow, channel) is None:
                raise _never_promoted(s, channel)
            return [
                HistoryEntry(
                    channel=e.channel,
                    version=e.version,
                    action=e.action,
                    from_registration_id=e.from_registration_id,
                    registration_id=e.registration_id,
                    canary_registration_id=e.canary_registration_id,
                    canary_weight=e.canary_weight,
                    actor=e.actor,
                    reason=e.reason,
                    created_at=e.created_at,
                )
                for e in events
            ]

    def promote(
        self,
        channel: str,
        registration_id: str,
        *,
        expected_registration_id: str | None,
        expected_version: int | None = None,
        canary_registration_id: str | None = None,
        canary_weight: float = 0.0,
        move: ChannelMove | None = None,
    ) -> ChannelState:
        """Point ``channel`` at ``registration_id`` (optionally with a canary), if and only if
        it currently points at ``expected_registration_id`` (None or "": the channel must not
        exist yet) and, when given, its version is ``expected_version``. ``move``: who, why
        and which action the history records (``ChannelMove``; None: a ``promote`` by no one
        in particular).

        Raises ``StalePromotion`` (nothing written) when the expectation does not hold,
        ``NotFound`` for an unknown registration, ``InvalidArgument`` for a bad channel name
        or canary (weight outside [0, 1], a weight without a canary, a canary with weight 0 —
        a canary's share is in (0, 1] —, canary == primary).
        """
        check_channel_name(channel)
        m = move or ChannelMove()
        actor, reason, action = m.actor, m.reason, m.action
        expected = expected_registration_id or None
        canary = canary_registration_id or None
        if not 0.0 <= canary_weight <= 1.0:
            raise InvalidArgument(f"canary_weight: {canary_weight} is outside [0, 1]")
        if canary is None and canary_weight > 0:
            raise InvalidArgument("canary_weight > 0 needs canary_registration_id")
        if canary is not None and canary_weight == 0:
            raise InvalidArgument(
                "canary_weight: 0 would serve the canary no request; with a canary give a "
                "share in (0, 1]"
            )
        if canary is not None and canary == registration_id:
            raise InvalidArgument("canary_registration_id equals registration_id")
        if canary is None:
            canary_weight = 0.0
        now = utcnow()
        with Session(self.engine, expire_on_commit=False) as s:
            for rid, field in ((registration_id, "registration_id"), (canary, "canary")):
                if rid is not None and s.get(RegistrationRow, rid) is None:
                    raise NotFound(f"{field}: no registration {rid!r}")
            current = s.get(ChannelRow, channel)
            if current is None:
                if expected is not None or expected_version not in (None, 0):
                    s.rollback()
                    raise self._stale(channel, expected, expected_version)
                s.add(
                    ChannelRow(
                        name=channel,
                        registration_id=registration_id,
                        canary_registration_id=canary,
                        canary_weight=canary_weight,
                        version=1,
                        updated_at=now,
                    )
                )
                new_version = 1
                try:
                    s.flush()
                except IntegrityError:
                    s.rollback()
                    raise self._stale(channel, expected, expected_version) from None
            else:
                cond = [ChannelRow.name == channel]
                if expected is None:
                    s.rollback()
                    raise self._stale(channel, expected, expected_version)
                cond.append(ChannelRow.registration_id == expected)
                if expected_version is not None:
                    cond.append(ChannelRow.version == expected_version)
                res = s.execute(
                    update(ChannelRow)
                    .where(*cond)
                    .values(
                        registration_id=registration_id,
                        canary_registration_id=canary,
                        canary_weight=canary_weight,
                        version=ChannelRow.version + 1,
                        updated_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
                if res.rowcount != 1:  # type: ignore[attr-defined]
                    s.rollback()
                    raise self._stale(channel, expected, expected_version)
                got_version = s.scalar(select(ChannelRow.version).where(ChannelRow.name == channel))
                assert got_version is not None
                new_version = got_version
            s.add(
                ChannelEventRow(
                    channel=channel,
                    version=new_version,
                    action=action,
                    from_registration_id=expected,
                    registration_id=registration_id,
                    canary_registration_id=canary,
                    canary_weight=canary_weight,
                    actor=actor,
                    reason=reason,
                    created_at=now,
                )
            )
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                raise self._stale(channel, expected, expected_version) from None
        return ChannelState(
            channel=channel,
            registration_id=registration_id,
            canary_registration_id=canary,
            canary_weight=canary_weight,
            version=new_version,
            updated_at=now,
        )

    def rollback(
        self,
        channel: str,
        *,
        expected_registration_id: str | None,
        actor: str = "",
        reason: str = "",
    ) -> ChannelState:
        """Promote the registration the channel served before its current one (action
        ``rollback``), walking back one step further with each call: the channel's moves are
        replayed as a stack (a promotion to another registration pushes it, a rollback pops
        one), so after A → B → C a first rollback serves B and a second A — not C again.
        ``expected_registration_id`` guards the move as in ``promote`` (``None``: the channel's
        version read here is still checked, not what it serves). Raises ``NotFound`` when there
        is no earlier registration, and ``StalePromotion`` as ``promote`` does."""
        entries = self.history(channel, limit=1_000_000)
        stack: list[str] = []
        for e in reversed(entries):  # oldest first
            if e.action == "rollback":
                if stack:
                    stack.pop()
                if not stack or stack[-1] != e.registration_id:
                    stack.append(e.registration_id)  # history older than the stack's start
            elif not stack or stack[-1] != e.registration_id:  # a canary move is no step
                stack.append(e.registration_id)
        if len(stack) < 2:
            raise NotFound(f"channel {channel!r} has no earlier registration to roll back to")
        return self.promote(
            channel,
            stack[-2],
            expected_registration_id=expected_registration_id,
            expected_version=entries[0].version,
            move=ChannelMove(
                actor=actor,
                reason=reason or f"rollback of version {entries[0].version}",
                action="rollback",
            ),
        )

    def _stale(
        self, channel: str, expected: str | None, expected_version: int | None
    ) -> StalePromotion:
        with Session(self.engine) as s:
            row = s.get(ChannelRow, channel)
            cur_id = row.registration_id if row else None
            cur_ver = row.version if row else 0
        want = f"registration {expected!r}" + (
            f" at version {expected_version}" if expected_version is not None else ""
        )
        return StalePromotion(
            f"stale promotion of channel {channel!r}: expected {want}, but it serves "
            f"{cur_id!r} at version {cur_ver}",
            cur_id,
            cur_ver,
        )

    def count(self) -> dict[str, int]:
        """Row counts per table (for tests and ``registry`` diagnostics)."""
        with Session(self.engine) as s:
            return {
                t.__tablename__: int(s.scalar(select(func.count()).select_from(t)) or 0)
                for t in (HarnessContent, RegistrationRow, ChannelRow, ChannelEventRow)
            }


def _never_promoted(s: Session, channel: str) -> NotFound:
    """``NotFound`` for a ``channel`` never promoted to, naming the channels there are (so a
    misspelt name shows the right one, over the gRPC service too)."""
    known = s.scalars(select(ChannelRow.name).order_by(ChannelRow.name)).all()
    there = f"channels: {', '.join(known)}" if known else "no channel has been promoted to yet"
    return NotFound(f"channel {channel!r} has no registration (never promoted); {there}")


def open_registry(
    database_url: str | None = None,
    store: ArtifactStore | None = None,
    *,
    migrate: bool = True,
) -> Registry:
    """A ``Registry`` on ``database_url`` (default ``harness_registry.db.default_url()``),
    migrated to head when ``migrate``; ``store`` defaults to a ``LocalArtifactStore`` under
    ``$EVOHARNESS_HOME/blobs``."""
    from evoharness.local_store import LocalArtifactStore
    from harness_registry.db import DEFAULT_HOME, make_engine, upgrade

    engine = make_engine(database_url)
    if migrate:
        upgrade(engine)
    return Registry(engine, store or LocalArtifactStore(DEFAULT_HOME / "blobs"))


def registrations_of(entries: Sequence[HistoryEntry]) -> builtins.list[str]:
    """Registration ids of history entries, oldest first."""
    return [e.registration_id for e in sorted(entries, key=lambda e: e.version)]
