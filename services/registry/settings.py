"""Settings of the registry service (``configs/registry.yaml``; environment overrides
``EVOHARNESS_REGISTRY__DATABASE_URL`` etc.)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.common.settings import ServiceSettings


class RegistrySection(BaseModel):
    """``database_url``: SQLAlchemy URL (``postgresql://...`` in production; empty = the
    embedded SQLite file ``$EVOHARNESS_HOME/registry.db``). ``blob_store``: ``s3`` (the
    ``s3`` section) or ``local`` (files under ``local_root``, embedded use).
    ``migrate``: run Alembic upgrade to head at start."""

    model_config = ConfigDict(extra="forbid")

    database_url: str = ""
    blob_store: Literal["s3", "local"] = "s3"
    local_root: str = ""
    migrate: bool = True


class RegistrySettings(ServiceSettings):
    """Registry service settings: ``server``, ``s3`` and ``registry`` sections."""

    registry: RegistrySection = Field(default_factory=RegistrySection)
