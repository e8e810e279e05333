"""Service settings: YAML files in ``configs/`` loaded with pydantic-settings, overridable by
environment variables (``EVOHARNESS_<SECTION>__<FIELD>``), secrets only from the environment.

Precedence (highest first): explicit keyword arguments, environment variables, the YAML file
named by ``EVOHARNESS_CONFIG`` (or passed to ``load_settings``), field defaults.

Example::

    EVOHARNESS_SERVER__PORT=50051 EVOHARNESS_S3__ENDPOINT=127.0.0.1:9000 \\
    EVOHARNESS_S3__ACCESS_KEY=... EVOHARNESS_S3__SECRET_KEY=... evoharness serve generation

Secrets (S3 secret key, bearer token, OpenAI API key) are ``SecretStr`` fields excluded from
YAML: ``load_settings`` raises ``ValueError`` when a YAML file sets one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

ENV_PREFIX = "EVOHARNESS_"


#: Dotted field paths that must never come from a YAML file (secrets: environment only).
SECRET_FIELDS = ("s3.secret_key", "s3.access_key", "server.auth_token", "openai.api_key")


class S3Settings(BaseModel):
    """Where the artifact store lives.

    ``endpoint``: ``host:port`` without scheme (minio client convention). ``secure``: HTTPS.
    ``access_key``/``secret_key``: credentials, from the environment only
    (``EVOHARNESS_S3__ACCESS_KEY`` / ``EVOHARNESS_S3__SECRET_KEY``). ``bucket``: the artifact
    bucket, created on first use. ``region``: sent in signatures (MinIO default us-east-1).
    ``public_endpoint`` (``host:port``), ``public_secure``, ``public_region``: where clients
    *outside* the cluster reach the same store; used only to sign presigned URLs (a SigV4
    signature covers the host, so a URL signed for the in-cluster host and rewritten to the
    public one is refused with 403). Unset: URLs are signed for ``endpoint``.
    """

    model_config = ConfigDict(extra="forbid")

    endpoint: str = "127.0.0.1:9000"
    access_key: SecretStr = SecretStr("")
    secret_key: SecretStr = SecretStr("")
    secure: bool = False
    bucket: str = "evoharness"
    region: str = "us-east-1"
    ca_file: str | None = None
    public_endpoint: str | None = None
    public_secure: bool | None = None
    public_region: str | None = None


class RequestLimits(BaseModel):
    """Limits every public RPC enforces (``services.common.limits``), the ``server.limits``
    section (``EVOHARNESS_SERVER__LIMITS__<FIELD>``). An over-limit request is refused with
    INVALID_ARGUMENT (sizes and counts in the message) or RESOURCE_EXHAUSTED (metadata, load),
    the message naming the field and the limit; nothing is generated or stored for it.

    Every ``prompt`` / ``negative_prompt`` field is held to the project's one prompt limit,
    ``evoharness.tasks.models.MAX_PROMPT_CHARS`` characters (the limit of a task and of the
    CLI; not a setting, so server and CLI cannot disagree). ``max_references``: reference images in one request
    (default 8). ``max_reference_bytes``: size of one reference image object (default 16 MiB).
    ``max_layout_items``: layout boxes in one program (default 64). ``max_metadata_bytes``:
    request metadata (headers), keys plus values (default 64 KiB). ``max_concurrent_rpcs``:
    RPCs a server accepts at once, running or queued for a handler thread (gRPC's
    ``maximum_concurrent_rpcs``; default 64); the next is refused with RESOURCE_EXHAUSTED at
    once instead of queueing without bound (0 = unbounded).
    """

    model_config = ConfigDict(extra="forbid")

    max_references: int = Field(default=8, ge=0)
    max_reference_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    max_layout_items: int = Field(default=64, ge=0)
    max_metadata_bytes: int = Field(default=64 * 1024, ge=1024)
    max_concurrent_rpcs: int = Field(default=64, ge=0)


class ServerSettings(BaseModel):
    """The gRPC server every service runs (``services.common.server``).

    ``host``/``port``: gRPC bind address (port 0 = pick a free one). ``metrics_port``:
    Prometheus HTTP endpoint (0 = pick a free one, -1 = disabled). ``max_message_bytes``:
    send and receive limit for one message (default 16 MiB). ``max_workers``: handler threads.
    ``tls_cert_file``/``tls_key_file``: enable TLS when both are set;
    ``tls_client_ca_file``: require client certificates signed by this CA (mTLS).
    ``auth_token``: when non-empty, every RPC but health/reflection needs
    ``authorization: Bearer <token>`` metadata (from ``EVOHARNESS_SERVER__AUTH_TOKEN`` only).
    ``grace_seconds``: how long in-flight RPCs may finish on shutdown.
    ``max_request_seconds``: server-side cap on one RPC's deadline. A call without a deadline
    (gRPC's default, grpcurl's too) or with one further away than this runs under this cap;
    0 = no cap (such calls then have no deadline at all).
    ``limits``: request size, count and concurrency limits (``RequestLimits``).
    """

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=50051, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=-1, le=65535)
    max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    max_workers: int = Field(default=8, ge=1)
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None
    auth_token: SecretStr = SecretStr("")
    grace_seconds: float = Field(default=5.0, ge=0)
    max_request_seconds: float = Field(default=900.0, ge=0)
    ready_file: str | None = None
    limits: RequestLimits = Field(default_factory=RequestLimits)


class ClientSettings(BaseModel):
    """How this process calls the *other* services of the platform (the runtime calls the
    registry, generation and verification services; the worker calls generation,
    verification, proposer and registry).

    ``tls_ca_file``: the CA that signed the other services' certificates; set, every outgoing
    channel uses TLS and checks the server's certificate against it (None: plaintext).
    The certificates must name the host of the address the caller dials (an IP SAN for
    ``127.0.0.1``).
    The bearer token sent is ``server.auth_token``: one token per deployment, required by
    every service and sent by every caller (``evoharness up`` generates it).
    """

    model_config = ConfigDict(extra="forbid")

    tls_ca_file: str | None = None

    def channel_options(self, token: SecretStr) -> dict[str, Any]:
        """Keyword arguments of the services' clients (``token``, ``tls_ca_file``) for a
        caller whose bearer token is ``token``."""
        return {"token": token.get_secret_value() or None, "tls_ca_file": self.tls_ca_file}


class ServiceSettings(BaseSettings):
    """Base for every service's settings: a ``server`` section, an ``s3`` section, a
    ``client`` section (outgoing calls to the other services), and the service's own sections
    (subclasses add fields). Load with ``load_settings``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid"
    )
    yaml_file: ClassVar[str | None] = None

    server: ServerSettings = Field(default_factory=ServerSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    client: ClientSettings = Field(default_factory=ClientSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = cls.yaml_file or os.environ.get(f"{ENV_PREFIX}CONFIG")
        if path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)


T = TypeVar("T", bound="ServiceSettings")


def _read_yaml(path: Path) -> Any:
    """Parse the YAML file; ``ValueError`` naming ``path:line`` in one line when it cannot."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{where}: invalid YAML: {problem}") from None


#: ``scheme://user:password@host``: a URL that carries a password.
_URL_WITH_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://[^/@\s:]*:[^/@\s]+@")


def _urls_with_password(data: Any, prefix: str = "") -> list[str]:
    """Dotted paths of string values that are URLs with an embedded password."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _urls_with_password(v, f"{prefix}{k}.")]
    if isinstance(data, str) and _URL_WITH_PASSWORD.match(data):
        return [prefix.rstrip(".")]
    return []


def _check_no_secrets(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    for dotted in _urls_with_password(data):
        env = f"{ENV_PREFIX}{dotted.upper().replace('.', '__')}"
        raise ValueError(
            f"{path}: {dotted} is a URL with a password (a secret); set it with the {env} "
            "environment variable"
        )
    for dotted in SECRET_FIELDS:
        section, fld = dotted.split(".")
        sec = data.get(section)
        if isinstance(sec, dict) and sec.get(fld):
            env = f"{ENV_PREFIX}{section.upper()}__{fld.upper()}"
            raise ValueError(
                f"{path}: {dotted} is a secret; set it with the {env} environment variable"
            )


def load_settings(cls: type[T], config: str | Path | None = None, **overrides: Any) -> T:
    """Load ``cls`` from the YAML ``config`` (or ``$EVOHARNESS_CONFIG``), environment variables
    and keyword ``overrides`` (nested dicts, highest precedence).

    Raises ``ValueError`` naming the file when it is missing, not a mapping, or sets a secret;
    ``pydantic.ValidationError`` naming the field for bad values.
    """
    path = Path(config) if config else None
    if path is None and os.environ.get(f"{ENV_PREFIX}CONFIG"):
        path = Path(os.environ[f"{ENV_PREFIX}CONFIG"])
    if path is not None:
        if not path.is_file():
            what = "is a directory, not a file" if path.is_dir() else "does not exist"
            raise ValueError(f"config file {path} {what}")
        _check_no_secrets(_read_yaml(path) or {}, path)
    sub = type(cls.__name__, (cls,), {"yaml_file": str(path) if path else None})
    return sub(**overrides)  # type: ignore[no-any-return]
