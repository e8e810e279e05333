"""Settings of the registry service (``configs/registry.yaml``; environment overrides
``EVOHARNESS_REGISTRY__DATABASE_URL`` etc.)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.trace.models import DEFAULT_SEEDS
from services.common.settings import ServiceSettings


class PostPromotionSection(BaseModel):
    """Start ``workflows.postpromotion.PostPromotionWorkflow`` after every successful
    promotion, when ``temporal_address`` and ``preservation_uri`` (``file://`` or ``s3://``
    JSONL of tasks) are set. ``generator``/``verifier``: worker backend names (``grpc`` =
    the services, ``sim`` = embedded)."""

    model_config = ConfigDict(extra="forbid")

    temporal_address: str = ""
    namespace: str = "default"
    task_queue: str = "evoharness"
    preservation_uri: str = ""
    seeds: list[int] = Field(default_factory=lambda: list(DEFAULT_SEEDS), min_length=1)
    generator: str = "grpc"
    verifier: str = "grpc"

    @property
    def enabled(self) -> bool:
        """True when both the Temporal address and the preservation split are set."""
        return bool(self.temporal_address and self.preservation_uri)


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
    postpromotion: PostPromotionSection = Field(default_factory=PostPromotionSection)


class RegistrySettings(ServiceSettings):
    """Registry service settings: ``server``, ``s3`` and ``registry`` sections."""

    registry: RegistrySection = Field(default_factory=RegistrySection)
