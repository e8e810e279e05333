"""SQLAlchemy 2 models of the registry's metadata.

Tables (constraint names follow ``NAMING_CONVENTION``, the same as the first migration):

- ``harness_contents``: one row per content-addressed harness document (the blob is in the
  artifact store at ``blob_key``).
- ``registrations``: a registration of some content with its lineage (parent registration,
  patch, round report ref, workflow id, registered_by, created_at) and the generator it was
  validated on (``generator_id``, ``generator_capabilities``; migration 0002), and a name and
  description of its own (``name``, ``description``; migration 0003; NULL = the document's
  name and no description, as for rows written before it). ``lineage_key`` is the
  sha256 of the canonical JSON of content + lineage and is unique: registering identical
  content with identical lineage returns the existing row.
- ``channels``: a named pointer at a registration, optionally splitting traffic with a canary
  registration (``canary_weight`` = share of requests, 0..1, served by the canary). ``version``
  counts moves and is the optimistic-concurrency token.
- ``channel_events``: every move of every channel (append-only history); ``(channel,
  version)`` is unique, so two moves can never claim the same version.

Times are timezone-aware UTC on every backend (``UTCDateTime``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

#: Constraint naming convention (SQLAlchemy docs, "Configuring Constraint Naming Conventions").
#: Migration 0001 creates every constraint with these names, so later migrations can drop
#: or alter them by name on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    """The current time, timezone-aware in UTC."""
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A ``DateTime(timezone=True)`` that only accepts aware datetimes, stores them in UTC and
    always returns aware UTC datetimes (SQLite keeps no zone, so one is attached on read).

    Raises ``ValueError`` for a naive datetime (its zone would be a guess).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: registry times must be timezone-aware")
        value = value.astimezone(dt.UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    """Declarative base with the registry's naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class HarnessContent(Base):
    """A content-addressed harness document (``harness_id`` = sha256 of its canonical JSON)."""

    __tablename__ = "harness_contents"

    harness_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    blob_key: Mapped[str] = mapped_column(String(500), nullable=False)
    size_bytes: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), nullable=False, default=utcnow)


class RegistrationRow(Base):
    """One registration of a harness document, with its lineage."""

    __tablename__ = "registrations"

    registration_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    harness_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("harness_contents.harness_id"), nullable=False, index=True
    )
    parent_id: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("registrations.registration_id"), nullable=True, index=True
    )
    patch: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    round_report_ref: Mapped[str] = mapped_column(String(500), nullable=False, default="")
    workflow_id: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    registered_by: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    lineage_key: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(
        UTCDateTime(), nullable=False, default=utcnow, index=True
    )
    #: the generator the harness was validated on ("" / NULL: not recorded)
    generator_id: Mapped[str] = mapped_column(
        String(300), nullable=False, default="", server_default=""
    )
    generator_capabilities: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: the registration's own name (an evolved harness: ``<start>+<run>.r<round>``); NULL =
    #: the harness document's name
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: what this registration is (run, round, accepted patch); NULL = none recorded
    description: Mapped[str | None] = mapped_column(Text, nullable=True)


class ChannelRow(Base):
    """A channel: the registration it serves, and an optional canary split."""

    __tablename__ = "channels"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    registration_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("registrations.registration_id"), nullable=False
    )
    canary_registration_id: Mapped[str | None] = mapped_column(
        String(64), ForeignKey("registrations.registration_id"), nullable=True
    )
    canary_weight: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), nullable=False, default=utcnow)


class ChannelEventRow(Base):
    """One move of a channel (append-only). ``version`` is the channel's version after it."""

    __tablename__ = "channel_events"
    __table_args__ = (
        UniqueConstraint("channel", "version"),
        Index(None, "channel", "created_at"),
    )

    event_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(64), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    action: Mapped[str] = mapped_column(String(32), nullable=False)
    from_registration_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    registration_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("registrations.registration_id"), nullable=False
    )
    canary_registration_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    canary_weight: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    actor: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    reason: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), nullable=False, default=utcnow)
