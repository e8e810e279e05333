"""The harness registry: immutable content-addressed harness documents in object storage,
registrations with lineage, and channels (``dev``, ``staging``, ``prod``, user-defined) that
production clients resolve.

Metadata lives in SQL (SQLAlchemy 2 + Alembic; PostgreSQL in production, SQLite embedded);
harness documents live in an ``evoharness.ports.ArtifactStore`` (S3 in production).

Public API::

    from harness_registry import Registry, open_registry
    from harness_registry.errors import NotFound, StalePromotion, InvalidArgument
"""

from harness_registry.errors import InvalidArgument, NotFound, RegistryError, StalePromotion
from harness_registry.registry import (
    ChannelMove,
    ChannelState,
    HistoryEntry,
    Lineage,
    Registration,
    Registry,
    open_registry,
)

__all__ = [
    "ChannelMove",
    "ChannelState",
    "HistoryEntry",
    "InvalidArgument",
    "Lineage",
    "NotFound",
    "Registration",
    "Registry",
    "RegistryError",
    "StalePromotion",
    "open_registry",
]
